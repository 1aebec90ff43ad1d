"""ode-seq as a package: `pip install .` and `pip install -e .` into fresh virtual environments, used
from a directory outside the repository, and pyproject.toml's ranges against requirements.txt's pins."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path
from typing import List

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("ode_seq", "user_dir")
# fairseq-train's own argument parsing, which imports --user-dir and applies the architecture's defaults.
PARSE_TRAIN_ARGS = (
    "import sys; from fairseq import options; "
    "args = options.parse_args_and_arch(options.get_training_parser(), sys.argv[1:]); "
    "print(args.arch, args.encoder_ode_method, args.criterion)"
)

# Nothing from the repository on the path: the environment without PYTHONPATH.
ENV = {**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, "OMP_NUM_THREADS": "1"}


def python_files(directory: Path) -> List[str]:
    return sorted(str(p.relative_to(directory)) for p in directory.rglob("*.py") if "__pycache__" not in p.parts)


def fresh_venv(path: Path) -> Path:
    """A virtual environment without pip whose own site-packages comes first, then this environment's
    (pip, setuptools, torch, fairseq), so nothing is downloaded. Returns its site-packages."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    site = subprocess.run(
        [str(path / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    Path(site, "this_environment.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return Path(site)


def pip_install(venv: Path, *args: str) -> None:
    subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "-q",
            "--no-index",
            "--no-deps",
            "--no-build-isolation",
            "--disable-pip-version-check",
            *args,
        ],
        check=True,
        capture_output=True,
        text=True,
    )


def python(venv: Path, code: List[str], cwd: Path) -> List[str]:
    result = subprocess.run([str(venv / "bin" / "python"), *code], cwd=cwd, capture_output=True, text=True, env=ENV)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout.splitlines()


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    """A copy of the repository, so that the build's own files stay out of it."""
    copy = tmp_path_factory.mktemp("src") / "ode-seq"
    shutil.copytree(
        ROOT,
        copy,
        ignore=shutil.ignore_patterns(
            ".git", ".venv", "__pycache__", "*.egg-info", "build", "dist", "work-dirs", "runs", ".pytest_cache"
        ),
    )
    return copy


@pytest.mark.parametrize("editable", [False, True], ids=["install", "editable"])
def test_installed_package_imports_and_plugin_loads_from_outside_the_repository(source, tmp_path, editable):
    venv = tmp_path / "venv"
    site = fresh_venv(venv)
    pip_install(venv, *(["-e"] if editable else []), str(source))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    home = source if editable else site
    files = python(
        venv, ["-c", "import ode_seq, user_dir; print(ode_seq.__file__); print(user_dir.__file__)"], elsewhere
    )
    assert files == [str(home / "ode_seq" / "__init__.py"), str(home / "user_dir" / "__init__.py")]
    user_dir = subprocess.run(
        [str(venv / "bin" / "ode-seq"), "user-dir"], cwd=elsewhere, capture_output=True, text=True, env=ENV, check=True
    ).stdout.strip()
    assert user_dir == str(home / "user_dir")
    parsed = python(
        venv,
        [
            "-c",
            PARSE_TRAIN_ARGS,
            "data-bin",
            "--user-dir",
            user_dir,
            "--arch",
            "ode_transformer_rk4",
            "--criterion",
            "ode_trajectory_distillation",
        ],
        elsewhere,
    )
    assert parsed == ["ode_transformer_rk4 rk4 ode_trajectory_distillation"]
    if not editable:
        for package in PACKAGES:
            assert python_files(site / package) == python_files(source / package)
        assert not any((site / name).exists() for name in ("tests", "testkit", "examples", "benchmarks"))


def test_every_pinned_version_lies_in_its_pyproject_range():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = [r for extra in project["optional-dependencies"].values() for r in extra]
    ranges = [Requirement(r) for r in [*project["dependencies"], *extras]]
    pins = {}
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            pin = Requirement(line)
            pins[canonicalize_name(pin.name)] = next(iter(pin.specifier)).version
    outside = {
        str(r): pins.get(canonicalize_name(r.name), "not pinned")
        for r in ranges
        if canonicalize_name(r.name) not in pins
        or not r.specifier.contains(pins[canonicalize_name(r.name)], prereleases=True)
    }
    assert outside == {}
