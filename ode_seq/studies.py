"""The studies this repository runs, as data: one table of every study's configurations.

Read by the translation study (examples/translation/quality_study.sh, study_table.py,
tuning_table.py), the language-model study (examples/language_modeling/study.sh,
lm_study_table.py) and the GPU run (benchmarks/gpu_study.py, gpu_lm_study.py); the shell scripts
read it through ``python -m ode_seq.studies shell STUDY``, which prints bash assignments.

A configuration is a registered architecture (at the CPU study's size; the GPU run gives every
size option itself), model options beyond the architecture's, and a depth: its stack's layers
(the encoder's in translation) as a multiple of the study's recipe. A configuration may be
trained to another's training FLOPs (``compute_of``, paired with it seed by seed) or made from
another's trained layers (``teacher``, likewise paired). A configuration's name is the directory
of its run records (results/), so a name and what it trains never change once it has records.
Standard library only: the shell scripts read it at every start.
"""

from __future__ import annotations

import argparse
import re
import shlex
import sys
from dataclasses import dataclass, field
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

# What the study tables read from a run's fairseq-train log (fairseq 0.12's INFO lines).
PARAMS = re.compile(r"num\. (?:shared )?model params: ([\d,]+)")  # group 1: the parameter count
TRAINING_SECONDS = re.compile(r"done training in ([\d.]+) seconds")  # a finished run; group 1: seconds


@dataclass(frozen=True)
class Configuration:
    name: str
    label: str  # how the tables name it
    arch: str  # a registered architecture
    options: Dict[str, str] = field(default_factory=dict)  # model options beyond the architecture's (dest names)
    depth: int = 1  # layers of the study's stack, as a multiple of its recipe's
    compute_of: str = ""  # trained to the training FLOPs of this configuration's run, paired with it
    teacher: str = ""  # made from this configuration's trained layers, paired with it
    default: bool = False  # in the study's default --configs
    tuned: bool = False  # its lr is tuned by default (the LM study's --tuned)
    gpu: bool = False  # in the GPU run's default --configs


@dataclass(frozen=True)
class Study:
    name: str
    baseline: str  # every configuration is compared with it seed by seed
    layers_option: str  # the option of the stack that ``depth`` multiplies
    layers: int  # that stack's layers in the study's recipe
    tune_lrs: Tuple[str, ...]  # the peak learning rates tuning tries by default
    configurations: Tuple[Configuration, ...]  # in the study's priority order
    tune_warmups: Tuple[str, ...] = ()  # the warmups tuning tries by default at the best lr (translation)
    schedule: Tuple[str, ...] = ()  # the order runs start in, when not the priority order

    def __post_init__(self) -> None:
        names = [c.name for c in self.configurations]
        if len(set(names)) != len(names):
            raise ValueError(f"study {self.name} lists a configuration twice: {' '.join(names)}")
        known = set(names)
        for config in self.configurations:
            for relation, other in (("compute_of", config.compute_of), ("teacher", config.teacher)):
                if other and other not in known:
                    raise ValueError(
                        f"study {self.name}: {config.name}'s {relation} names {other}, which is not one of its "
                        "configurations; add it or name one of: " + ", ".join(names)
                    )
        if self.baseline not in known:
            raise ValueError(f"study {self.name}: its baseline {self.baseline} is not one of its configurations")
        if self.schedule and sorted(self.schedule) != sorted(names):
            raise ValueError(
                f"study {self.name}: its schedule must list each configuration once; it lacks "
                f"{sorted(known - set(self.schedule))} or lists others {sorted(set(self.schedule) - known)}"
            )

    def __getitem__(self, name: str) -> Configuration:
        for config in self.configurations:
            if config.name == name:
                return config
        raise KeyError(f"{name} is not a configuration of the {self.name} study; choose from: {' '.join(self.names())}")

    def names(self) -> List[str]:
        return [c.name for c in self.configurations]

    def label(self, name: str) -> str:
        return self[name].label

    def layers_of(self, name: str) -> int:
        return self[name].depth * self.layers

    def pairs(self, relation: str) -> Dict[str, str]:
        """Configuration → the one it is paired with by ``relation`` (compute_of or teacher)."""
        return {c.name: getattr(c, relation) for c in self.configurations if getattr(c, relation)}

    def gpu_choices(self) -> List[str]:
        """The configurations a round-robin GPU study can train: all but those sized by, or made
        from, another's run (every configuration there trains the same updates, from scratch)."""
        return [c.name for c in self.configurations if not (c.compute_of or c.teacher)]


TRANSLATION = Study(
    name="translation",
    baseline="residual_6_6",
    layers_option="encoder_layers",
    layers=6,
    tune_lrs=("1e-3", "2e-3", "4e-3", "8e-3"),
    tune_warmups=("150", "600"),
    configurations=(
        Configuration("residual_6_6", "residual (Euler) 6-6", "ode_transformer_euler_small", default=True, gpu=True),
        Configuration(
            "rk2_learned_6_6",
            "RK2, learned coefficients, 6-6",
            "ode_transformer_rk2_learned_small",
            default=True,
            gpu=True,
        ),
        Configuration("rk4_6_6", "RK4 6-6", "ode_transformer_rk4_small", default=True, gpu=True),
        Configuration(
            "residual_24_6",
            "residual 24-6 (same compute as RK4 6-6)",
            "ode_transformer_euler_small",
            depth=4,
            default=True,
            gpu=True,
        ),
        Configuration(
            "pcformer_6_6", "PCformer 6-6 (RK4 predictor, EMA weights, multistep corrector)", "pcformer_small"
        ),
        Configuration(
            "iiet_6_6",
            "IIET 6-6 (3 iterations)",
            "ode_transformer_rk4_small",
            options={"encoder_ode_method": "iie3"},
        ),
        Configuration(
            "residual_6_6_pcformer_compute",
            "residual (Euler) 6-6 trained to PCformer 6-6's training FLOPs",
            "ode_transformer_euler_small",
            compute_of="pcformer_6_6",
        ),
    ),
    # Most expensive first: the short runs fill the gaps at the end of each phase.
    schedule=(
        "residual_6_6_pcformer_compute",
        "pcformer_6_6",
        "residual_24_6",
        "rk4_6_6",
        "iiet_6_6",
        "rk2_learned_6_6",
        "residual_6_6",
    ),
)

# PCformer as its paper runs language models: a second-order predictor (Heun, EMA weights) and the
# multistep corrector. Residual with DLCL: a learned weighted mix of the embedding and every earlier
# layer's output as each layer's input (DenseFormer's depth-weighted average), about 1x compute.
LANGUAGE_MODEL = Study(
    name="lm",
    baseline="residual",
    layers_option="decoder_layers",
    layers=2,  # examples/language_modeling/train.sh's bible recipe
    tune_lrs=("4e-3", "8e-3", "1.6e-2"),
    configurations=(
        Configuration("residual", "residual (Euler)", "ode_transformer_lm_euler", default=True, tuned=True, gpu=True),
        Configuration(
            "rk2_learned",
            "RK2, learned coefficients",
            "ode_transformer_lm_rk2_learned",
            default=True,
            tuned=True,
            gpu=True,
        ),
        Configuration(
            "residual_2x",
            "residual, 2× layers (the compute of RK2-learned)",
            "ode_transformer_lm_euler",
            depth=2,
            default=True,
            gpu=True,
        ),
        Configuration(
            "pcformer_rk2",
            "PCformer (Heun predictor, EMA weights, multistep corrector)",
            "ode_transformer_lm_pcformer",
            options={"decoder_ode_method": "heun"},
            default=True,
        ),
        Configuration(
            "residual_dlcl",
            "residual with DLCL (learned dense layer history)",
            "ode_transformer_lm_euler",
            options={"decoder_layer_history": "learnable_dense"},
            default=True,
        ),
        Configuration("rk4", "RK4", "ode_transformer_lm_rk4", default=True, gpu=True),
        Configuration(
            "pcformer",
            "PCformer (RK4 predictor, EMA weights, multistep corrector)",
            "ode_transformer_lm_pcformer",
            default=True,
            gpu=True,
        ),
        Configuration(
            "iiet",
            "IIET (3 iterations)",
            "ode_transformer_lm_rk4",
            options={"decoder_ode_method": "iie3"},
            default=True,
            gpu=True,
        ),
        Configuration("nonauto", "non-autonomous (weights θ(t))", "ode_transformer_lm_nonauto", default=True),
        # Train with an ODE block, serve at residual cost: the teacher's best checkpoint as the
        # residual model of its layers (ode-seq as-residual), fine-tuned (study.sh --residual-lr).
        Configuration(
            "rk2_learned_as_residual",
            "RK2-learned's layers as a residual model, fine-tuned",
            "ode_transformer_lm_euler",
            teacher="rk2_learned",
            default=True,
        ),
    ),
)

STUDIES: Dict[str, Study] = {study.name: study for study in (TRANSLATION, LANGUAGE_MODEL)}


def option_arguments(options: Mapping[str, object]) -> List[str]:
    """``options`` (values by dest name) as command-line arguments: ``--encoder-ode-method iie3``."""
    return [arg for dest, value in options.items() for arg in (f"--{dest.replace('_', '-')}", str(value))]


def shell_assignments(study: Study) -> str:
    """Bash assignments of ``study``'s table: word lists, and per configuration associative arrays
    (CONFIG_OPTIONS as words, CONFIG_LAYERS the layers of the stack that depth multiplies)."""

    def words(names: Sequence[str]) -> str:
        return shlex.quote(" ".join(names))

    def table(variable: str, values: Dict[str, object]) -> str:
        cells = " ".join(f"[{name}]={shlex.quote(str(value))}" for name, value in values.items())
        return f"declare -A {variable}=({cells})"

    configs = study.configurations
    return "\n".join(
        [
            f"STUDY_CONFIGS={words(study.names())}",
            f"STUDY_SCHEDULE={words(study.schedule or study.names())}",
            f"STUDY_DEFAULT_CONFIGS={words([c.name for c in configs if c.default])}",
            f"STUDY_DEFAULT_TUNED={words([c.name for c in configs if c.tuned])}",
            f"STUDY_TUNE_LRS={words(study.tune_lrs)}",
            f"STUDY_TUNE_WARMUPS={words(study.tune_warmups)}",
            f"STUDY_LAYERS={study.layers}",
            table("CONFIG_ARCH", {c.name: c.arch for c in configs}),
            table("CONFIG_LAYERS", {c.name: study.layers_of(c.name) for c in configs}),
            table("CONFIG_OPTIONS", {c.name: " ".join(option_arguments(c.options)) for c in configs if c.options}),
            table("CONFIG_COMPUTE_OF", study.pairs("compute_of")),
            table("CONFIG_TEACHER", study.pairs("teacher")),
        ]
    )


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ode_seq.studies", description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=("shell", "list"), help="bash assignments of the table, or its rows")
    parser.add_argument("study", choices=sorted(STUDIES))
    args = parser.parse_args(argv)
    study = STUDIES[args.study]
    if args.what == "shell":
        print(shell_assignments(study))
    else:
        for config in study.configurations:
            print(f"{config.name}\t{config.label}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
