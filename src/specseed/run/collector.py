"""Heavy imports with the garbage collector off.

Importing torch makes about 190,000 objects that live as long as the process. While the
import runs, the collector's full collections walk every one of them again, and find almost
nothing to free (measured on a 2-core VM: three full collections, 145 objects freed, 0.25 s
of the 1.3 s the ``--jobs`` workers' server spends importing torch and the engine's
modules). :func:`quiet_imports` turns the collector off for such an import and back on after
it; a process specseed owns (the workers' server) also freezes what the import made
(``gc.freeze``), so that later full collections skip it as well.

A light module: it imports nothing but the standard library.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

_OWNED = {"process": False, "frozen": False}
"""Whether this process is specseed's own (:func:`own_process`), and whether an engine's
imports were frozen in it already (:func:`first_freeze`)."""


def own_process() -> None:
    """Say that this process is specseed's own: the ``specseed`` command, not a program that
    imported specseed as a library. The first engine's imports then freeze what they made
    (:func:`first_freeze`): without that, a serial audit's full collections walked torch's
    objects again and again (measured on a 2-core VM: three full collections, 0.3 s of the
    built-in library's audit with ``--jobs 1``, against 0.1 s frozen; the audit 6.2 s
    against 6.6 s)."""
    _OWNED["process"] = True


def owned_process() -> bool:
    """Whether :func:`own_process` was called in this process."""
    return _OWNED["process"]


def first_freeze() -> bool:
    """Whether the engine import about to run should freeze: in a process specseed owns, the
    first time only. The first import brings torch and the engine's modules, which live as
    long as the process; a later engine (the detection matrix makes one per audit) imports
    nothing new, and a freeze then would also keep an earlier audit's garbage for good."""
    if not _OWNED["process"] or _OWNED["frozen"]:
        return False
    _OWNED["frozen"] = True
    return True


@contextlib.contextmanager
def quiet_imports(*, freeze: bool = False) -> Iterator[None]:
    """The collector off for the block (and on again after it, if it was on); ``freeze``
    moves every object then alive to the permanent generation (``gc.freeze``): only for a
    process specseed owns, since it also spares whatever garbage the block left behind."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if freeze:
            gc.freeze()
        if enabled:
            gc.enable()
