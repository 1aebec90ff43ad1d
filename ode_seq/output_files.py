"""Output paths checked before a tool starts its work: a path that cannot be written fails at
once, with the option named, instead of with a traceback after minutes of work. The checks write
and delete a temporary file where the output will go, so a read-only disk or a missing
permission is found too; they create nothing."""

from __future__ import annotations

import os
import tempfile


def _check_writable_directory(directory: str, option: str, path: str) -> None:
    try:
        with tempfile.NamedTemporaryFile(dir=directory, prefix=".write-check-"):
            pass
    except OSError as error:
        raise ValueError(
            f"{option} {path}: cannot write into {directory} ({error.strerror}); choose a writable location"
        ) from None


def _check_creatable_directory(directory: str, option: str, path: str) -> None:
    existing = os.path.abspath(directory)
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        raise ValueError(f"{option} {path}: {existing} is a file, not a directory; choose another path")
    _check_writable_directory(existing, option, path)


def check_output_file(path: str, option: str, make_directory: bool = False) -> None:
    """ValueError naming ``option`` unless a file can be written at ``path``; with
    ``make_directory`` its directory may be missing if the tool creates it."""
    if os.path.isdir(path):
        raise ValueError(f"{option} {path} is a directory; name the file to write, e.g. {os.path.join(path, 'out')}")
    directory = os.path.dirname(os.path.abspath(path))
    if make_directory:
        _check_creatable_directory(directory, option, path)
    elif not os.path.isdir(directory):
        raise ValueError(
            f"{option} {path}: its directory {directory} does not exist or is not a directory; "
            "create it first (mkdir -p) or choose another path"
        )
    else:
        _check_writable_directory(directory, option, path)


def check_output_directory(path: str, option: str) -> None:
    """ValueError naming ``option`` unless ``path`` is a directory files can be written into, or
    can be made one (its nearest existing ancestor is a writable directory)."""
    _check_creatable_directory(path, option, path)


def same_file(a: str, b: str) -> bool:
    """Whether paths ``a`` and ``b`` name the same file (existing or not)."""
    return os.path.realpath(a) == os.path.realpath(b)
