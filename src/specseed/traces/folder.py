"""An audit's ``--trace-dir``: one writer per run, and a lock so that two audits never write
into the same folder at once.

Two audits sharing a folder would interleave or overwrite each other's JSONL lines
(``DIR/<scenario>/<run>.jsonl`` is the same path for both), so the first audit takes an
exclusive lock on ``DIR/.specseed.lock`` for as long as it runs, and a second one is refused
before it runs anything (``TraceDirBusy``, exit 2). The lock is an ``flock``: the kernel drops
it when the process ends, however it ends, so a killed audit never leaves the folder locked.

The lock file is the folder's like every other file in it: opened without following a symlink,
and refused when it is a symlink, a FIFO or a file with other hard links (its text, the
holder's pid, would be written into a file outside the folder).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import IO

from specseed.core.errors import InputError, TraceDirBusy
from specseed.core.files import NotOwned, create_inside, read_inside
from specseed.traces.records import TraceWriter

LOCK_NAME = ".specseed.lock"

try:  # POSIX; elsewhere the folder is not locked (documented)
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]


class TraceDir:
    """The folder traces stream into, locked for one audit at a time."""

    def __init__(self, root: Path, flag: str = "--bundle") -> None:
        self.root = root
        self.flag = flag
        """The option the user gave the folder with, for the message when it is busy."""
        self._lock: IO[str] | None = None

    def __enter__(self) -> TraceDir:
        self.lock()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def lock(self) -> None:
        """Take the folder for this audit; ``TraceDirBusy`` if another audit holds it."""
        try:
            self.root.mkdir(exist_ok=True)  # its parent must exist: a typo is not created
            fd = create_inside(self.root, LOCK_NAME, append=True, replace=False)
            handle = os.fdopen(fd, "a", encoding="utf-8")
        except NotOwned as exc:
            raise InputError(
                f"cannot use {self.root} as the {self._what}: {exc.filename} is {exc.strerror}",
                hint=f"remove {exc.filename}, or give a new or empty directory",
            ) from None
        except OSError as exc:
            raise InputError(
                f"cannot use {self.root} as the {self._what}: {exc.strerror or exc}"
            ) from None
        if fcntl is not None:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                handle.close()
                text = read_inside(self.root, LOCK_NAME, 64) or b""
                holder = text.decode("ascii", "replace").strip() or "unknown"
                raise TraceDirBusy(
                    f"the trace folder {self.root} is in use by another audit (pid {holder})",
                    hint=f"give each audit its own {self.flag}, or wait for the other to end",
                ) from None
        with contextlib.suppress(OSError):  # the pid is a courtesy for the message above
            handle.seek(0)
            handle.truncate()
            handle.write(f"{os.getpid()}\n")
            handle.flush()
        self._lock = handle

    @property
    def _what(self) -> str:
        return "bundle folder" if self.flag == "--bundle" else "trace folder"

    def release(self) -> None:
        if self._lock is not None:
            handle, self._lock = self._lock, None
            handle.close()  # closing drops the flock

    def path(self, scenario: str, run: str) -> Path:
        return self.root / scenario / f"{run}.jsonl"

    def writer(self, scenario: str, run: str) -> TraceWriter:
        return TraceWriter(self.path(scenario, run), inside=self.root)
