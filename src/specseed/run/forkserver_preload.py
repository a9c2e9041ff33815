"""What the ``--jobs`` workers' forkserver imports for them, with the collector off.

The forkserver imports torch and the engine's modules once (``forkserver.WORKER_MODULES``),
so that each worker forks ready. Those imports are the first thing every worker waits for,
and the garbage collector's full collections during them walk torch's objects again and
again (``collector``): here they run with the collector off, and what they made is frozen
before the first worker forks (each worker freezes again once it starts).

The module acts only in the process whose command line is multiprocessing's forkserver:
imported anywhere else it imports nothing and changes nothing.
"""

from __future__ import annotations

import importlib
import sys

FORKSERVER_COMMAND = "from multiprocessing.forkserver import main"
"""How CPython starts a forkserver (``python -c 'from multiprocessing.forkserver import main;
main(...)'``), the mark this module and ``forkserver_exit`` look for."""


def is_forkserver() -> bool:
    """Whether this process is a multiprocessing forkserver."""
    argv = getattr(sys, "orig_argv", [])
    return "-c" in argv and any(arg.startswith(FORKSERVER_COMMAND) for arg in argv)


def preload() -> None:
    """Import ``forkserver.WORKER_MODULES`` with the collector off, then freeze them."""
    from specseed.run.collector import quiet_imports
    from specseed.run.forkserver import WORKER_MODULES

    with quiet_imports(freeze=True):
        for name in WORKER_MODULES:
            importlib.import_module(name)


if is_forkserver():
    import signal

    # The audit decides what a terminal's hangup means (cli/interrupts.py): the server its
    # workers fork from must outlive it as they do.
    if hasattr(signal, "SIGHUP"):
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
    preload()
