"""A run's options are part of its identity (docs/reliability.md, round four): a checkpoint records
the options that define the function its parameters compute, and resuming (``checkpoint_last.pt``,
``--restore-file``), ``--model-overrides``, averaging, ensembles and export refuse other options
unless they are allowed on purpose (``--allow-changed-options``, the ``allow_changed_options``
override key, the solver options at load time), naming the option, both values and the fix.
Options that do not change the function (dropout, learning rate, batch size) may differ;
checkpoints written before the record load as before, with a note. Inputs are untrained tiny
models saved in this process by fairseq's Trainer (:mod:`.mismatch_data`); one case runs
fairseq-train's console script, the others its entry point in this process (:mod:`testkit.in_process`)."""

from __future__ import annotations

import logging
import re
import shutil
from functools import cached_property
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

import pytest
import torch
from fairseq import checkpoint_utils
from fairseq.models.transformer import TransformerModel

from ode_seq.checkpoint_files import load_checkpoint
from ode_seq.training_data.model_options import OptionsMismatchError, differences
from testkit.in_process import run_in_process
from tests.e2e.cli import TINY_MODEL
from tests.fixtures.make_fixtures import CHECKPOINTS, HERE
from tests.fixtures.make_fixtures import TINY as FIXTURE_SIZES
from tests.reliability import mismatch_data as md
from tests.reliability.corpus import QUIET_CPU
from tests.reliability.refusals import Command, Refusal, case_ids, case_runner, check_error, check_exit_and_outputs

LM = ["--task", "language_modeling", "--tokens-per-sample", "32", "--criterion", "cross_entropy"]
PCFORMER_LM = [*LM, "--arch", "ode_transformer_lm_pcformer_gpt2_tiny"]  # RK4 predictor, EMA weights, corrector
RK4_LM = [*LM, "--arch", "ode_transformer_lm_rk4_gpt2_tiny"]
RK4 = [*md.TRANSLATION, *md.RK4, "--share-all-embeddings"]  # encoder RK4, decoder Euler; exportable to hf
TRANSFORMER = md.TRANSLATION + md.TRANSFORMER
TRAINING = ["--optimizer", "adam", "--lr", "0.001", "--max-tokens", "200", *QUIET_CPU, "--max-update", "1"]
SHORT_OUTPUT = ["--beam", "2", "--max-len-a", "0", "--max-len-b", "8", "--gen-subset", "valid"]
RESUME_FIX = (
    r"Resume with the checkpoint's options \({}\); to train with the new ones, start a new run in another --save-dir"
)
WRITTEN = ("ckpt/checkpoint_best.pt", "ckpt/checkpoint1*.pt", "ckpt/checkpoint_1_*.pt")


class World:
    """The inputs of every case, each made on first use."""

    def __init__(self, root: Path, data_bin: Path) -> None:
        self.root, self.data_bin = root, data_bin

    @cached_property
    def lm_data(self) -> Path:
        """Language-modelling data with a training split (the source side's validation text)."""
        data = md.language_model_data(self.data_bin, self.root / "lm_bin")
        for suffix in ("bin", "idx"):
            shutil.copy(data / f"valid.{suffix}", data / f"train.{suffix}")
        return data

    @cached_property
    def pcformer_lm(self) -> Path:
        return md.save(self.lm_data, self.root / "pcformer_lm.pt", PCFORMER_LM)

    @cached_property
    def rk4_lm(self) -> Path:
        return md.save(self.lm_data, self.root / "rk4_lm.pt", RK4_LM)

    @cached_property
    def rk4(self) -> Path:
        return md.save(self.data_bin, self.root / "rk4.pt", RK4)

    @cached_property
    def transformer(self) -> Path:
        return md.save(self.data_bin, self.root / "transformer.pt", TRANSFORMER)

    @cached_property
    def edited(self) -> Path:
        """rk4.pt with the method in its saved configuration changed to heun after training."""
        state = load_checkpoint(str(self.rk4))
        state["cfg"]["model"].encoder_ode_method = "heun"
        torch.save(state, self.root / "edited.pt")
        return self.root / "edited.pt"

    @cached_property
    def method_change(self) -> Tuple[Path, Path]:
        """Two checkpoints of one LM run: before and after it was resumed as Heun on purpose."""
        before, after = self.root / "run_rk4.pt", self.root / "run_heun.pt"
        md.trainer(self.lm_data, RK4_LM).save_checkpoint(str(before), {})
        resumed = md.trainer(self.lm_data, [*RK4_LM, "--decoder-ode-method", "heun", *allow("decoder_ode_method")])
        resumed.load_checkpoint(str(before))
        resumed.save_checkpoint(str(after), {})
        return before, after


def allow(names: str) -> List[str]:
    return ["--allow-changed-options", names]


def resume(data: Path, checkpoint: Path, case: Path, argv: Sequence[str], *extra: str) -> Command:
    """fairseq-train on a save dir whose checkpoint_last.pt is a copy of ``checkpoint``."""
    (case / "ckpt").mkdir()
    shutil.copy(checkpoint, case / "ckpt" / "checkpoint_last.pt")
    return train(data, case, argv, *extra)


def train(data: Path, case: Path, argv: Sequence[str], *extra: str) -> Command:
    return "fairseq-train", [
        str(data),
        "--user-dir",
        "user_dir",
        *argv,
        *TRAINING,
        "--save-dir",
        str(case / "ckpt"),
        *extra,
    ]


def generate(data: Path, path: str, *extra: str) -> Command:
    return "fairseq-generate", [str(data), "--user-dir", "user_dir", "--path", path, *SHORT_OUTPUT, *extra]


def overrides(text: str) -> List[str]:
    return ["--model-overrides", text]


RESUMED = dict(outputs=WRITTEN, kept=("ckpt/checkpoint_last.pt",))
CASES: Dict[str, Refusal] = {
    "train: a PCformer LM (RK4 predictor) resumed from checkpoint_last.pt as Heun": Refusal(
        lambda w, case: resume(w.lm_data, w.pcformer_lm, case, PCFORMER_LM, "--decoder-ode-method", "heun"),
        r"checkpoint_last\.pt was trained with other model options than this run's: decoder_ode_method is 'rk4' in "
        r"the checkpoint but 'heun' in this run\..*another model under the same run \(nothing was trained or written\)",
        RESUME_FIX.format("--decoder-ode-method rk4") + r".*pass --allow-changed-options decoder_ode_method",
        **RESUMED,
        console_script=True,
    ),
    "train: an RK4 LM resumed as Heun": Refusal(
        lambda w, case: resume(w.lm_data, w.rk4_lm, case, RK4_LM, "--decoder-ode-method", "heun"),
        r"decoder_ode_method is 'rk4' in the checkpoint but 'heun' in this run",
        RESUME_FIX.format("--decoder-ode-method rk4"),
        **RESUMED,
    ),
    "train: a translation RK4 run continued as Heun": Refusal(
        lambda w, case: resume(w.data_bin, w.rk4, case, RK4, "--encoder-ode-method", "heun"),
        r"checkpoint_last\.pt was trained with other model options than this run's: encoder_ode_method is 'rk4' in "
        r"the checkpoint but 'heun' in this run",
        RESUME_FIX.format("--encoder-ode-method rk4") + r".*pass --allow-changed-options encoder_ode_method",
        **RESUMED,
    ),
    "train: a translation RK4 run continued with another field form (--ode-field parallel-branch)": Refusal(
        lambda w, case: resume(w.data_bin, w.rk4, case, RK4, "--ode-field", "parallel-branch"),
        r"ode_field is 'residual-branch' in the checkpoint but 'parallel-branch' in this run",
        RESUME_FIX.format("--ode-field residual-branch"),
        **RESUMED,
    ),
    "train --restore-file: a checkpoint trained with another method, into a new save dir": Refusal(
        lambda w, case: train(w.data_bin, case, RK4, "--encoder-ode-method", "heun", "--restore-file", str(w.rk4)),
        r"rk4\.pt was trained with other model options than this run's: encoder_ode_method is 'rk4'",
        RESUME_FIX.format("--encoder-ode-method rk4") + r".*--finetune-from-model \S*rk4\.pt",
        outputs=("ckpt/checkpoint*.pt",),
    ),
    "train: fairseq's transformer resumed with another --activation-fn": Refusal(
        lambda w, case: resume(w.data_bin, w.transformer, case, TRANSFORMER, "--activation-fn", "gelu"),
        r"activation_fn is 'relu' in the checkpoint but 'gelu' in this run",
        RESUME_FIX.format("--activation-fn relu") + r" \(from these parameters: --finetune-from-model \S+\)$",
        **RESUMED,
    ),
    "train: an LM resumed with another --tokens-per-sample (its maximum positions)": Refusal(
        lambda w, case: resume(w.lm_data, w.rk4_lm, case, RK4_LM, "--tokens-per-sample", "16"),
        r"max_target_positions is 32 in the checkpoint but 16 in this run \(a language model's is its "
        r"--tokens-per-sample\)",
        RESUME_FIX.format("--max-target-positions 32"),
        **RESUMED,
    ),
    "train: --allow-changed-options naming a misspelt option": Refusal(
        lambda w, case: resume(
            w.lm_data, w.rk4_lm, case, RK4_LM, "--decoder-ode-method", "heun", *allow("decoder_ode_methd")
        ),
        r"--allow-changed-options names decoder_ode_methd, which is not one of the options that define this model",
        r"did you mean decoder_ode_method\?",
        **RESUMED,
    ),
    "average: checkpoints of one run before and after a method change": Refusal(
        lambda w, case: (
            "python",
            [
                "-m",
                "ode_seq.cli.average",
                "--inputs",
                *map(str, w.method_change),
                "--output",
                str(case / "averaged.pt"),
            ],
        ),
        r"run_heun\.pt was trained with other model options than \S*run_rk4\.pt: decoder_ode_method 'heun' in "
        r"\S*run_heun\.pt but 'rk4' in \S*run_rk4\.pt; the mean of parameters trained for different models is neither",
        r"average checkpoints of one run, saved with the same model options",
        outputs=("averaged.pt*",),
        exit_status=2,
    ),
    "generate --model-overrides another field form for an RK4 checkpoint": Refusal(
        lambda w, case: generate(w.data_bin, str(w.rk4), *overrides("{'ode_field': 'parallel-branch'}")),
        r"rk4\.pt was trained with other model options than it is loaded with \(--model-overrides sets ode_field\): "
        r"ode_field is 'residual-branch' in its record but 'parallel-branch' as loaded",
        r"--model-overrides may change --\*-ode-method, --\*-ode-steps.*add 'allow_changed_options': 'ode_field' to "
        r"--model-overrides",
    ),
    "generate --model-overrides another --activation-fn for fairseq's transformer": Refusal(
        lambda w, case: generate(w.data_bin, str(w.transformer), *overrides("{'activation_fn': 'gelu'}")),
        r"transformer\.pt was trained with other model options than it is loaded with \(--model-overrides sets "
        r"activation_fn\): activation_fn is 'relu' in its record but 'gelu' as loaded",
        r"Load it with the recorded options \(--model-overrides \"\{'activation_fn': 'relu'\}\"\)",
    ),
    "eval-lm --model-overrides another activation for a GPT-2-sized RK4 LM": Refusal(
        lambda w, case: (
            "fairseq-eval-lm",
            [
                str(w.lm_data),
                "--user-dir",
                "user_dir",
                "--path",
                str(w.rk4_lm),
                "--gen-subset",
                "valid",
                "--tokens-per-sample",
                "32",
                *overrides("{'activation_fn': 'relu'}"),
            ],
        ),
        r"rk4_lm\.pt was trained with other model options than it is loaded with \(--model-overrides sets "
        r"activation_fn\): activation_fn is 'gelu' in its record but 'relu' as loaded",
        r"add 'allow_changed_options': 'activation_fn'",
    ),
    "generate: a checkpoint whose saved configuration was changed after training": Refusal(
        lambda w, case: generate(w.data_bin, str(w.edited)),
        r"edited\.pt was trained with other model options than it is loaded with \(its saved configuration was "
        r"changed after training\): encoder_ode_method is 'rk4' in its record but 'heun' as loaded",
        r"Load it with the recorded options \(write them back into its cfg\['model'\], or load it with "
        r"--model-overrides \"\{'encoder_ode_method': 'rk4'\}\"\)",
    ),
    "generate: an ensemble whose second checkpoint's configuration was changed": Refusal(
        lambda w, case: generate(w.data_bin, f"{w.transformer}:{w.edited}"),
        r"edited\.pt was trained with other model options than it is loaded with",
        r"'encoder_ode_method': 'rk4'",
    ),
    "export --to hf: a checkpoint whose saved configuration was changed": Refusal(
        lambda w, case: (
            "python",
            ["-m", "ode_seq.cli.export", "--to", "hf", "--path", str(w.edited), "--output", str(case / "hf")],
        ),
        r"export: error: \S*edited\.pt was trained with other model options than it is loaded with",
        r"'encoder_ode_method': 'rk4'",
        outputs=("hf*", ".export-*"),
        exit_status=2,
    ),
}


@pytest.fixture(scope="module")
def world(data_bin, tmp_path_factory) -> World:
    return World(tmp_path_factory.mktemp("identity"), data_bin)


@pytest.fixture(scope="module")
def outcome(world, tmp_path_factory):
    return case_runner(CASES, world, tmp_path_factory)


@pytest.mark.parametrize("name", case_ids(CASES))
def test_other_options_exit_non_zero_without_writing_output(name, outcome):
    check_exit_and_outputs(CASES[name], outcome(name))


@pytest.mark.parametrize("name", case_ids(CASES))
def test_other_options_error_names_the_option_both_values_and_the_fix(name, outcome):
    check_error(CASES[name], outcome(name))


def test_a_checkpoint_records_the_options_that_define_its_model(world):
    recorded = load_checkpoint(str(world.pcformer_lm))["task_state"]["model_options"]
    assert recorded["model"] == "ode_transformer_lm"
    expected = {"decoder_ode_method": "rk4", "ode_coefficients": "ema", "decoder_ode_corrector": "multistep"}
    assert {name: recorded[name] for name in expected} == expected
    assert recorded["decoder_ode_corrector_history"] == 3 and recorded["decoder_ode_steps"] == 1
    assert recorded["max_target_positions"] == 32 and recorded["decoder_layers"] == 2
    not_the_function = (
        "dropout",
        "attention_dropout",
        "decoder_layerdrop",
        "ode_check_finite",
        "allow_changed_options",
    )
    assert [name for name in not_the_function if name in recorded] == []


def test_resuming_with_allow_changed_options_trains_on_and_records_the_new_method(world, tmp_path):
    tool, args = resume(world.lm_data, world.pcformer_lm, tmp_path, PCFORMER_LM, "--decoder-ode-method", "heun")
    result = run_in_process(tool, [*args, *allow("decoder_ode_method")])
    assert result.returncode == 0, result.stderr[-3000:]
    task_state = load_checkpoint(str(tmp_path / "ckpt" / "checkpoint_last.pt"))["task_state"]
    assert task_state["model_options"]["decoder_ode_method"] == "heun"
    assert task_state["run"]["id"] == load_checkpoint(str(world.pcformer_lm))["task_state"]["run"]["id"]


def test_a_resume_with_other_dropout_learning_rate_and_batch_size_is_accepted(world, tmp_path):
    other = ["--dropout", "0.3", "--attention-dropout", "0.2", "--lr", "0.01", "--max-tokens", "150"]
    result = run_in_process(*resume(world.data_bin, world.rk4, tmp_path, RK4, *other))
    assert result.returncode == 0, result.stderr[-3000:]
    assert load_checkpoint(str(tmp_path / "ckpt" / "checkpoint_last.pt"))["optimizer_history"][-1]["num_updates"] == 1


def test_a_resume_spelling_out_defaults_or_options_the_model_does_not_read_is_accepted(world, tmp_path):
    """--encoder-ode-steps 1 is the default (the share group size); without an adaptive method the
    tolerances and without a corrector its history are not read."""
    unread = ["--encoder-ode-steps", "1", "--ode-rtol", "0.01", "--encoder-ode-corrector-history", "5"]
    result = run_in_process(*resume(world.data_bin, world.rk4, tmp_path, RK4, *unread))
    assert result.returncode == 0, result.stderr[-3000:]


# Loading with options that --model-overrides may change: the solver, or what allow_changed_options names.
ALLOWED_OVERRIDES = {
    "another method and step count (the solver)": "{'encoder_ode_method': 'heun', 'encoder_ode_steps': 2}",
    "another field form, allowed on purpose": "{'ode_field': 'parallel-branch', 'allow_changed_options': 'ode_field'}",
}


@pytest.mark.parametrize("name", case_ids(ALLOWED_OVERRIDES))
def test_model_overrides_of_the_solver_or_of_an_allowed_option_still_generate(name, world):
    result = run_in_process(*generate(world.data_bin, str(world.rk4), *overrides(ALLOWED_OVERRIDES[name])))
    assert result.returncode == 0, result.stderr[-3000:]


def test_the_hub_interface_refuses_another_field_form_unless_allowed(world):
    kwargs = dict(checkpoint_file=world.rk4.name, data_name_or_path=str(world.data_bin))
    with pytest.raises(OptionsMismatchError, match=r"rk4\.pt was trained with other model options .*ode_field"):
        TransformerModel.from_pretrained(str(world.rk4.parent), ode_field="parallel-branch", **kwargs)
    hub = TransformerModel.from_pretrained(
        str(world.rk4.parent), ode_field="parallel-branch", allow_changed_options="ode_field", **kwargs
    )
    assert isinstance(hub.translate("w1 w2", beam=1, max_len_b=4), str)


def test_fine_tuning_into_another_method_is_logged_not_refused(world, caplog):
    argv = [*RK4, "--encoder-ode-method", "heun", "--finetune-from-model", str(world.rk4)]
    with caplog.at_level(logging.WARNING, logger="ode_seq.training_data.recording_task"):
        md.trainer(world.data_bin, argv).load_checkpoint(str(world.rk4), reset_optimizer=True)
    assert re.search(
        r"fine-tuning \S*rk4\.pt into a model with other options: encoder_ode_method is 'rk4' in the checkpoint but "
        r"'heun' now \(a new run",
        caplog.text,
    )


def test_a_checkpoint_written_before_the_record_resumes_as_before_with_a_note(caplog):
    """The fixture rk4.pt records neither dictionaries nor options: resumed even as Heun, as before."""
    path = f"{CHECKPOINTS}/rk4.pt"
    argv = ["--task", "translation", "--source-lang", "src", "--target-lang", "tgt", "--criterion", "cross_entropy"]
    trainer = md.trainer(
        Path(HERE), [*argv, *FIXTURE_SIZES, "--arch", "ode_transformer_rk4", "--encoder-ode-method", "heun"]
    )
    with caplog.at_level(logging.INFO, logger="ode_seq.training_data.record"):
        trainer.load_checkpoint(path)
    notes = [r.getMessage() for r in caplog.records if "has no record" in r.getMessage()]
    assert notes == [
        f"{path} has no record of the dictionaries or model options it was trained with (it was written before "
        "ode-seq recorded them): its data and the options of the model built are not checked against it"
    ]


@pytest.mark.parametrize(
    "recorded_model, model, kind",
    [
        ("ode_transformer_nonauto", "ode_transformer", "time-dependent"),
        ("stable_ode_transformer", "ode_transformer", "stable"),
        ("ode_transformer_lm_nonauto", "ode_transformer_lm", "time-dependent"),
        ("stable_ode_transformer_lm", "ode_transformer_lm", "stable"),
    ],
)
def test_a_record_of_a_model_of_one_layer_kind_is_the_task_model_with_that_layer_kind(recorded_model, model, kind):
    """Checkpoints recorded before the layer kind was an option name the kind's own model."""
    recorded = {"model": recorded_model, "decoder_layers": 2}
    assert differences(recorded, {"model": model, "layer_kind": kind, "decoder_layers": 2}) == []
    other = {"model": model, "layer_kind": "standard", "decoder_layers": 2}
    assert differences(recorded, other) == [("layer_kind", kind, "standard")]


def test_an_exported_checkpoint_records_the_exported_model_and_loads(world, tmp_path):
    """A non-autonomous model exported at 3 steps is a 3-layer fairseq transformer: its record says so."""
    argv = [*md.TRANSLATION, "--arch", "ode_transformer_nonauto_small", *TINY_MODEL]
    nonauto = md.save(world.data_bin, tmp_path / "nonauto.pt", argv)
    exported = tmp_path / "plain.pt"
    steps = ["--encoder-steps", "3", "--decoder-steps", "3"]
    result = run_in_process(
        "python", ["-m", "ode_seq.cli.export", "--path", str(nonauto), "--output", str(exported), *steps]
    )
    assert result.returncode == 0, result.stderr[-3000:]
    recorded = load_checkpoint(str(exported))["task_state"]["model_options"]
    assert (recorded["model"], recorded["encoder_layers"], recorded["decoder_layers"]) == ("transformer", 3, 3)
    (model,), _, _ = checkpoint_utils.load_model_ensemble_and_task([str(exported)])
    assert len(model.encoder.layers) == 3
