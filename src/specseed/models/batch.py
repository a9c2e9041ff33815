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
from specseed.models.kv_cache import KVCache, KVPool
from specseed.models.numerics import apply_rope, attention, key_span


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
class AttentionLayout:
    """How a forward's rows meet their caches in attention: as chunks of ``chunk_rows`` rows,
    each row broadcast against its chunk's cache, gathered once per chunk (a row's products
    and sums are the ones a per-row gather computes, so the bits do not depend on the
    layout). Chunks shorter than ``chunk_rows`` are padded with copies of their last row,
    whose results are dropped."""

    chunk_rows: int
    """Rows per (padded) chunk, at least 1; 1 is the per-row layout."""
    slots: torch.Tensor
    """``[chunks]`` int64: the cache slot each chunk gathers."""
    span: int
    """Key slots attended over: whole blocks up to the forward's furthest position."""
    hidden_mask: torch.Tensor
    """``[chunks * chunk_rows, span]`` bool: the key slots a (padded) row must not see."""
    padded_rows: torch.Tensor | None
    """``[chunks * chunk_rows]`` int64: the forward's row behind each padded row; ``None``
    when no chunk is padded (the rows are the forward's, in order)."""
    unpadded_rows: torch.Tensor | None
    """``[rows]`` int64: each forward row's place among the padded rows (``None`` as above)."""


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
    layout: AttentionLayout
    """How the rows meet their caches in attention (padded chunks or one row each)."""
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
        chunk_slots: list[int] = []
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
            if ids and not 0 <= min(ids) <= max(ids) < vocab_size:
                raise EngineError(f"{owner}: token id out of range [0, {vocab_size}) in {ids}")
            pool.note_written(cache.slot, start + len(ids))
            caches.append(cache)
            sizes.append(len(ids))
            chunk_slots.append(cache.slot)
            token_ids.extend(ids)
            slots.extend([cache.slot] * len(ids))
            positions.extend(range(start, start + len(ids)))
        device = pool.device
        slot_tensor = torch.tensor(slots, dtype=torch.int64, device=device)
        position_tensor = torch.tensor(positions, dtype=torch.int64, device=device)
        return cls(
            caches=tuple(caches),
            sizes=tuple(sizes),
            token_ids=torch.tensor(token_ids, dtype=torch.int64, device=device),
            slots=slot_tensor,
            positions=position_tensor,
            layout=_attention_layout(sizes, chunk_slots, slot_tensor, positions, position_tensor),
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
    layout = plan.layout
    span = layout.span
    attended = attention(
        q if layout.padded_rows is None else q.index_select(0, layout.padded_rows),
        keys[:, :, :span].index_select(0, layout.slots),
        values_t[..., :span].index_select(0, layout.slots),
        layout.hidden_mask,
        shape.scale,
        chunk_rows=layout.chunk_rows,
    )
    if layout.unpadded_rows is None:
        return attended
    return attended.index_select(0, layout.unpadded_rows)


def _attention_layout(
    sizes: Sequence[int],
    chunk_slots: Sequence[int],
    row_slots: torch.Tensor,
    positions: Sequence[int],
    position_tensor: torch.Tensor,
) -> AttentionLayout:
    """Chunks padded to the longest one, or one row per chunk, whichever moves less data.

    Per row, attention copies the row's cache (gather) and computes products over it; per
    padded chunk it copies the cache once and computes the products of the padded rows. The
    padded layout is taken when ``2 * chunks * longest + chunks <= 3 * rows`` (a product
    over the cache costs about twice a copy of it at the tiny model's grouped heads): always
    when every chunk has the same size, never when all have one row, and not for a long
    prefill beside short decode chunks.
    """
    rows = len(positions)
    span = key_span(max(positions, default=0))  # from the lists: no device sync
    live = [size for size in sizes if size]
    longest = max(live, default=1)
    chunks = len(live)
    if longest == 1 or 2 * chunks * longest + chunks > 3 * rows:
        return AttentionLayout(
            chunk_rows=1,
            slots=row_slots,
            span=span,
            hidden_mask=_hidden_mask(position_tensor, span),
            padded_rows=None,
            unpadded_rows=None,
        )
    if chunks * longest == rows:  # every chunk of one size: the rows are the chunks, in order
        return AttentionLayout(
            chunk_rows=longest,
            slots=row_slots[::longest],
            span=span,
            hidden_mask=_hidden_mask(position_tensor, span),
            padded_rows=None,
            unpadded_rows=None,
        )
    device = position_tensor.device
    padded: list[int] = []
    unpadded: list[int] = []
    start = 0
    for size in sizes:
        if size:
            unpadded.extend(range(len(padded), len(padded) + size))
            padded.extend(range(start, start + size))
            padded.extend([start + size - 1] * (longest - size))
            start += size
    padded_rows = torch.tensor(padded, dtype=torch.int64, device=device)
    return AttentionLayout(
        chunk_rows=longest,
        slots=torch.tensor(
            [slot for slot, size in zip(chunk_slots, sizes, strict=True) if size],
            dtype=torch.int64,
            device=device,
        ),
        span=span,
        hidden_mask=_hidden_mask(position_tensor.index_select(0, padded_rows), span),
        padded_rows=padded_rows,
        unpadded_rows=torch.tensor(unpadded, dtype=torch.int64, device=device),
    )


def _hidden_mask(positions: torch.Tensor, span: int) -> torch.Tensor:
    """``[rows, span]``: true for the key slots beyond each row's position."""
    key_slots = torch.arange(span, device=positions.device)
    return key_slots[None, :] > positions[:, None]
