"""Data that does not match the model (docs/reliability.md, round three): dictionaries with the
model's size but other symbols, subword models that did not encode the training data, the reverse
language direction, and checkpoints of different runs are refused by every tool, naming the file,
what differs and the fix, with a non-zero exit and no output; the same commands with the right data
work. Checkpoints are saved in this process by fairseq's Trainer (:mod:`.mismatch_data`); one case
per tool runs its console script, the others its entry point in this process (:mod:`testkit.in_process`)."""

from __future__ import annotations

import hashlib
import logging
import re
import shutil
from functools import cached_property
from pathlib import Path
from typing import Callable, Dict, Sequence, Tuple

import pytest
from fairseq import checkpoint_utils
from fairseq.models.transformer import TransformerModel

from ode_seq.checkpoint_files import load_checkpoint
from ode_seq.models.teacher import load_teacher
from ode_seq.training_data.record import DataMismatchError
from testkit.in_process import run_in_process
from tests.e2e.cli import subset_args
from tests.fixtures.make_fixtures import CHECKPOINTS, HERE
from tests.reliability import mismatch_data as md
from tests.reliability.corpus import OPTIMISATION, QUIET_CPU
from tests.reliability.refusals import Command, case_ids, case_runner, check_error, check_exit_and_outputs
from tests.reliability.refusals import Refusal as Mismatch

SENTENCE = "w1 w2 w3\n"
SHORT_OUTPUT = ["--beam", "2", "--max-len-a", "0", "--max-len-b", "8"]  # untrained models rarely stop


class World:
    """The inputs of every case, each made on first use."""

    def __init__(self, root: Path, data_bin: Path) -> None:
        self.root, self.data_bin = root, data_bin

    @cached_property
    def swapped(self) -> Path:
        return md.with_dictionaries(self.data_bin, self.root / "swapped", md.swap_two_symbols)

    @cached_property
    def larger(self) -> Path:
        return md.with_dictionaries(self.data_bin, self.root / "larger", md.three_more_symbols)

    @cached_property
    def separate(self) -> Path:
        return md.separate_dictionaries(self.data_bin, self.root / "separate")

    @cached_property
    def transformer(self) -> Path:
        return md.save(self.data_bin, self.root / "transformer.pt", md.TRANSLATION + md.TRANSFORMER)

    @cached_property
    def rk4(self) -> Path:
        return md.save(self.data_bin, self.root / "rk4.pt", md.TRANSLATION + md.RK4)

    @cached_property
    def other_dictionary(self) -> Path:
        return md.save(self.swapped, self.root / "other_dictionary.pt", md.TRANSLATION + md.TRANSFORMER)

    @cached_property
    def other_run(self) -> Path:
        return md.save(self.data_bin, self.root / "other_run.pt", md.TRANSLATION + md.TRANSFORMER, seed=2)

    @cached_property
    def same_run(self) -> Tuple[Path, Path]:
        """Two checkpoints saved by one training run."""
        trainer = md.trainer(self.data_bin, md.TRANSLATION + md.TRANSFORMER)
        paths = self.root / "checkpoint1.pt", self.root / "checkpoint2.pt"
        for path in paths:
            trainer.save_checkpoint(str(path), {})
        return paths

    @cached_property
    def en_de(self) -> Path:
        data = md.renamed_languages(self.data_bin, self.root / "en_de", "en", "de")
        argv = [*md.TRANSLATION, *md.TRANSFORMER, "--source-lang", "en", "--target-lang", "de"]
        return md.save(data, self.root / "en_de.pt", argv)

    @cached_property
    def separate_model(self) -> Path:
        return md.save(self.separate, self.root / "separate.pt", md.TRANSLATION + md.RK4)

    @cached_property
    def raw(self) -> Path:
        return self.data_bin.parent

    @cached_property
    def other_text(self) -> Path:
        return md.other_corpus(self.root / "other_corpus")

    @cached_property
    def spm(self) -> Path:
        return md.train_sentencepiece(self.raw / "train.src", self.root / "spm")

    @cached_property
    def other_spm(self) -> Path:
        return md.train_sentencepiece(self.other_text, self.root / "other_spm")

    @cached_property
    def spm_data(self) -> Path:
        return md.encoded_dictionaries(self.raw, self.root / "spm_data", md.sentencepiece_encoder(self.spm))

    @cached_property
    def spm_model(self) -> Path:
        return md.save(self.spm_data, self.root / "spm_model.pt", md.TRANSLATION + md.TRANSFORMER)

    @cached_property
    def codes(self) -> Path:
        return md.learn_subword_nmt(self.raw / "train.src", self.root / "bpe.codes")

    @cached_property
    def other_codes(self) -> Path:
        return md.learn_subword_nmt(self.other_text, self.root / "other.codes")

    @cached_property
    def bpe_data(self) -> Path:
        return md.encoded_dictionaries(self.raw, self.root / "bpe_data", md.subword_nmt_encoder(self.codes))

    @cached_property
    def bpe_model(self) -> Path:
        return md.save(self.bpe_data, self.root / "bpe_model.pt", md.TRANSLATION + md.TRANSFORMER)

    @cached_property
    def lm_data(self) -> Path:
        return md.language_model_data(self.data_bin, self.root / "lm_bin")

    @cached_property
    def lm_swapped(self) -> Path:
        return md.with_dictionaries(self.lm_data, self.root / "lm_swapped", md.swap_two_symbols)

    @cached_property
    def lm(self) -> Path:
        return md.save(self.lm_data, self.root / "lm.pt", md.LANGUAGE_MODEL)


def generate(data: Path, path: str, *extra: str) -> Command:
    extra = (*SHORT_OUTPUT, *extra)
    return "fairseq-generate", [str(data), "--user-dir", "user_dir", "--path", path, "--gen-subset", "valid", *extra]


def interactive(data: Path, path: Path, *extra: str) -> Command:
    return "fairseq-interactive", [
        str(data),
        "--user-dir",
        "user_dir",
        "--path",
        str(path),
        "-s",
        "src",
        "-t",
        "tgt",
        *SHORT_OUTPUT,
        *extra,
    ]


def eval_lm(data: Path, path: Path) -> Command:
    sizes = ["--tokens-per-sample", "32", "--batch-size", "4"]
    return "fairseq-eval-lm", subset_args(data, path, "valid", *sizes)


def average(*paths: Path, output: Path) -> Command:
    return "python", ["-m", "ode_seq.cli.average", "--inputs", *map(str, paths), "--output", str(output)]


def export(path: Path, output: Path, *extra: object) -> Command:
    return "python", ["-m", "ode_seq.cli.export", "--path", str(path), "--output", str(output), *map(str, extra)]


def train(data: Path, save_dir: Path, *extra: str) -> Command:
    return "fairseq-train", [
        str(data),
        "--user-dir",
        "user_dir",
        *md.TRANSFORMER,
        *OPTIMISATION,
        *QUIET_CPU,
        "--max-update",
        "1",
        "--save-dir",
        str(save_dir),
        *extra,
    ]


def resume_the_other_way_round(w: World, case: Path) -> Command:
    (case / "ckpt").mkdir()
    shutil.copy(w.transformer, case / "ckpt" / "checkpoint_last.pt")
    return train(w.data_bin, case / "ckpt", "--source-lang", "tgt", "--target-lang", "src")


SWAPPED_SOURCE = (
    r"was trained with another source dictionary than \S*swapped/dict\.src\.txt: symbol 6 is '\w+' in the model's "
    r"dictionary but '\w+' in \S*swapped/dict\.src\.txt \(both 32 symbols, 2 differ\)"
)
PREPROCESS = (
    r"binarise this data with its dictionaries \(fairseq-preprocess --srcdict \S*dict\.src\.txt --joined-dictionary\)"
)
SUBWORDS = r"give the subword model that encoded the model's training data"
ONE_RUN = r"average checkpoints of one run"

CASES: Dict[str, Mismatch] = {
    "generate: transformer, data dictionary with two symbols swapped": Mismatch(
        lambda w, case: generate(w.swapped, str(w.transformer)),
        rf"transformer\.pt {SWAPPED_SOURCE}",
        PREPROCESS,
        console_script=True,
    ),
    "generate: ODE Transformer (RK4), data dictionary with two symbols swapped": Mismatch(
        lambda w, case: generate(w.swapped, str(w.rk4)), rf"rk4\.pt {SWAPPED_SOURCE}", PREPROCESS
    ),
    "generate --score-reference: data dictionary with two symbols swapped": Mismatch(
        lambda w, case: generate(w.swapped, str(w.transformer), "--score-reference"),
        rf"transformer\.pt {SWAPPED_SOURCE}",
        PREPROCESS,
    ),
    "generate: transformer, data dictionary with three more symbols": Mismatch(
        lambda w, case: generate(w.larger, str(w.transformer)),
        r"transformer\.pt was trained with another source dictionary than \S*larger/dict\.src\.txt: symbol 32 is "
        r"past its end in the model's dictionary but 'extra1' in \S*larger/dict\.src\.txt \(32 symbols in the "
        r"model's dictionary, 35 in",
        PREPROCESS,
    ),
    "generate: an ensemble whose second model has another dictionary": Mismatch(
        lambda w, case: generate(w.data_bin, f"{w.transformer}:{w.other_dictionary}"),
        r"other_dictionary\.pt was trained with another source dictionary than \S*bin/dict\.src\.txt: symbol 6",
        r"fairseq-preprocess --srcdict \S*swapped/dict\.src\.txt --joined-dictionary",
    ),
    "generate: -s tgt -t src with separate source and target dictionaries": Mismatch(
        lambda w, case: generate(w.separate, str(w.separate_model), "-s", "tgt", "-t", "src"),
        r"separate\.pt was trained with this run's dictionaries the other way round: its source dictionary is "
        r"\S*separate/dict\.src\.txt and its target dictionary \S*separate/dict\.tgt\.txt",
        r"pass -s src -t tgt",
    ),
    "interactive: data dictionary with two symbols swapped": Mismatch(
        lambda w, case: interactive(w.swapped, w.transformer), rf"transformer\.pt {SWAPPED_SOURCE}", PREPROCESS
    ),
    "interactive: --sentencepiece-model of another corpus": Mismatch(
        lambda w, case: interactive(
            w.spm_data, w.spm_model, "--bpe", "sentencepiece", "--sentencepiece-model", str(w.other_spm)
        ),
        r"--sentencepiece-model \S*other_spm\.model does not match the model's source dictionary "
        r"\S*spm_data/dict\.src\.txt: \d+ of its \d+ symbols are not pieces of that model, the first is "
        r"symbol \d+ '\S+'",
        SUBWORDS,
        console_script=True,
    ),
    "interactive: --bpe-codes (subword-nmt) of another corpus": Mismatch(
        lambda w, case: interactive(w.bpe_data, w.bpe_model, "--bpe", "subword_nmt", "--bpe-codes", str(w.other_codes)),
        r"--bpe-codes \S*other\.codes does not match the model's source dictionary \S*bpe_data/dict\.src\.txt: "
        r"\d+ of its \d+ symbols are not units its merges produce, the first is symbol \d+ '\S+'",
        SUBWORDS,
    ),
    "eval-lm: data dictionary with two symbols swapped": Mismatch(
        lambda w, case: eval_lm(w.lm_swapped, w.lm),
        r"lm\.pt was trained with another input dictionary than \S*lm_swapped/dict\.txt: symbol 6 is '\w+'",
        r"fairseq-preprocess --only-source --srcdict \S*lm_bin/dict\.txt",
    ),
    "average: checkpoints trained with different dictionaries": Mismatch(
        lambda w, case: average(w.transformer, w.other_dictionary, output=case / "averaged.pt"),
        r"other_dictionary\.pt was trained with another source dictionary than \S*transformer\.pt: symbol 6 is '\w+' "
        r"in \S*transformer\.pt but '\w+' in \S*other_dictionary\.pt",
        ONE_RUN,
        outputs=("averaged.pt*",),
        exit_status=2,
        console_script=True,
    ),
    "average: checkpoints of two training runs": Mismatch(
        lambda w, case: average(w.transformer, w.other_run, output=case / "averaged.pt"),
        r"other_run\.pt was written by training run [0-9a-f]{8}, \S*transformer\.pt by run [0-9a-f]{8}",
        ONE_RUN,
        outputs=("averaged.pt*",),
        exit_status=2,
    ),
    "average: checkpoints trained for different language pairs": Mismatch(
        lambda w, case: average(w.transformer, w.en_de, output=case / "averaged.pt"),
        r"en_de\.pt was trained for en -> de, \S*transformer\.pt for src -> tgt",
        ONE_RUN,
        outputs=("averaged.pt*",),
        exit_status=2,
    ),
    "export --to fairseq: --data with two symbols swapped": Mismatch(
        lambda w, case: export(w.transformer, case / "plain.pt", "--data", w.swapped),
        rf"transformer\.pt {SWAPPED_SOURCE}",
        PREPROCESS,
        outputs=("plain.pt*",),
        exit_status=2,
    ),
    "export --to ctranslate2: --data with two symbols swapped": Mismatch(
        lambda w, case: export(w.transformer, case / "ct2", "--to", "ctranslate2", "--data", w.swapped),
        rf"transformer\.pt {SWAPPED_SOURCE}",
        PREPROCESS,
        outputs=("ct2*", ".export-*"),
        exit_status=2,
    ),
    "export --to hf: --spm of another corpus": Mismatch(
        lambda w, case: export(w.spm_model, case / "hf", "--to", "hf", "--spm", w.other_spm),
        r"--spm \S*other_spm\.model does not match the model's source dictionary \S*spm_data/dict\.src\.txt: "
        r"\d+ of its \d+ symbols are not pieces of that model",
        SUBWORDS,
        outputs=("hf*", ".export-*"),
        exit_status=2,
        console_script=True,
    ),
    "train --finetune-from-model: data dictionary with two symbols swapped": Mismatch(
        lambda w, case: train(w.swapped, case / "ckpt", "--finetune-from-model", str(w.transformer)),
        rf"transformer\.pt {SWAPPED_SOURCE}",
        PREPROCESS,
        outputs=("ckpt/checkpoint*.pt",),
        console_script=True,
    ),
    "train --restore-file: data dictionary with two symbols swapped": Mismatch(
        lambda w, case: train(w.swapped, case / "ckpt", "--restore-file", str(w.transformer)),
        rf"transformer\.pt {SWAPPED_SOURCE}",
        PREPROCESS,
        outputs=("ckpt/checkpoint*.pt",),
    ),
    "train: resuming checkpoint_last.pt with -s tgt -t src": Mismatch(
        resume_the_other_way_round,
        r"checkpoint_last\.pt was trained to translate src -> tgt, but this run reads tgt as the source",
        r"pass -s src -t tgt",
        outputs=("ckpt/checkpoint_1_*.pt", "ckpt/checkpoint1.pt", "ckpt/checkpoint_best.pt"),
        kept=("ckpt/checkpoint_last.pt",),
    ),
    "analyze: --data with two symbols swapped": Mismatch(
        lambda w, case: (
            "python",
            [
                "-m",
                "ode_seq.cli.analyze",
                "--path",
                str(w.rk4),
                "--data",
                str(w.swapped),
                "--out",
                str(case / "report"),
            ],
        ),
        rf"rk4\.pt {SWAPPED_SOURCE}",
        PREPROCESS,
        outputs=("report",),
    ),
}


@pytest.fixture(scope="module")
def world(data_bin, tmp_path_factory) -> World:
    return World(tmp_path_factory.mktemp("mismatch"), data_bin)


@pytest.fixture(scope="module")
def outcome(world, tmp_path_factory):
    return case_runner(CASES, world, tmp_path_factory, stdin=SENTENCE)


@pytest.mark.parametrize("name", case_ids(CASES))
def test_mismatched_data_exits_non_zero_without_writing_output(name, outcome):
    check_exit_and_outputs(CASES[name], outcome(name))


@pytest.mark.parametrize("name", case_ids(CASES))
def test_mismatched_data_error_names_the_file_what_differs_and_the_fix(name, outcome):
    check_error(CASES[name], outcome(name))


# The same commands with the data the model was trained with.
MATCHING: Dict[str, Callable[[World, Path], Command]] = {
    "generate an ensemble": lambda w, case: generate(w.data_bin, f"{w.transformer}:{w.rk4}"),
    "interactive with its SentencePiece model": lambda w, case: interactive(
        w.spm_data, w.spm_model, "--bpe", "sentencepiece", "--sentencepiece-model", str(w.spm)
    ),
    "interactive with its BPE codes": lambda w, case: interactive(
        w.bpe_data, w.bpe_model, "--bpe", "subword_nmt", "--bpe-codes", str(w.codes)
    ),
    "eval-lm": lambda w, case: eval_lm(w.lm_data, w.lm),
    "average two checkpoints of one run": lambda w, case: average(*w.same_run, output=case / "averaged.pt"),
    "export --to hf with its SentencePiece model": lambda w, case: export(
        w.spm_model, case / "hf", "--to", "hf", "--spm", w.spm
    ),
}


@pytest.mark.parametrize("name", case_ids(MATCHING))
def test_the_same_command_with_the_training_data_works(name, world, tmp_path):
    tool, args = MATCHING[name](world, tmp_path)
    result = run_in_process(tool, args, stdin=SENTENCE)
    assert result.returncode == 0, result.stderr[-3000:]


def _digest(symbols: Sequence[str]) -> str:
    return hashlib.sha256("\n".join(symbols).encode("utf-8")).hexdigest()


def test_a_checkpoint_records_its_dictionaries_language_pair_and_run(world):
    record = load_checkpoint(str(world.transformer))["task_state"]
    symbols = record["dictionaries"]["source"]["symbols"]
    assert symbols[:4] == ["<s>", "<pad>", "</s>", "<unk>"] and len(symbols) == 32
    assert record["dictionaries"]["source"]["sha256"] == _digest(symbols)
    assert record["dictionaries"]["target"]["file"] == str((world.data_bin / "dict.tgt.txt").resolve())
    assert record["language_pair"] == ["src", "tgt"]
    assert re.fullmatch(r"[0-9a-f]{32}", record["run"]["id"]) and record["run"]["started_from"] is None


def test_resuming_continues_the_run_and_fine_tuning_records_where_it_started(world, tmp_path):
    recorded = load_checkpoint(str(world.transformer))["task_state"]["run"]["id"]
    resumed = md.trainer(world.data_bin, md.TRANSLATION + md.TRANSFORMER)
    resumed.load_checkpoint(str(world.transformer))
    resumed.save_checkpoint(str(tmp_path / "resumed.pt"), {})
    assert load_checkpoint(str(tmp_path / "resumed.pt"))["task_state"]["run"] == {"id": recorded, "started_from": None}

    argv = [*md.TRANSLATION, *md.TRANSFORMER, "--finetune-from-model", str(world.transformer)]
    fine_tuned = md.trainer(world.data_bin, argv)
    fine_tuned.load_checkpoint(str(world.transformer), reset_optimizer=True)
    fine_tuned.save_checkpoint(str(tmp_path / "fine_tuned.pt"), {})
    run_record = load_checkpoint(str(tmp_path / "fine_tuned.pt"))["task_state"]["run"]
    assert run_record["started_from"] == recorded and run_record["id"] not in (None, recorded)


def test_hub_interface_refuses_a_data_directory_with_other_dictionaries(world):
    with pytest.raises(DataMismatchError, match=rf"transformer\.pt {SWAPPED_SOURCE}.*{PREPROCESS}"):
        TransformerModel.from_pretrained(
            str(world.transformer.parent), checkpoint_file=world.transformer.name, data_name_or_path=str(world.swapped)
        )


def test_hub_interface_refuses_a_sentencepiece_model_of_another_corpus(world):
    model = world.spm_model
    kwargs = dict(checkpoint_file=model.name, data_name_or_path=str(world.spm_data), bpe="sentencepiece")
    with pytest.raises(
        DataMismatchError, match=rf"--sentencepiece-model \S*other_spm\.model does not match.*{SUBWORDS}"
    ):
        TransformerModel.from_pretrained(str(model.parent), sentencepiece_model=str(world.other_spm), **kwargs)
    hub = TransformerModel.from_pretrained(str(model.parent), sentencepiece_model=str(world.spm), **kwargs)
    assert isinstance(hub.translate("w1 w2"), str)


def test_a_teacher_trained_with_other_dictionaries_is_refused(world):
    student_task = md.trainer(world.data_bin, md.TRANSLATION + md.RK4).task
    with pytest.raises(DataMismatchError, match=r"teacher \S*other_dictionary\.pt was trained with another source"):
        load_teacher(str(world.other_dictionary), student_task)
    assert load_teacher(str(world.transformer), student_task) is not None


def test_a_checkpoint_written_before_the_record_loads_as_before_with_a_note(caplog):
    path = f"{CHECKPOINTS}/rk4.pt"
    with caplog.at_level(logging.INFO, logger="ode_seq.training_data.record"):
        checkpoint_utils.load_model_ensemble_and_task([path], arg_overrides={"data": HERE})
    assert f"{path} has no record of the dictionaries or model options it was trained with" in caplog.text


def test_averaging_checkpoints_written_before_the_record_works_with_a_note(tmp_path):
    paths = [f"{CHECKPOINTS}/rk4.pt", f"{CHECKPOINTS}/rk4.pt"]
    result = run_in_process(*average(*map(Path, paths), output=tmp_path / "averaged.pt"))
    assert result.returncode == 0, result.stderr
    assert f"average: note: {paths[0]} has no record of the dictionaries" in result.stderr
    assert (tmp_path / "averaged.pt").is_file()
