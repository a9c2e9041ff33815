"""The ``--jobs`` workers' forkserver: what it preloads, when it starts, how it stops.

Workers fork from a ``forkserver`` that has imported torch and the engine modules once
(:data:`WORKER_MODULES`, with the garbage collector off: ``forkserver_preload``), so a worker
is ready in milliseconds. Those imports take about 1 s on a 2-core machine; started when
the pool is made, after the audit's own imports and planning, they are the first thing
every worker waits for. :func:`start_early` starts the server as soon as a caller knows
workers are coming (the default audit: the reference engine's built-in model over the
built-in library), so that its imports run beside the parent's.

A light module: importing it costs nothing beyond ``multiprocessing``, so a command can start
the server before it imports anything heavy itself.
"""

from __future__ import annotations

import atexit
import contextlib
import multiprocessing
import os
import signal
from collections.abc import Callable

WORKER_MODULES = (
    "torch",
    "specseed.run.execute",
    "specseed.engine_adapters.reference.adapter",
    "specseed.distribution.collect",
    "specseed.distribution.analysis",
    "specseed.distribution.twosample",
)
"""Modules the forkserver imports once for every worker it forks (``forkserver_preload``
imports them with the garbage collector off)."""

PRELOAD = (
    "specseed",  # first: its warning filter must be in place before torch is imported
    "specseed.run.forkserver_preload",  # WORKER_MODULES
    "specseed.run.forkserver_exit",  # last: its exit handler runs first (see the module)
)
"""Modules the forkserver preloads, after the main script."""

_AT_EXIT: list[Callable[[], None]] = []
"""What this process registered with ``atexit`` (once each)."""

_EARLY = {"started": False, "used": False}
"""Whether :func:`start_early` started the server, and whether a pool has used it since."""


def context() -> multiprocessing.context.BaseContext:
    """The workers' start method, for a pool about to start: the forkserver (preloading
    :data:`PRELOAD`, stopped at exit), or ``spawn`` where there is none."""
    _EARLY["used"] = True
    return _context()


def _context() -> multiprocessing.context.BaseContext:
    if "forkserver" in multiprocessing.get_all_start_methods():
        forkserver = multiprocessing.get_context("forkserver")
        forkserver.set_forkserver_preload(["__main__", *PRELOAD])
        if stop not in _AT_EXIT:
            _AT_EXIT.append(stop)
            atexit.register(stop)
        return forkserver
    return multiprocessing.get_context("spawn")


def usable_cpus() -> int:
    """CPUs this process may run on (the affinity mask where the platform has one)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def start_early() -> bool:
    """Start the forkserver now, without waiting for its imports, when this process may use
    more than one CPU; the pool made later connects to it. Returns whether it started (or
    already ran). Starting it for an audit that ends up in one process costs those imports'
    CPU on another core, and nothing else: it stops at exit."""
    if usable_cpus() < 2 or _context().get_start_method() != "forkserver":
        return False
    from multiprocessing import forkserver

    forkserver.ensure_running()
    _EARLY["started"] = True
    return True


def stop() -> None:
    """At exit: stop the forkserver and multiprocessing's resource tracker, and wait for
    them. Left alone they notice the parent's end only a moment later, outliving the audit.
    multiprocessing's own exit work (finalizers that unlink the pools' semaphores) runs
    first, as it would have before them. The three are private; a Python without them
    leaves the servers as they were. A server started early that no pool used is killed
    first: it may still be importing, and would make the exit wait for those imports."""
    from multiprocessing import forkserver, resource_tracker, util

    server = getattr(forkserver, "_forkserver", None)
    pid = getattr(server, "_forkserver_pid", None)
    if _EARLY["started"] and not _EARLY["used"] and isinstance(pid, int):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)

    steps = (
        getattr(util, "_exit_function", None),
        getattr(server, "_stop", None),
        getattr(getattr(resource_tracker, "_resource_tracker", None), "_stop", None),
    )
    for step in steps:
        if step is not None:
            with contextlib.suppress(Exception):
                step()
