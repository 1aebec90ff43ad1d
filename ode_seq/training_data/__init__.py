"""The data a model was trained with, as its checkpoints record it, and the checks that refuse other
data: :mod:`.record` (what is recorded and compared), :mod:`.subword_models` (SentencePiece and
subword-nmt models against a dictionary), :mod:`.recording_task` (the fairseq task mixin)."""
