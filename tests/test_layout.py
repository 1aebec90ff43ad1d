"""The layout shows the architecture: imports point one way, solvers, fields ← layers ← models ← cli."""

import ast
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.e2e.cli import ROOT

PACKAGE = Path(ROOT) / "ode_seq"
# What each part of ode_seq may import from ode_seq (besides itself).
ALLOWED = {
    "solvers": set(),
    "fields": set(),
    "code_folder": set(),
    "options": set(),
    "checkpoint_files": {"output_files"},
    "output_files": set(),
    "training_data": set(),
    "model_inputs": set(),
    "text_files": set(),
    "studies": set(),
    "layers": {"solvers", "fields", "options"},
    "models": {"solvers", "fields", "layers", "options", "checkpoint_files", "training_data", "model_inputs"},
    "analysis": {"solvers", "layers", "checkpoint_files", "model_inputs"},
    "fairseq_fixes": {"checkpoint_files", "output_files", "training_data", "text_files"},
    "export": {"solvers", "layers", "models", "checkpoint_files", "code_folder"},
    "transformers": {"solvers", "fields", "code_folder"},
    "cli": {
        "analysis",
        "models",
        "export",
        "fairseq_fixes",
        "checkpoint_files",
        "output_files",
        "metrics",
        "training_data",
        "model_inputs",
    },
    "metrics": {"output_files", "text_files"},
}


def _imported_parts(path: Path):
    """The parts of ode_seq (first name under ode_seq) that ``path`` imports."""
    package = path.relative_to(PACKAGE.parent).with_suffix("").parts[:-1]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else ()
            names = (*base, *(node.module or "").split(".")) if node.module else base
            if not node.module and node.level:
                names = (*base, node.names[0].name)
        elif isinstance(node, ast.Import):
            names = tuple(node.names[0].name.split("."))
        else:
            continue
        if len(names) > 1 and names[0] == "ode_seq":
            yield names[1]


def test_imports_point_one_way():
    wrong = []
    for path in sorted(PACKAGE.rglob("*.py")):
        part = path.relative_to(PACKAGE).parts[0].removesuffix(".py")
        if part == "__init__":
            continue
        for imported in set(_imported_parts(path)) - ALLOWED[part] - {part}:
            wrong.append(f"{path.relative_to(ROOT)} imports ode_seq.{imported}")
    assert wrong == []


def test_solvers_never_import_fairseq():
    for path in (PACKAGE / "solvers").rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        modules = [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
        modules += [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
        assert not [m for m in modules if m.split(".")[0] == "fairseq"], path


def test_the_transformers_api_loads_no_fairseq_module():
    """``ode_seq.transformers`` runs where fairseq is not installed: importing it (in a fresh
    interpreter) loads torch, transformers and ode-seq's torch-only parts, no fairseq module."""
    probe = "import sys, ode_seq.transformers; print(sorted(m for m in sys.modules if m.split('.')[0] == 'fairseq'))"
    loaded = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True)
    assert loaded.stdout.strip() == "[]"


def test_files_the_hugging_face_folder_carries_import_only_torch_and_each_other():
    """The exported custom code runs without ode-seq or fairseq: the files it carries from
    ode_seq (the solver core, the layer field, the per-evaluation caches) import torch, the standard
    library, each other, and transformers (which loads the folder's code)."""
    from ode_seq.export.remote_folder import CARRIED

    carried = {Path(path).stem for path in CARRIED}
    for path in map(Path, CARRIED):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level:
                assert node.level == 1 and node.module in carried, (path, node.module)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [node.module] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
                for name in names:
                    top = name.split(".")[0]
                    assert top in ("torch", "transformers") or top in sys.stdlib_module_names, (path, name)


# Where binaries may be tracked: the checkpoint fixtures of the tests and the bundled corpus.
BINARIES_ALLOWED_UNDER = ("tests/fixtures/", "examples/translation/data/")
MAX_TRACKED_BYTES = 1 << 20


def is_checkpoint(path: Path) -> bool:
    """A torch.save file: a zip archive with a pickled ``data.pkl``, or a bare pickle stream."""
    with path.open("rb") as f:
        if f.read(1) == b"\x80":
            return True
    return zipfile.is_zipfile(path) and any(n.endswith("data.pkl") for n in zipfile.ZipFile(path).namelist())


def test_git_tracks_no_checkpoint_and_no_file_over_1_mib_outside_the_fixtures_and_the_corpus():
    """Every clone downloads what git tracks, forever: study records are text, resumable state stays
    in work directories."""
    if shutil.which("git") is None or not (Path(ROOT) / ".git").exists():
        pytest.skip("not a git checkout")
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    offending = []
    for name in filter(None, tracked.decode().split("\0")):
        path = Path(ROOT) / name
        if name.startswith(BINARIES_ALLOWED_UNDER) or not path.is_file():
            continue
        if is_checkpoint(path):
            offending.append(f"{name} (a checkpoint)")
        elif path.stat().st_size > MAX_TRACKED_BYTES:
            offending.append(f"{name} ({path.stat().st_size:,} bytes)")
    assert offending == [], "git tracks binaries: git rm --cached them and keep them in a work directory"
