"""The ``--jobs`` forkserver's exit without the interpreter's teardown.

The forkserver (``run/parallel.py``) preloads torch and the engine's modules so that every
worker forks ready, and does nothing else. When the audit ends it closes the forkserver's
pipe and waits for it to exit, so that no process outlives the audit. A normal exit of a
process that imported torch spends about 0.6 s (2-core x86_64 VM) collecting and freeing the
objects of those imports: time between the audit's last line and the shell's prompt.

This module is the last one the forkserver preloads: its ``atexit`` handler, registered last,
runs first and ends the process with ``os._exit(0)`` (the forkserver's own exit status: it
leaves by ``SystemExit`` with no code). The workers it forks leave through ``os._exit``
already and never run it. The handler acts only in the process whose command line is
multiprocessing's forkserver: imported anywhere else it does nothing, so it can never change
another process's exit status.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys

from specseed.run.forkserver_preload import is_forkserver


def _exit_now() -> None:
    if not is_forkserver():
        return
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(0)


atexit.register(_exit_now)
