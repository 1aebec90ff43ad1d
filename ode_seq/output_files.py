"""Output paths checked before a tool starts its work: a path that cannot be written fails at
once, with the option named, instead of with a traceback after minutes of work. The checks write
and delete a temporary file where the output will go, so a read-only disk or a missing
permission is found too; they create nothing.

Outputs are written under a temporary name and renamed when complete. A write that fails for want
of space (a full disk, or the file size limit) leaves nothing half-written and says what it needs.
A directory an output is staged in is held by its process (a lock file the kernel releases however
the process ends), so that a later run removes one whose process was killed and no other."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import resource
import shutil
import signal
import socket
import sys
import tempfile
import time
from typing import Any, Callable, Iterator, Optional


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


class OutputWriteError(ValueError):
    """An output that could not be written for want of space; nothing half-written is left."""


def format_size(size: int) -> str:
    """Bytes in the largest decimal unit under which the number stays ≥ 1, e.g. 1.2 MB."""
    for unit, scale in (("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size} bytes"


def out_of_space(error: BaseException, directory: str, file_size: int, total: Optional[int] = None) -> Optional[str]:
    """Why writing a file of ``file_size`` bytes (``total`` bytes in all, default ``file_size``) into
    ``directory`` failed with ``error``: the process's file size limit (RLIMIT_FSIZE, ``ulimit -f``)
    or the free space of the disk, with both numbers and the fix; None when neither explains it.
    Measured, not read off ``error`` alone: torch.save reports a failed write as a RuntimeError
    without its errno."""
    total = file_size if total is None else total
    limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    code = getattr(error, "errno", None)
    if limit != resource.RLIM_INFINITY and (file_size > limit or code == errno.EFBIG):
        return (
            f"the file size limit of this process (ulimit -f) is {format_size(limit)} but the file "
            f"takes {format_size(file_size)}; raise the limit (ulimit -f unlimited)"
        )
    free = shutil.disk_usage(directory).free
    if total > free or code in (errno.ENOSPC, errno.EDQUOT):
        return (
            f"the disk holding {directory} is full: {format_size(free)} free, and this needs "
            f"{format_size(total)}; free that much space or choose another location"
        )
    return None


@contextlib.contextmanager
def explaining_full_disk(path: str, needed: Callable[[], int]) -> Iterator[None]:
    """Inside: an OSError or RuntimeError that the lack of space explains (see `out_of_space`; the
    output takes ``needed()`` bytes), or such an error already explained for a file written on the
    way, becomes an OutputWriteError naming ``path``. The code inside must leave nothing
    half-written and ``path`` as it was."""
    try:
        yield
    except (OSError, RuntimeError, OutputWriteError) as error:
        reason = out_of_space(error, os.path.dirname(os.path.abspath(path)), needed())
        if reason is None:
            raise
        raise OutputWriteError(f"could not write {path}: {reason}; {path} was left as it was") from None


def write_text_atomically(path: str, text: str) -> None:
    """``text`` (UTF-8) into a temporary file beside ``path``, renamed onto ``path`` when complete,
    so ``path`` is never half-written; the directory is created if missing. A failed write leaves
    no temporary file and keeps a previous ``path`` (OutputWriteError when for want of space)."""
    data = text.encode("utf-8")
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    with explaining_full_disk(path, lambda: len(data)):
        handle, tmp = tempfile.mkstemp(dir=directory, prefix=f".{os.path.basename(path)}.")
        try:
            with os.fdopen(handle, "wb") as out:
                out.write(data)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise


def write_json_report(path: str, payload: Any, error_prefix: str, ensure_ascii: bool = True) -> int:
    """A tool's exit status after writing ``payload`` as indented JSON to ``path`` atomically: 0,
    or 2 when for want of space, after ``{error_prefix}: <why>`` on stderr."""
    try:
        write_text_atomically(path, json.dumps(payload, indent=2, ensure_ascii=ensure_ascii) + "\n")
    except OutputWriteError as error:
        print(f"{error_prefix}: {error}", file=sys.stderr)
        return 2
    return 0


def take_lock(path: str, wait: bool = False) -> Optional[int]:
    """A descriptor of ``path`` (created if missing) holding an exclusive ``flock``, with this
    process's id and host written in it, or None when another process holds it (with ``wait``:
    waits for it). The kernel releases the lock when the process ends, however it ends (SIGKILL, a
    crash), so a stopped run never blocks the next one."""
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
    except BlockingIOError:
        os.close(descriptor)
        return None
    os.ftruncate(descriptor, 0)
    os.pwrite(descriptor, f"{os.getpid()} on {socket.gethostname()}\n".encode(), 0)
    return descriptor


def lock_holder(path: str) -> str:
    """What the lock file ``path`` says of the process that holds it."""
    with open(path, "rb") as lock:
        return lock.read(256).decode("utf-8", "replace").strip() or "of unknown id"


WORK_LOCK = ".lock"
# A work directory without a record of its process is left alone this long: its process may be
# about to take its lock (a directory of an earlier version of ode-seq never gets one).
UNLOCKED_GRACE_SECONDS = 60.0


def abandoned(directory: str) -> bool:
    """Whether work directory ``directory`` was left by a process that has ended: nobody holds its
    lock, and the lock records that process (or the directory is older than the grace period)."""
    young = time.time() - os.stat(directory).st_mtime < UNLOCKED_GRACE_SECONDS
    try:
        descriptor = os.open(os.path.join(directory, WORK_LOCK), os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return not young
    try:
        fcntl.flock(descriptor, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    else:
        return bool(os.pread(descriptor, 1, 0)) or not young
    finally:
        os.close(descriptor)


@contextlib.contextmanager
def work_directory(parent: str, prefix: str) -> Iterator[str]:
    """A new directory ``parent/PREFIXxxxx`` to stage an output in, held by this process and removed
    when the block ends (also on SIGTERM inside :func:`stopping_cleanly`); the ones with ``prefix``
    that processes killed before they could remove theirs (SIGKILL) are removed first."""
    for name in os.listdir(parent):
        path = os.path.join(parent, name)
        if name.startswith(prefix) and os.path.isdir(path) and abandoned(path):
            shutil.rmtree(path, ignore_errors=True)
    work = tempfile.mkdtemp(prefix=prefix, dir=parent)
    descriptor = take_lock(os.path.join(work, WORK_LOCK), wait=True)
    try:
        yield work
    finally:
        shutil.rmtree(work, ignore_errors=True)
        os.close(descriptor)


SIGTERM_STATUS = 128 + signal.SIGTERM  # the shell's exit status of a process ended by SIGTERM


@contextlib.contextmanager
def stopping_cleanly() -> Iterator[None]:
    """Inside: SIGTERM raises SystemExit(143), so that ``finally`` blocks remove what they staged
    (Python's default ends the process at once). Main thread only; the handler before is restored."""

    def stop(signum: int, frame: Any) -> None:
        raise SystemExit(SIGTERM_STATUS)

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
