"""Per-request key/value caches, stored as slots of one pool per model.

A request owns a :class:`KVCache`; the model owns a :class:`KVPool` whose tensors hold every
cache's keys and values, one slot per live cache. Keeping them in one tensor lets a forward
write all rows' keys of a layer with one indexed store and read the requests' caches with one
gather, however many requests share the batch.

Every slot has the same capacity (the model's ``max_seq_len``). A forward attends over whole
blocks of key slots up to its furthest position, the invisible ones masked; ``numerics``
explains why that keeps a request's bits independent of the other requests and of how its
tokens were chunked. Positions at or beyond a cache's length are never visible, so truncating
is just forgetting the length; the stale entries are overwritten when the positions are
reused.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence

import torch

from specseed.core.errors import EngineError
from specseed.models.numerics import key_span


class KVPool:
    """Key and value storage for all caches of one model.

    ``keys[layer, slot, kv_head, position, dim]`` and ``values[layer, slot, kv_head, dim,
    position]``: values are stored transposed so that attention's weighted sum runs over the
    last, contiguous dimension.
    """

    def __init__(
        self,
        *,
        num_layers: int,
        num_kv_heads: int,
        head_dim: int,
        capacity: int,
        device: torch.device,
        initial_slots: int = 8,
    ) -> None:
        self.num_layers = num_layers
        self.num_kv_heads = num_kv_heads
        self.head_dim = head_dim
        self.capacity = capacity
        # Storage rounds up to whole attention blocks; positions past `capacity` stay unused.
        self.storage_len = key_span(capacity - 1)
        self.device = device
        self.keys = self._zeros_keys(initial_slots)
        self.values = self._zeros_values(initial_slots)
        self._free = list(range(initial_slots - 1, -1, -1))
        self._written = [0] * initial_slots
        """Per slot: positions below this may hold a previous owner's keys and values (a
        forward stores at most up to its cache's new length; see :meth:`note_written`)."""

    @property
    def num_slots(self) -> int:
        return int(self.keys.shape[1])

    def acquire(self) -> int:
        """A free slot, zeroed; the pool doubles when none is left (existing slots keep their
        index and contents)."""
        if not self._free:
            self.reserve(2 * self.num_slots)
        slot = self._free.pop()
        # Masked slots only ever contribute exact zeros, unless a previous owner left a NaN or
        # an infinity there (0 * inf is NaN): start every cache from zeros. Only the positions
        # a previous owner may have written need it (new slots are zeros already); a short
        # request leaves most of a 256-position slot untouched.
        written = self._written[slot]
        if written:
            self.keys[:, slot, :, :written].zero_()
            self.values[:, slot, :, :, :written].zero_()
            self._written[slot] = 0
        return slot

    def reserve(self, slots: int) -> None:
        """Grow to at least ``slots`` slots in one step (existing slots keep their index and
        contents). An engine that knows how many caches a run holds at once reserves them
        before it starts, instead of doubling (and copying every slot) along the way."""
        old = self.num_slots
        if slots <= old:
            return
        # One allocation of the new size, the old slots copied in (a cat with fresh zeros made
        # and filled two buffers of that size: 300 slots of the built-in model took 100 ms).
        keys, values = self._zeros_keys(slots), self._zeros_values(slots)
        keys[:, :old] = self.keys
        values[:, :old] = self.values
        self.keys, self.values = keys, values
        self._free = list(range(slots - 1, old - 1, -1)) + self._free
        self._written += [0] * (slots - old)

    def note_written(self, slot: int, end: int) -> None:
        """A forward is about to store positions below ``end`` of ``slot``."""
        if end > self._written[slot]:
            self._written[slot] = end

    def release(self, slot: int) -> None:
        self._free.append(slot)

    def copy_positions(self, source: int, targets: Sequence[int], length: int) -> None:
        """Copy positions below ``length`` of slot ``source`` into each of slots ``targets``."""
        if not targets or length <= 0:
            return
        for target in targets:
            self.note_written(target, length)
        index = torch.tensor(list(targets), dtype=torch.long, device=self.device)
        self.keys[:, index, :, :length] = self.keys[:, source : source + 1, :, :length]
        self.values[:, index, :, :, :length] = self.values[:, source : source + 1, :, :, :length]

    def _zeros_keys(self, slots: int) -> torch.Tensor:
        return torch.zeros(
            (self.num_layers, slots, self.num_kv_heads, self.storage_len, self.head_dim),
            dtype=torch.float32,
            device=self.device,
        )

    def _zeros_values(self, slots: int) -> torch.Tensor:
        return torch.zeros(
            (self.num_layers, slots, self.num_kv_heads, self.head_dim, self.storage_len),
            dtype=torch.float32,
            device=self.device,
        )


class KVCache:
    """One request's attention state in one model (target or draft head).

    ``length`` counts the positions already processed; the next forward appends at
    ``length``. ``truncate`` drops rejected draft positions. The slot returns to the pool when
    the cache is garbage-collected or :meth:`release` is called.
    """

    __slots__ = ("__weakref__", "_finalizer", "_length", "pool", "slot")

    def __init__(self, pool: KVPool) -> None:
        self.pool = pool
        self.slot = pool.acquire()
        self._length = 0
        self._finalizer = weakref.finalize(self, pool.release, self.slot)

    @property
    def length(self) -> int:
        return self._length

    @property
    def capacity(self) -> int:
        return self.pool.capacity

    @property
    def released(self) -> bool:
        return not self._finalizer.alive

    def truncate(self, length: int) -> None:
        """Keep the first ``length`` positions (``0 <= length <= self.length``)."""
        if not 0 <= length <= self._length:
            raise EngineError(f"cannot truncate a KV cache of length {self._length} to {length}")
        self._length = length

    def release(self) -> None:
        """Give the slot back now; the cache must not be used afterwards."""
        self._finalizer()

    def forks(self, count: int) -> list[KVCache]:
        """``count`` new caches of this pool, each holding a copy of this cache's positions:
        a prefix several sequences share, computed once."""
        caches = [KVCache(self.pool) for _ in range(count)]  # a growing pool moves the storage
        self.pool.copy_positions(self.slot, [c.slot for c in caches], self._length)
        for cache in caches:
            cache._advance(self._length)
        return caches

    def _advance(self, count: int) -> None:
        self._length += count

    def __repr__(self) -> str:
        return f"KVCache(slot={self.slot}, length={self._length}, capacity={self.capacity})"
