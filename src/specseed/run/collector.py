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
