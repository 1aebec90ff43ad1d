"""The table of studies (ode_seq/studies.py): every configuration is a model fairseq-train builds,
the shell scripts read the same table, and a configuration with records keeps its recipe."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from fairseq import options
from fairseq.models import ARCH_MODEL_REGISTRY

from ode_seq.studies import LANGUAGE_MODEL, STUDIES, Configuration, Study, option_arguments
from tests.conftest import TINY
from tests.e2e.cli import ROOT

DECODER = {dest: value for dest, value in TINY.items() if dest.startswith("decoder_")}
TINY_SIZES = {"translation": TINY, "lm": dict(DECODER, decoder_input_dim=32, decoder_output_dim=32)}
TASK = {"translation": "translation", "lm": "language_modeling"}
EVERY_CONFIGURATION = [(study, config) for study in STUDIES.values() for config in study.configurations]


@pytest.mark.parametrize(
    "study, config", EVERY_CONFIGURATION, ids=[f"{s.name}-{c.name}" for s, c in EVERY_CONFIGURATION]
)
def test_every_configuration_is_an_architecture_and_options_that_fairseq_train_parses_and_builds(study, config, task):
    sizes = TINY_SIZES[study.name]
    layers = config.depth * sizes[study.layers_option]
    args = options.parse_args_and_arch(
        options.get_training_parser(),
        ["data", "--task", TASK[study.name], "--user-dir", os.path.join(ROOT, "user_dir"), "--arch", config.arch]
        + option_arguments({**sizes, study.layers_option: layers, **config.options}),
    )
    assert args.arch == config.arch and getattr(args, study.layers_option) == layers
    assert {dest: getattr(args, dest) for dest in config.options} == config.options
    model = ARCH_MODEL_REGISTRY[args.arch].build_model(args, task)
    assert sum(p.numel() for p in model.parameters()) > 0


# What each configuration trained when its records were made (the scripts' tables before ode_seq/studies.py):
# architecture, layers of the stack that depth multiplies, further options, the configuration it is paired
# with. Its name is the directory of those records, and a study resumes from them: these never change.
RECORDED = {
    "translation": {
        "residual_6_6": ("ode_transformer_euler_small", 6, "", ""),
        "rk2_learned_6_6": ("ode_transformer_rk2_learned_small", 6, "", ""),
        "rk4_6_6": ("ode_transformer_rk4_small", 6, "", ""),
        "residual_24_6": ("ode_transformer_euler_small", 24, "", ""),
        "pcformer_6_6": ("pcformer_small", 6, "", ""),
        "iiet_6_6": ("ode_transformer_rk4_small", 6, "--encoder-ode-method iie3", ""),
        "residual_6_6_pcformer_compute": ("ode_transformer_euler_small", 6, "", "pcformer_6_6"),
    },
    "lm": {
        "residual": ("ode_transformer_lm_euler", 2, "", ""),
        "rk2_learned": ("ode_transformer_lm_rk2_learned", 2, "", ""),
        "rk4": ("ode_transformer_lm_rk4", 2, "", ""),
        "pcformer": ("ode_transformer_lm_pcformer", 2, "", ""),
        "residual_2x": ("ode_transformer_lm_euler", 4, "", ""),
        "iiet": ("ode_transformer_lm_rk4", 2, "--decoder-ode-method iie3", ""),
        "nonauto": ("ode_transformer_lm_nonauto", 2, "", ""),
        "pcformer_rk2": ("ode_transformer_lm_pcformer", 2, "--decoder-ode-method heun", ""),
        "residual_dlcl": ("ode_transformer_lm_euler", 2, "--decoder-layer-history learnable_dense", ""),
        "rk2_learned_as_residual": ("ode_transformer_lm_euler", 2, "", "rk2_learned"),
    },
}


@pytest.mark.parametrize("study", STUDIES.values(), ids=list(STUDIES))
def test_a_configuration_with_records_keeps_the_architecture_layers_and_options_it_was_recorded_with(study):
    table = {
        c.name: (c.arch, study.layers_of(c.name), " ".join(option_arguments(c.options)), c.compute_of or c.teacher)
        for c in study.configurations
    }
    assert {name: table[name] for name in RECORDED[study.name]} == RECORDED[study.name]


def test_the_lm_studys_layers_are_those_of_train_shs_bible_recipe():
    train = open(os.path.join(ROOT, "examples", "language_modeling", "train.sh"), encoding="utf-8").read()
    (layers,) = re.findall(r"bible\)\n\s+MODEL=\(--decoder-layers (\d+) ", train)
    assert int(layers) == LANGUAGE_MODEL.layers


@pytest.mark.parametrize("study", STUDIES.values(), ids=list(STUDIES))
def test_the_shell_reads_each_configurations_architecture_layers_options_and_pairing(study):
    script = 'eval "$("$PYTHON" -m ode_seq.studies shell "$STUDY")"\nfor c in $STUDY_CONFIGS; do\n'
    script += '  echo "$c|${CONFIG_ARCH[$c]}|${CONFIG_LAYERS[$c]}|${CONFIG_OPTIONS[$c]:-}|'
    script += '${CONFIG_COMPUTE_OF[$c]:-}|${CONFIG_TEACHER[$c]:-}"\ndone\necho "$STUDY_DEFAULT_CONFIGS|$STUDY_SCHEDULE"'
    env = dict(os.environ, PYTHON=sys.executable, STUDY=study.name, PYTHONPATH=ROOT)
    result = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env, check=True)
    *rows, lists = result.stdout.splitlines()
    assert rows == [
        "|".join([c.name, c.arch, str(study.layers_of(c.name)), " ".join(option_arguments(c.options))])
        + f"|{c.compute_of}|{c.teacher}"
        for c in study.configurations
    ]
    schedule = study.schedule or study.names()
    assert lists == " ".join(c.name for c in study.configurations if c.default) + "|" + " ".join(schedule)


def study_of(*configurations: Configuration, **changes) -> Study:
    fields = dict(name="s", baseline="a", layers_option="decoder_layers", layers=2, tune_lrs=("1e-3",))
    return Study(**{**fields, **changes}, configurations=configurations)


@pytest.mark.parametrize(
    "configurations, changes, message",
    [
        ((Configuration("a", "A", "x"), Configuration("b", "B", "x", compute_of="c")), {}, "b's compute_of names c"),
        ((Configuration("a", "A", "x"), Configuration("b", "B", "x", teacher="c")), {}, "b's teacher names c, which"),
        ((Configuration("a", "A", "x"), Configuration("a", "A2", "x")), {}, "lists a configuration twice: a a"),
        ((Configuration("b", "B", "x"),), {}, "its baseline a is not one of its configurations"),
        ((Configuration("a", "A", "x"),), {"schedule": ("a", "b")}, "lacks [] or lists others ['b']"),
    ],
)
def test_a_table_with_a_dangling_name_is_refused_naming_it(configurations, changes, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        study_of(*configurations, **changes)


def test_an_unknown_configuration_is_refused_with_the_choices():
    with pytest.raises(
        KeyError, match="nope is not a configuration of the lm study; choose from: residual rk2_learned"
    ):
        LANGUAGE_MODEL["nope"]
