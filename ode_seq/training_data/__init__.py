"""The data a model was trained with and the options that define it, as its checkpoints record
them, and the checks that refuse other data or options: :mod:`.record` (what is recorded and
compared), :mod:`.model_options` (which options define a model and where they may differ),
:mod:`.subword_models` (SentencePiece and subword-nmt models against a dictionary),
:mod:`.recording_task` (the fairseq task mixin)."""
