"""The one writer of specseed's output files: reports, bundle files, minimized scenarios.

Every text is scrubbed of secrets on its way out (``specseed.core.secrets``). A file is
written to a temporary file in the same folder, flushed to disk (``fsync``), renamed
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
import errno
import os
import secrets
import stat
from pathlib import Path

from specseed.core.errors import OutputError
from specseed.core.secrets import scrub_text

_TRIES = 100
"""Temporary names tried before giving up (each one random, so one clash is already rare)."""


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` (UTF-8, secrets removed) to ``path``; ``OSError`` on failure, its
    ``filename`` naming the file that could not be written.

    A regular file (or a new one) is replaced atomically; a symlink is followed and its
    target replaced; a device, a pipe, ``/dev/stdout`` or a process substitution
    (``/dev/fd/N``) is opened and written to, never replaced. The folder must exist: a
    missing one is the caller's input error, not something to create here."""
    # backslashreplace: a lone surrogate (from a server's JSON) is written as ``\ud800``
    # rather than losing the file to UnicodeEncodeError.
    data = scrub_text(text, by_name=False).encode("utf-8", "backslashreplace")
    target, direct = _destination(path)
    if direct:
        _write_in_place(target, data)
        return
    folder = target.parent
    fd, tmp = _create_temporary(target)
    try:
        with contextlib.suppress(FileNotFoundError):
            os.fchmod(fd, stat.S_IMODE(os.stat(target).st_mode))
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if exc.filename is None or str(exc.filename) == tmp:
            exc.filename = str(path)
        raise
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_folder(folder)


_IN_PLACE_ROOTS = ("/dev/", "/proc/")
"""Paths under these are the process's own streams and devices (``/dev/stdout`` is a link to
``/proc/self/fd/1``): written to where they are, even when the stream is a regular file."""


def _destination(path: Path) -> tuple[Path, bool]:
    """Where to write, and whether in place (True) or by atomic replacement (False)."""
    try:
        mode = os.stat(path).st_mode  # follows symlinks: the target is what counts
    except FileNotFoundError:
        # A new file, or a dangling symlink: create its target.
        return Path(os.path.realpath(path)) if os.path.islink(path) else path, False
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
    if not stat.S_ISREG(mode):
        return path, True  # a device, FIFO or socket: never replace the node
    real = os.path.realpath(path)
    if str(path).startswith(_IN_PLACE_ROOTS) or real.startswith(_IN_PLACE_ROOTS):
        return path, True
    return Path(real), False


def _write_in_place(path: Path, data: bytes) -> None:
    """Open a non-regular file (or the process's own stream) for writing and write to it.
    A stream that is a regular file is appended to: the shell opened it, and truncating it
    would drop what was written to it before."""
    flags = os.O_WRONLY | os.O_APPEND | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        exc.filename = str(path)
        raise
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
    except OSError as exc:
        exc.filename = str(path)
        raise
    finally:
        os.close(fd)


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
