"""The defects planted for ``specseed search`` (``core.defects.SEARCH_ONLY_DEFECTS``).

Each is gated on traffic that no built-in scenario sends, so the built-in library passes with
it injected and only generated traffic shows it. Like every injected defect they change the
engine's own bookkeeping (which seed and which offset window a row samples with), never a
flag a check reads. One ``PlantedDefects`` per engine run; the run tells it what happens
(requests admitted to slots, slots freed, each step's rows) and asks it, for each row of a
kernel call, which seed the row samples with and how many iterations its window moves:

- ``long-prefill-shift``: a step that prefills a prompt of more than
  :data:`LONG_PROMPT` tokens moves every other row of the step one window on.
- ``seed-low-bits``: a cache of seeds keyed on their low 32 bits, filled after each step:
  a request admitted in a later step samples with the first seed cached under its low bits
  (requests admitted together, as the library's high-bit twins are, do not see each other).
- ``slot-reuse-offset``: a request sampled with top-p, admitted to a slot on which
  :data:`SLOT_REUSES` requests finished, the last of them greedy, starts its windows where
  that greedy request stopped (the slot's counter, which the top-p path reads, is reset only
  when a sampled request leaves).
- ``knob-combo-window``: in a step with a greedy row, a row at temperature below
  :data:`COLD` with top_k and top_p both set moves one window on.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from specseed.core.defects import SEARCH_ONLY_DEFECT_IDS
from specseed.engine_adapters.base import RequestPlan

LONG_PROMPT = 64
"""Prompts longer than this many tokens trip ``long-prefill-shift`` (the library's longest
prompt has 22)."""
SLOT_REUSES = 2
"""Requests finished on a slot before ``slot-reuse-offset`` can trip for the next one, which
must sample with top-p (the library reuses slots twice after a greedy request, but its
requests there sample with top-k alone)."""
COLD = 0.7
"""Temperatures below this trip ``knob-combo-window`` (the library samples at 0.8 and up)."""
LOW_BITS = (1 << 32) - 1


@dataclass(frozen=True)
class StepRow:
    """What the planted defects read of one row of a step."""

    plan: RequestPlan
    prefill: bool
    prompt_length: int


class PlantedDefects:
    """The planted defects of one engine run (none of them: every answer is the plain one)."""

    def __init__(self, defects: Sequence[str]) -> None:
        self.on = frozenset(defects) & frozenset(SEARCH_ONLY_DEFECT_IDS)
        self._by_low_bits: dict[int, int] = {}
        """The seed cache of ``seed-low-bits``, as of the last step."""
        self._pending: dict[int, int] = {}
        """Seeds admitted since the last step (cached when it runs)."""
        self._seeds: dict[str, int] = {}
        self._finished: dict[int, int] = {}
        """Requests finished on each slot."""
        self._slot_iters: dict[int, int] = {}
        """Iterations the last greedy request on each slot ran, while the slot's counter was
        not reset since (a sampled request leaving resets it)."""
        self._base: dict[str, int] = {}
        self._moved: frozenset[str] = frozenset()
        """Requests whose rows move one window on in the current step."""

    def admitted(self, plan: RequestPlan, slot: int) -> None:
        """A request took ``slot``."""
        if not self.on or plan.phase == "warmup":
            return
        if "seed-low-bits" in self.on and plan.seed is not None:
            seed = plan.seed & ((1 << 64) - 1)
            self._seeds[plan.request_id] = self._by_low_bits.get(seed & LOW_BITS, seed)
            self._pending.setdefault(seed & LOW_BITS, seed)
        stale = self._slot_iters.get(slot)
        reused = self._finished.get(slot, 0) >= SLOT_REUSES
        top_p = not plan.greedy and plan.top_p < 1.0
        if "slot-reuse-offset" in self.on and reused and stale and top_p:
            self._base[plan.request_id] = stale

    def freed(self, plan: RequestPlan, slot: int, iterations: int) -> None:
        """A request that ran ``iterations`` decoding iterations left ``slot``."""
        if self.on:
            self._finished[slot] = self._finished.get(slot, 0) + 1
            self._slot_iters[slot] = iterations if plan.greedy else 0

    def step(self, rows: Sequence[StepRow]) -> None:
        """The rows of the step about to be computed."""
        if not self.on:
            return
        for low, seed in self._pending.items():
            self._by_low_bits.setdefault(low, seed)
        self._pending.clear()
        moved: set[str] = set()
        if "long-prefill-shift" in self.on:
            long = {r.plan.request_id for r in rows if r.prefill and r.prompt_length > LONG_PROMPT}
            if long:
                moved |= {r.plan.request_id for r in rows} - long
        if "knob-combo-window" in self.on and any(r.plan.greedy for r in rows):
            moved |= {
                r.plan.request_id
                for r in rows
                if 0 < r.plan.temperature < COLD and r.plan.top_k > 0 and r.plan.top_p < 1
            }
        self._moved = frozenset(moved)

    def seed(self, plan: RequestPlan, seed: int | None) -> int | None:
        """The seed a row of this request samples with (``seed``: the request's)."""
        return self._seeds.get(plan.request_id, seed) if seed is not None else None

    def iteration(self, plan: RequestPlan, decoding_iter: int) -> int:
        """The iteration whose offset window a row of this request samples at."""
        moved = 1 if plan.request_id in self._moved else 0
        return decoding_iter + self._base.get(plan.request_id, 0) + moved
