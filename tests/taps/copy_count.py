"""Counting the torch operations that copy tensor data (what a tapped call or a read costs)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch.utils._python_dispatch import TorchDispatchMode


class CopyCount(TorchDispatchMode):
    """Counts, while active, the operations that write a new copy of tensor data: on a GPU,
    each is a kernel launch or a transfer."""

    COPIES = frozenset({"cat", "stack", "clone", "copy_", "_to_copy"})

    def __init__(self) -> None:
        super().__init__()
        self.copies = 0

    def __torch_dispatch__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None
    ) -> Any:
        if func.overloadpacket.__name__ in self.COPIES:
            self.copies += 1
        return func(*args, **(kwargs or {}))


def copies(call: Callable[[], object]) -> int:
    """How many copies ``call`` makes."""
    with CopyCount() as counted:
        call()
    return counted.copies
