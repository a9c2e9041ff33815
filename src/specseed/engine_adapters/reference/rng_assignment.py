"""How the reference engine fills its seed/offset buffers for each sampling kernel call.

The engine follows a contract (its ``rng_profile``) and, when asked, gets it wrong in the
ways real engines did (``defects``). Every defect here is a change to the engine's own
bookkeeping, never a flag a check looks for:

- ``engine-counter``: one engine-wide seed, bumped after every kernel call, offset 0.
- ``neighbor-unseeded``: a call with any unseeded row samples every row from the engine's
  own stream (the first unseeded row's seed).
- ``unseeded-shared-stream``: unseeded requests take the default seed 42 (and, under a
  shared-counter contract, windows from their own iteration count instead of the shared
  counter: TensorRT-LLM issue 19487, which PR 19505 fixed).
- ``draft-shared-offset``: every draft step reuses draft step 0's offset.
- ``draw-overlap``: slots of a window are one draw apart whatever the contract says.
- ``row-subsequence``: the subsequence is left at the kernel's default, the row.
- ``seed-high-bits-dropped``: a request's seed keeps only its low 32 bits.
- ``accept-reuses-draft-draw``: draft step i draws where the next accept kernel's draw i is.
- ``overlap-window-reuse``: lives in the scheduler (which iteration count is read).
- ``row0-seed``: lives in the sampler call (flashinfer 0.6.4 mode).
- ``warmup-overflow``: lives in the buffer sizing (``RngBuffers``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import torch

from specseed.core.contracts import (
    DEFAULT_SAMPLING_SEED,
    UINT64_MASK,
    UNSEEDED_SEED_BASE,
    EventKind,
    RngContract,
)
from specseed.core.errors import EngineError

LOW_32_BITS = (1 << 32) - 1


def int64_bits(value: int) -> int:
    """The int64 whose bits equal the uint64 ``value`` (what a torch int64 buffer holds)."""
    value &= UINT64_MASK
    return value - (1 << 64) if value >= 1 << 63 else value


@dataclass(frozen=True)
class EventRequest:
    """One row of a kernel call, before RNG assignment."""

    request_seed: int | None
    """The request's seed (uint64) or None."""
    engine_seed: int
    """The seed the engine gave this request when it arrived unseeded (unused otherwise)."""
    slot: int
    decoding_iter: int
    """The iteration count the engine read for this row (the overlap bug reads a stale one)."""
    kind: EventKind
    index: int
    shared_window: int | None = None
    """The window this row took from a counter (the one shared by unseeded requests, or its
    sequence slot's; see ``RngAssigner.take_window``). None: the row's own iteration."""


@dataclass(frozen=True)
class AssignedState:
    """The Philox state the engine put in its buffers for one kernel row."""

    seed: int
    offset: int
    subsequence: int | None
    """An explicit subsequence, or None for the kernel's default (the kernel row)."""


class RngAssigner:
    """Engine-side RNG bookkeeping for one engine lifetime (one run)."""

    def __init__(
        self,
        contract: RngContract,
        defects: Sequence[str],
        max_draft_len: int,
        max_total_draft_tokens: int | None = None,
    ) -> None:
        if contract.offsets != "window":
            # The reference engine draws from Philox windows; a per-request stateful
            # generator (vLLM's layout) is a different machine, not a profile of this one.
            raise EngineError(
                f"the reference engine cannot follow contract {contract.name!r}",
                hint="its rng_profile must be a Philox window layout (ideal, trtllm-*)",
            )
        self.contract = contract
        self.defects = frozenset(defects)
        self.max_draft_len = max_draft_len
        self.max_total_draft_tokens = max_total_draft_tokens
        """A tree drafter's budget (None: linear): sizes the slot-span layouts' target slots."""
        self._engine_counter = 0
        self._unseeded_count = 0
        self._shared_windows = 0
        self._slot_windows: dict[int | None, int] = {}
        stride = 1 if "draw-overlap" in self.defects else contract.slot_stride
        self._layout = replace(contract, slot_stride=stride)

    def seed_for_new_request(self, request_seed: int | None) -> int:
        """The engine's own seed for an arriving request (used when it has none)."""
        if request_seed is not None:
            return request_seed & UINT64_MASK
        if self.contract.unseeded == "default-seed" or "unseeded-shared-stream" in self.defects:
            return DEFAULT_SAMPLING_SEED
        seed = UNSEEDED_SEED_BASE + self._unseeded_count
        self._unseeded_count += 1
        return seed

    def take_window(self, request_seed: int | None, slot: int | None = None) -> int | None:
        """The counter window of a request's row in a forward pass about to run (None where
        the contract counts the request's own iterations). Called once per scheduled row in
        batch order, warmup and discarded overlap rows included, as TensorRT-LLM hands a
        window to every request of every forward pass.

        Unseeded requests under a shared-counter contract take the next window of the one
        shared counter; under a per-slot counter (``window_counter="slot"``) every request
        takes its sequence slot's next window, which the slot's earlier requests advanced
        (``slot`` None: a request without a slot, as warmup dummies, on their own counter).
        """
        if request_seed is None and self.contract.unseeded_offsets == "shared-counter":
            if "unseeded-shared-stream" in self.defects:
                return None
            window = self._shared_windows
            self._shared_windows += 1
            return window
        if self.contract.window_counter == "slot":
            window = self._slot_windows.get(slot, 0)
            self._slot_windows[slot] = window + 1
            return window
        return None

    def assign(self, rows: Sequence[EventRequest]) -> list[AssignedState]:
        """States for the rows of one kernel call, in kernel-row order."""
        fallback: int | None = None
        if "neighbor-unseeded" in self.defects:
            fallback = next((r.engine_seed for r in rows if r.request_seed is None), None)
        states = []
        tree = self.max_total_draft_tokens
        for row in rows:
            if "engine-counter" in self.defects:
                seed, offset = self._engine_counter, 0
            else:
                own = row.engine_seed if row.request_seed is None else row.request_seed
                if row.request_seed is not None and "seed-high-bits-dropped" in self.defects:
                    own = row.request_seed & LOW_32_BITS
                seed = fallback if fallback is not None else own
                index = row.index
                if row.kind == "draft" and "draft-shared-offset" in self.defects:
                    index = 0
                if row.shared_window is None:
                    offset = self._layout.offset(
                        row.decoding_iter, row.kind, index, self.max_draft_len, tree
                    )
                else:
                    shared = row.request_seed is None and (
                        self._layout.unseeded_offsets == "shared-counter"
                    )
                    base = self._layout.unseeded_offset_base if shared else 0
                    offset = base + self._layout.offset(
                        row.shared_window, row.kind, index, self.max_draft_len, tree
                    )
                if row.kind == "draft" and "accept-reuses-draft-draw" in self.defects:
                    # Draw i of the next iteration's accept kernel is draft step i's draw.
                    offset = (
                        self._layout.offset(
                            row.decoding_iter + 1, "accept", 0, self.max_draft_len, tree
                        )
                        + index
                    )
            row_default = self.contract.row_subsequence or "row-subsequence" in self.defects
            states.append(AssignedState(seed & UINT64_MASK, offset, None if row_default else 0))
        if rows:
            self._engine_counter += 1
        return states


class RngBuffers:
    """The per-slot seed/offset buffers a kernel call reads (as TensorRT-LLM keeps them).

    Sized ``max_num_requests`` under ``warmup-overflow``; otherwise large enough for the
    largest warmup batch too.
    """

    def __init__(self, max_num_requests: int, largest_warmup: int, defects: Sequence[str]):
        capacity = max_num_requests
        if "warmup-overflow" not in defects:
            capacity = max(capacity, largest_warmup)
        self.seeds = torch.zeros(capacity, dtype=torch.int64)

    def fill(self, slots: Sequence[int], states: Sequence[AssignedState]) -> None:
        """Write one call's seeds at their request slots.

        A slot past the end raises IndexError, as the undersized buffer did in the engine.
        """
        for slot, state in zip(slots, states, strict=True):
            self.seeds[slot] = int64_bits(state.seed)
