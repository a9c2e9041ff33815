"""Writing report documents so that a reader never sees half of one.

A report is written to a temporary file in the same folder, flushed to disk (``fsync``) and
renamed over the target (``os.replace``, atomic on POSIX). A full disk, a killed process or a
signal leaves either the previous file or the complete new one, never a cut-off document or an
empty file; the temporary file is removed on failure.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from specseed.core.errors import OutputError


def write_atomic(path: Path, text: str, what: str) -> None:
    """Write ``text`` to ``path`` atomically; ``OutputError`` naming ``what`` on failure."""
    folder = path.parent
    tmp: str | None = None
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
        tmp = None
        _fsync_folder(folder)
    except OSError as exc:
        raise OutputError(
            f"cannot write the {what} to {path}: {exc.strerror or exc}",
            hint="free space or choose another path; the findings are in the terminal report",
        ) from None
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


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
