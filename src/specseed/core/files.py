"""The one writer of specseed's output files: reports, bundle files, minimized scenarios.

A file is written to a temporary file in the same folder, flushed to disk (``fsync``), renamed
over the target (``os.replace``, atomic on POSIX) and the rename made durable by syncing the
folder. A full disk, a killed process or Ctrl-C leaves either the previous file or the complete
new one, never a cut-off document or an empty file; the temporary file is removed on failure.

A new file gets the mode a plain ``open()`` would give it (0666 less the umask) and a file
written over keeps its mode, so an atomic report reads like any other file (a private 0600
temporary file renamed into place would not).

Trace files are not written here: they stream step by step while the engine runs.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from pathlib import Path

from specseed.core.errors import OutputError

_TRIES = 100
"""Temporary names tried before giving up (each one random, so one clash is already rare)."""


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically, creating its folder; ``OSError`` on
    failure, its ``filename`` naming the file that could not be written."""
    folder = path.parent
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp = _create_temporary(path)
    try:
        with contextlib.suppress(FileNotFoundError):
            os.fchmod(fd, stat.S_IMODE(os.stat(path).st_mode))
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_folder(folder)


def write_output(path: Path, text: str, what: str) -> None:
    """``write_atomic`` for a report document: ``OutputError`` naming ``what`` on failure (the
    audit's findings stand; only this output is missing)."""
    try:
        write_atomic(path, text)
    except OSError as exc:
        raise OutputError(
            f"cannot write the {what} to {path}: {exc.strerror or exc}",
            hint="free space or choose another path; the findings are in the terminal report",
        ) from None


def _create_temporary(path: Path) -> tuple[int, str]:
    """A new file beside ``path``, opened for writing, created with mode 0666 so that the
    umask applies (``tempfile.mkstemp`` would make it 0600)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    for _ in range(_TRIES):
        tmp = str(path.parent / f".{path.name}.{secrets.token_hex(4)}.tmp")
        try:
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name beside {path}")


def _fsync_folder(folder: Path) -> None:
    """Make the rename itself durable (POSIX; a no-op where folders cannot be opened)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)
