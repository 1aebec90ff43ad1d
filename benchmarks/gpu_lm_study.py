"""A short language-model study on one device: ``python -m benchmarks.gpu_lm_study``.

The configurations of the language-model study (ode_seq/studies.py, which
examples/language_modeling/study.sh reads) in its priority order: by default residual (Euler),
RK2 with learned coefficients, residual with twice the layers (the compute of RK2-learned; the one
with more parameters), RK4, PCformer and IIET (3 iterations); on request the others it can train
from scratch (PCformer with a Heun predictor, residual with DLCL, the non-autonomous model); on
the same corpus (the English column of the bundled Bible, prepared by
examples/language_modeling/prepare.sh), at a larger size than the CPU study's 2 layers, d = 128:
6 layers, d = 512, FFN 2048, 8 heads, tied input and output embeddings, pre-norm, 256-token
blocks, dropout 0.3 (the CPU study's 0.1 is for a model 20 times smaller on the same 863k tokens).
They are trained as :mod:`benchmarks.gpu_study` trains its translation models: in one process,
round-robin, one update of each in turn (the same batches in the same order), as many as the time
allows, each fairseq-train's own Trainer (Adam (0.9, 0.98), weight decay 0.01, inverse square root
schedule, cross-entropy, --bf16 or --fp16 as given).

Written to ``--out`` as JSON lines as they happen: validation NLL in bits per token (perplexity
2^NLL) every ``valid_every`` updates and at the end, then the test set's, both over the
256-token blocks that fairseq-train validates on (no context carried across blocks; the CPU study's
test perplexity uses a context window of 64 and is lower for it).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import List, Optional, Sequence

from benchmarks.gpu_study import parse_study_args, round_robin, study_parser
from ode_seq.studies import LANGUAGE_MODEL, option_arguments
from testkit.device_checks import trainer_arguments
from testkit.in_process import PLUGIN_DIR


@dataclass(frozen=True)
class LMRecipe:
    embed_dim: int = 512
    heads: int = 8
    layers: int = 6
    tokens_per_sample: int = 256
    max_tokens: int = 8192
    lr: float = 1e-3
    warmup: int = 200
    dropout: float = 0.3
    valid_every: int = 50

    def arguments(self, data_bin: str, config: str, precision: str, device: str) -> List[str]:
        """fairseq-train's command line of ``config`` at this recipe."""
        configuration = LANGUAGE_MODEL[config]
        sizes = dict(
            decoder_layers=configuration.depth * self.layers,
            decoder_embed_dim=self.embed_dim,
            decoder_input_dim=self.embed_dim,
            decoder_output_dim=self.embed_dim,
            decoder_ffn_embed_dim=4 * self.embed_dim,
            decoder_attention_heads=self.heads,
            **configuration.options,
        )
        extra = [
            "--adam-betas",
            "(0.9, 0.98)",
            "--weight-decay",
            "0.01",
            "--clip-norm",
            "0.0",
            "--warmup-init-lr",
            "1e-07",
            "--dropout",
            str(self.dropout),
        ]
        return [
            data_bin,
            "--task",
            "language_modeling",
            "--user-dir",
            PLUGIN_DIR,
            "--arch",
            configuration.arch,
            *option_arguments(sizes),
            "--decoder-normalize-before",
            "--share-decoder-input-output-embed",
            "--tokens-per-sample",
            str(self.tokens_per_sample),
            "--sample-break-mode",
            "none",
            "--criterion",
            "cross_entropy",
            *trainer_arguments(precision, device, self.lr, self.warmup, self.max_tokens, extra),
        ]


SMOKE_RECIPE = LMRecipe(embed_dim=32, heads=2, layers=2, tokens_per_sample=32, max_tokens=256, warmup=4, valid_every=2)


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_study_args(study_parser("python -m benchmarks.gpu_lm_study", __doc__, LANGUAGE_MODEL), argv)
    recipe = SMOKE_RECIPE if args.smoke else LMRecipe()
    with open(args.out, "a", encoding="utf-8") as out:
        round_robin(recipe, args, out, lambda run: dict(test_nll=run.nll("test", recipe.max_tokens)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
