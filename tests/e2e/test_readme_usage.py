"""The README's usage lines are real: its fairseq and ode-seq commands and its hub example, run as
written (only the model made tiny and the training short) from a directory outside the repository,
on a tiny sentencepiece-encoded reversal corpus. The fine-tuning claim is run by
tests/e2e/test_finetune_coefficients.py; the demo's own printed commands by test_translation_pipeline.py."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

import pytest
import sentencepiece

from ode_seq.cli.main import SUBCOMMANDS
from tests.e2e.cli import TINY_MODEL
from tests.e2e.corpus import SIZES, preprocess, write_reversal_corpus

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
BIN = Path(sys.executable).parent
# What makes the README's fairseq-train command a seconds-long test: tiny sizes, 5 one-update epochs.
SHORT_TRAINING = [*TINY_MODEL, "--max-epoch", "5", "--seed", "1", "--num-workers", "0", "--no-progress-bar"]

needs_ode_seq = pytest.mark.skipif(
    not (BIN / "ode-seq").exists(),
    reason=f"ode-seq is not installed next to {sys.executable}: "
    "bash scripts/setup.sh installs the checkout (pip install --no-deps -e .) with its command",
)


def fenced_blocks(section: str, language: str) -> List[str]:
    """The ``language`` code blocks of the README section titled ``section``."""
    text = README.split(f"## {section}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(rf"```{language}\n(.*?)```", text, re.S)


def commands(block: str) -> List[str]:
    """The block's shell commands, continuation lines joined."""
    return [line for line in block.replace("\\\n", " ").splitlines() if line.strip()]


def shell(command: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {
        **{k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
        "OMP_NUM_THREADS": "1",
        "PYTHONWARNINGS": "ignore",
        "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",
    }
    result = subprocess.run(
        ["bash", "-c", f"set -euo pipefail; {command}"], cwd=cwd, capture_output=True, text=True, env=env, timeout=600
    )
    assert result.returncode == 0, (command, result.stderr[-3000:])
    return result


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Path:
    """A directory holding what the README's commands name: data-bin/ (sentencepiece-encoded),
    spm.model and test.ref (the raw test targets)."""
    work = tmp_path_factory.mktemp("readme")
    raw = work / "raw"
    raw.mkdir()
    write_reversal_corpus(raw, SIZES)
    sentencepiece.SentencePieceTrainer.train(
        input=f"{raw / 'train.src'},{raw / 'train.tgt'}",
        model_prefix=str(work / "spm"),
        vocab_size=40,
        hard_vocab_limit=False,
        num_threads=1,
        minloglevel=2,
    )
    pieces = sentencepiece.SentencePieceProcessor(model_file=str(work / "spm.model"))
    encoded = work / "encoded"
    encoded.mkdir()
    for split in SIZES:  # English -> Spanish, as the README's commands say
        for side, language in (("src", "en"), ("tgt", "es")):
            lines = (raw / f"{split}.{side}").read_text().splitlines()
            (encoded / f"{split}.{language}").write_text(
                "".join(" ".join(pieces.encode(line, out_type=str)) + "\n" for line in lines)
            )
    preprocess(encoded, work / "data-bin", languages=("en", "es"))
    (work / "test.ref").write_text((raw / "test.tgt").read_text())
    return work


@pytest.fixture(scope="module")
def usage_outputs(workspace) -> Dict[str, subprocess.CompletedProcess]:
    """Every command of the README's fairseq block, in order, by its first word(s)."""
    (block,) = fenced_blocks("Use with fairseq's own tools", "bash")
    outputs = {}
    for command in commands(block):
        if command.startswith("fairseq-train "):
            command += " " + shlex.join(SHORT_TRAINING)
        name = " ".join(command.split("|")[-1].split()[:2]) if "|" in command else " ".join(command.split()[:2])
        outputs[name] = shell(command, workspace)
    return outputs


@needs_ode_seq
def test_readme_commands_train_average_generate_and_score(workspace, usage_outputs):
    assert sorted(p.name for p in (workspace / "checkpoints").glob("checkpoint?.pt")) == [
        f"checkpoint{epoch}.pt" for epoch in range(1, 6)
    ]
    assert "averaged 5 checkpoints" in usage_outputs["ode-seq average"].stdout
    generated = (workspace / "generated.txt").read_text()
    assert len(re.findall(r"^H-\d+\t", generated, re.M)) == SIZES["test"]
    assert re.search(r"^sacreBLEU 13a: +BLEU = [\d.]+ ", usage_outputs["ode-seq bleu"].stdout, re.M)


@needs_ode_seq
def test_readme_interactive_command_translates_the_sentence(usage_outputs):
    assert len(re.findall(r"^D-0\t", usage_outputs["fairseq-interactive data-bin"].stdout, re.M)) == 1


@needs_ode_seq
def test_readme_hub_example_translates_from_outside_the_repository(workspace, usage_outputs):
    (code,) = fenced_blocks("Use with fairseq's own tools", "python")
    result = shell(f"{shlex.quote(sys.executable)} -c {shlex.quote(code)}", workspace)
    assert len(result.stdout.splitlines()) == 1 and result.stdout.strip()


def test_readme_names_every_ode_seq_subcommand_and_the_two_commands_ci_runs():
    named = re.search(r"`ode-seq --help` lists the tools: (.*?)\(\[docs/metrics", README, re.S).group(1)
    assert set(re.findall(r"`([a-z0-9-]+)`", named)) == set(SUBCOMMANDS)
    (block,) = fenced_blocks("Two commands", "bash")
    assert [c.split("#")[0].strip() for c in commands(block)] == ["bash scripts/demo.sh", "bash scripts/test.sh"]
    assert "bash scripts/test.sh" in (ROOT / ".ci" / "run").read_text()
