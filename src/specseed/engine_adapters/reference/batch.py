"""The row layout of one forward call: which request, token and position each row is.

A forward takes chunks (a request's cache and the tokens to append to it) and runs all their
rows through every projection at once. :class:`RowPlan` validates the chunks, builds the index
tensors the kernels need (token ids, cache slots, positions, the attention mask) and, once the
forward has succeeded, advances each cache by its chunk's length. It also holds the one
attention block both models share: RoPE, the store into the KV pool, and attention.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from specseed.core.errors import EngineError
from specseed.engine_adapters.reference.kv_cache import KVCache, KVPool
from specseed.engine_adapters.reference.numerics import apply_rope, attention, key_span


@dataclass(frozen=True)
class AttentionShape:
    """Head layout of an attention block."""

    num_heads: int
    num_kv_heads: int
    head_dim: int

    @property
    def group(self) -> int:
        return self.num_heads // self.num_kv_heads

    @property
    def scale(self) -> float:
        return float(self.head_dim) ** -0.5


@dataclass(frozen=True, eq=False)
class RowPlan:
    """Rows of one forward, in chunk order."""

    caches: tuple[KVCache, ...]
    sizes: tuple[int, ...]
    """Rows per chunk."""
    token_ids: torch.Tensor
    """``[rows]`` int64."""
    slots: torch.Tensor
    """``[rows]`` int64: the row's cache slot in the pool."""
    positions: torch.Tensor
    """``[rows]`` int64: the row's position in its sequence."""
    hidden_mask: torch.Tensor
    """``[rows, span]`` bool: the key slots a row must not attend to."""
    span: int
    """Key slots this forward attends over: whole blocks up to the furthest position."""
    _store_cache: dict[int, tuple[torch.Tensor, torch.Tensor]] = field(
        default_factory=dict, repr=False
    )

    @property
    def rows(self) -> int:
        return int(self.token_ids.shape[0])

    @classmethod
    def build(
        cls,
        chunks: Sequence[tuple[KVCache, Sequence[int] | torch.Tensor]],
        *,
        pool: KVPool,
        vocab_size: int,
        owner: str,
    ) -> RowPlan:
        caches: list[KVCache] = []
        sizes: list[int] = []
        token_ids: list[int] = []
        slots: list[int] = []
        positions: list[int] = []
        seen: set[int] = set()
        for number, (cache, tokens) in enumerate(chunks):
            if not isinstance(cache, KVCache) or cache.pool is not pool:
                raise EngineError(f"{owner}: chunk {number} carries a cache of another model")
            if cache.released:
                raise EngineError(f"{owner}: chunk {number} carries a released cache")
            if cache.slot in seen:
                raise EngineError(f"{owner}: a request's cache appears twice in one forward")
            seen.add(cache.slot)
            ids = tokens.tolist() if isinstance(tokens, torch.Tensor) else [int(t) for t in tokens]
            start = cache.length
            if start + len(ids) > pool.capacity:
                raise EngineError(
                    f"{owner}: {start} + {len(ids)} positions exceed the KV capacity "
                    f"{pool.capacity}",
                    hint="build the model with a larger max_seq_len",
                )
            if any(not 0 <= t < vocab_size for t in ids):
                raise EngineError(f"{owner}: token id out of range [0, {vocab_size}) in {ids}")
            caches.append(cache)
            sizes.append(len(ids))
            token_ids.extend(ids)
            slots.extend([cache.slot] * len(ids))
            positions.extend(range(start, start + len(ids)))
        device = pool.device
        position_tensor = torch.tensor(positions, dtype=torch.int64, device=device)
        span = key_span(max(positions, default=0))
        key_slots = torch.arange(span, device=device)
        return cls(
            caches=tuple(caches),
            sizes=tuple(sizes),
            token_ids=torch.tensor(token_ids, dtype=torch.int64, device=device),
            slots=torch.tensor(slots, dtype=torch.int64, device=device),
            positions=position_tensor,
            hidden_mask=key_slots[None, :] > position_tensor[:, None],
            span=span,
        )

    def store_indices(self, pool: KVPool) -> tuple[torch.Tensor, torch.Tensor]:
        """Where each row's keys and values go in one layer of ``pool``, as flat indices:
        ``[rows * kv_heads]`` into the keys viewed as ``[-1, head_dim]`` and ``[rows *
        kv_heads * head_dim]`` into the transposed values viewed flat. Computed once per
        forward and pool (every layer has the same layout)."""
        cached = self._store_cache.get(id(pool))
        if cached is not None:
            return cached
        kv_heads, dim, length = pool.num_kv_heads, pool.head_dim, pool.storage_len
        device = self.slots.device
        heads = torch.arange(kv_heads, device=device)
        lanes = torch.arange(dim, device=device)
        slot_heads = self.slots[:, None] * kv_heads + heads[None, :]  # [rows, kv_heads]
        key_index = slot_heads * length + self.positions[:, None]
        value_index = (slot_heads[:, :, None] * dim + lanes) * length + self.positions[
            :, None, None
        ]
        result = (key_index.reshape(-1), value_index.reshape(-1))
        self._store_cache[id(pool)] = result
        return result

    def commit(self) -> None:
        """Advance every cache past the rows this forward appended."""
        for cache, size in zip(self.caches, self.sizes, strict=True):
            cache._advance(size)


def self_attention(
    qkv: torch.Tensor,
    *,
    shape: AttentionShape,
    pool: KVPool,
    layer: int,
    plan: RowPlan,
    angles: torch.Tensor,
) -> torch.Tensor:
    """Attention of a layer: rotate q and k, store k and v at each row's position, attend.

    ``qkv [rows, (heads + 2 * kv_heads) * head_dim]`` is the fused q/k/v projection;
    ``angles [rows, 2, head_dim]`` the rows' RoPE table entries. Returns
    ``[rows, heads * head_dim]`` (the input of o_proj).
    """
    rows = qkv.shape[0]
    heads, kv_heads, dim = shape.num_heads, shape.num_kv_heads, shape.head_dim
    rotated = apply_rope(
        qkv[:, : (heads + kv_heads) * dim].view(rows, heads + kv_heads, dim), angles
    )
    q = rotated[:, :heads].view(rows, kv_heads, shape.group, dim)
    keys = pool.keys[layer]
    values_t = pool.values[layer]
    # Stores and gathers are plain copies (no arithmetic, so no bits change): flat-index
    # stores and `index_select` of whole slots run 2-5x faster than `tensor[slots, :,
    # positions] = ...` and `tensor[slots]` on the tiny model's shapes (measured).
    key_index, value_index = plan.store_indices(pool)
    keys.view(-1, dim).index_copy_(0, key_index, rotated[:, heads:].reshape(-1, dim))
    values_t.view(-1).put_(value_index, qkv[:, (heads + kv_heads) * dim :].reshape(-1))
    span = plan.span
    chunk_rows = plan.sizes[0] if len(set(plan.sizes)) == 1 and plan.sizes[0] > 1 else 1
    # Chunks of one size (a decode step's K + 1 rows per request): gather each request's
    # cache once, not once per row; the rows broadcast against it (same products, same bits).
    slots = plan.slots[::chunk_rows] if chunk_rows > 1 else plan.slots
    return attention(
        q,
        keys[:, :, :span].index_select(0, slots),
        values_t[..., :span].index_select(0, slots),
        plan.hidden_mask,
        shape.scale,
        chunk_rows=chunk_rows,
    )
