"""ode_seq.code_folder: the files a remote-code folder carries (the import closure of its entry
files), absolute ode-seq imports made relative, and the imports a flat folder cannot hold refused
naming the file, the line and the fix."""

import os

import pytest

from ode_seq.code_folder import PACKAGE, NotCarried, code_files, copy_code


def write(folder, name: str, text: str) -> str:
    path = os.path.join(folder, name)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return path


def test_the_closure_follows_absolute_and_relative_imports_and_flattens_the_absolute_ones(tmp_path):
    entry = write(
        tmp_path, "model.py", "from ode_seq.solvers.fixed_grid import FixedGridSolver\nfrom .helper import x\n"
    )
    write(tmp_path, "helper.py", "x = 1\n")
    files = code_files([entry])
    solvers = os.path.join(PACKAGE, "solvers")
    assert files == {
        "model.py": entry,
        "helper.py": os.path.join(tmp_path, "helper.py"),
        "fixed_grid.py": os.path.join(solvers, "fixed_grid.py"),
        "observers.py": os.path.join(solvers, "observers.py"),
        "tableaus.py": os.path.join(solvers, "tableaus.py"),
    }
    os.mkdir(tmp_path / "folder")
    copy_code([entry], tmp_path / "folder")
    model = (tmp_path / "folder" / "model.py").read_text()
    assert model == "from .fixed_grid import FixedGridSolver\nfrom .helper import x\n"
    with open(os.path.join(solvers, "fixed_grid.py"), "rb") as source:
        assert (tmp_path / "folder" / "fixed_grid.py").read_bytes() == source.read()


@pytest.mark.parametrize(
    "source, message",
    [
        (
            "from ode_seq.solvers import FixedGridSolver\n",
            "line 1: from ode_seq.solvers import …: import from ode-seq's modules, not its packages",
        ),
        ("import ode_seq.fields\n", "line 1: write from ode_seq.module import …"),
        (
            "x = 1\nfrom ..fields import layer_field\n",
            "line 2: import from the module beside the file (from .module import …)",
        ),
    ],
    ids=["package", "import-statement", "parent-relative"],
)
def test_imports_a_flat_folder_cannot_hold_are_refused(tmp_path, source, message):
    entry = write(tmp_path, "model.py", source)
    with pytest.raises(NotCarried, match=f"model.py {message}".replace("(", r"\(").replace(")", r"\)")):
        code_files([entry])


def test_two_files_of_one_name_are_refused(tmp_path):
    entry = write(tmp_path, "model.py", "from ode_seq.fields import Sublayer\nfrom .fields import x\n")
    write(tmp_path, "fields.py", "x = 1\n")
    with pytest.raises(NotCarried, match="would both be fields.py in the folder: rename one"):
        code_files([entry])
