"""The engine's own log, kept out of the report: to a file for the duration of the runs.

In-process engines write to the process's stderr: vLLM through its ``vllm`` logger (a stream
handler on the stderr it found at import), torch and C++ code straight to file descriptor 2.
While the runs go, descriptor 2 and ``sys.stderr`` (which engines and their progress bars
write to) point at the log file; the context yields a stream on a copy of the terminal's
descriptor (or the stream ``sys.stderr`` was, when that was not descriptor 2: a test runner's
capture), which the audit hands to its own consoles and progress lines, so specseed's output
stays on the terminal while everything else lands in the file. The handlers of the loggers
engines write to (``EngineInfo.loggers``: ``vllm``) get the file as well, whichever stream
they hold. Worker processes
(``--jobs``) inherit descriptor 2, so their engines log to the file too.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, TextIO

from specseed.engine_adapters.registry import engine_loggers

ENGINE_LOG = "engine.log"
"""The bundle's engine log file."""
VLLM_CONFIGURE = "VLLM_CONFIGURE_LOGGING"
"""vLLM's switch for configuring its own logger on import (``vllm/envs.py``)."""


class _LogStream:
    """The log file as Python code sees it (``sys.stderr``, the loggers' handler): a write
    that fails (a full disk) loses that text, never the audit; everything else is the
    file's."""

    def __init__(self, raw: TextIO) -> None:
        self._raw = raw

    def write(self, text: str) -> int:
        with suppress(OSError, ValueError):
            return self._raw.write(text)
        return len(text)

    def flush(self) -> None:
        with suppress(OSError, ValueError):
            self._raw.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._raw, name)


@contextmanager
def capture_engine_log(path: Path | None, *, contained: bool = False) -> Iterator[TextIO | None]:
    """Send the engine's stderr and loggers to ``path`` (appending) for the block; None: leave
    them alone. A file that cannot be opened leaves them alone too (the audit goes on).
    ``contained``: ``path`` is a file of a folder specseed owns (the bundle's ``engine.log``):
    it is opened, and its secrets scrubbed, without following a symlink, and a symlink, a
    special file or a file with other hard links there is never written (``core.files``).
    Yields the terminal's stream (None when nothing was captured)."""
    if path is None:
        yield None
        return
    try:
        if contained:
            from specseed.core.files import create_inside

            fd = create_inside(path.parent, path.name, append=True)
            log = open(fd, "a", encoding="utf-8", buffering=1)  # noqa: SIM115
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            log = open(path, "a", encoding="utf-8", buffering=1)  # noqa: SIM115
    except OSError:
        yield None
        return
    with suppress(OSError, ValueError):
        sys.stderr.flush()
    saved_fd = os.dup(2)
    # specseed's own output goes where sys.stderr went: a copy of descriptor 2 when it wrote
    # there, else the stream itself (a test runner's capture, a caller's buffer).
    own: TextIO | None = None if _writes_to_fd2(sys.stderr) else sys.stderr
    terminal = own or os.fdopen(
        os.dup(saved_fd), "w", buffering=1, encoding="utf-8", errors="replace"
    )
    stream: Any = _LogStream(log)
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(levelname)s %(asctime)s %(name)s: %(message)s"))
    moved: list[tuple[logging.Logger, list[logging.Handler], bool]] = []
    os.dup2(log.fileno(), 2)
    # Python code writing to sys.stderr (progress bars, warnings) whatever sys.stderr is now.
    saved_stderr, sys.stderr = sys.stderr, stream
    # vLLM configures its logger when first imported (a handler on stdout by default); one
    # imported during the runs must not: its records go to the file through this handler.
    configure = os.environ.get(VLLM_CONFIGURE)
    os.environ[VLLM_CONFIGURE] = "0"
    levels = []
    # Loggers of in-process engines (EngineInfo.loggers): their records go to the file.
    for name in engine_loggers():
        logger = logging.getLogger(name)
        moved.append((logger, list(logger.handlers), logger.propagate))
        levels.append(logger.level)
        for old in list(logger.handlers):
            logger.removeHandler(old)
        logger.addHandler(handler)
        logger.propagate = False
        if logger.level == logging.NOTSET:
            logger.setLevel(logging.INFO)
    try:
        yield terminal
    finally:
        if configure is None:
            os.environ.pop(VLLM_CONFIGURE, None)
        else:
            os.environ[VLLM_CONFIGURE] = configure
        for (logger, handlers, propagate), level in zip(moved, levels, strict=True):
            logger.removeHandler(handler)
            for old in handlers:
                logger.addHandler(old)
            logger.propagate = propagate
            logger.setLevel(level)
        with suppress(OSError, ValueError):
            terminal.flush()
        sys.stderr = saved_stderr
        os.dup2(saved_fd, 2)
        os.close(saved_fd)
        if own is None:
            terminal.close()
        with suppress(OSError, ValueError):  # a full disk: the log keeps what it could
            log.close()
        _scrub(path, contained)


def _writes_to_fd2(stream: Any) -> bool:
    try:
        return bool(stream.fileno() == 2)
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is an OSError
        return False


_SCRUB_LIMIT = 64 << 20
"""A log larger than this is left as the engine wrote it (too large to hold)."""


def _scrub(path: Path, contained: bool) -> None:
    """The log rewritten through the one writer, which removes secrets: an engine may log
    its server URL or a key. ``contained``: read and replaced without following a link."""
    from specseed.core.files import read_inside, write_atomic, write_inside

    with suppress(OSError):
        if contained:
            data = read_inside(path.parent, path.name, _SCRUB_LIMIT)
            if data is not None:
                write_inside(path.parent, path.name, data.decode("utf-8", errors="replace"))
        elif path.is_file() and path.stat().st_size <= _SCRUB_LIMIT:
            write_atomic(path, path.read_text(encoding="utf-8", errors="replace"))
