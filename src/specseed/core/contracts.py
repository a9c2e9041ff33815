"""RNG layout contracts: the rule an engine follows to give each sampling event its Philox state.

A contract is data, not code scattered through checks: this module holds the mechanism (the
dataclasses, :class:`Limitation`, and the ideal contract every engine could follow); an
engine's own layouts live in its package (``engine_adapters/<engine>/contracts.py``, named by
its ``EngineInfo.contracts``), and ``specseed.engine_adapters.contracts`` looks any of them up
by name. Every check reads a contract through the same questions. The reference
engine's ``rng_profile`` names the contract the engine itself follows; model.yaml's
``contract`` names the one the audit holds the engine to. Checks ask the contract what state
an event should have had and which invariants it gives up (its stated limitations).

Vocabulary (the same words as the traces):

- decoding iteration ``n``: counts one request's own iterations; 0 is the context (prefill)
  step that samples the first token.
- event kinds: ``target`` samples from a target logits row (``index`` = the row's position
  among the request's K + 1 rows, or ``max_total_draft_tokens + 1`` with tree drafting); ``accept`` is the rejection-sampling kernel
  (chain_speculative_sampling) that accepts drafts and draws the residual or bonus token;
  ``draft`` is draft step ``index``.
- the offset window of iteration ``n`` starts at ``n * window_size`` and is cut into slots,
  ``slot_stride`` draws each (``offsets="window"``); or, for engines that keep one stateful
  generator per request (vLLM), each event starts where the request's previous event ended
  (``offsets="sequential"``: the offset is the count of draws the request consumed before).
- unseeded requests under a ``shared-counter`` layout take their windows from one counter that
  every unseeded request of the engine advances, in batch order: the window is not a function
  of the request alone, so the contract predicts only its form (``base + k * window_size``,
  ``k`` unique to the request's iteration), and ``rng-contract`` checks exactly that.
- TensorRT-LLM's contracts are named by the PR or commit whose layout they model; each
  records ``upstream_commits`` and the upstream tests it was held to (``held_to``,
  reproduced assert for assert by tests/conformance/).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from specseed.core.defects import DEFECT_IDS

EventKind = Literal["target", "accept", "draft"]

UINT64_MASK = (1 << 64) - 1
DEFAULT_SAMPLING_SEED = 42
"""TensorRT-LLM's seed for requests that set none (``DEFAULT_SAMPLING_SEED``)."""
UNSEEDED_SEED_BASE = 1 << 62
"""First seed the ideal layout hands to unseeded requests (one per request, counting up)."""


@dataclass(frozen=True)
class Limitation:
    """An invariant a contract gives up on purpose, as the engine's own authors stated it,
    with the defect class it amounts to. Only what they stated is a limitation: any other
    way the layout departs from the ideal is a :class:`Departure` (a finding, never
    excused)."""

    defect: str
    """The defect id (``specseed.core.defects``) that this limitation is an instance of."""
    checks: tuple[str, ...]
    """Check ids whose failures this limitation explains (when states follow the contract)."""
    reason: str
    """One line a user can read: why the contract cannot hold this invariant."""
    stated: str
    """What the authors stated, in their terms (shown in quotes with ``source``)."""
    source: str
    """Where they stated it: the upstream PR, issue or file (at a commit)."""

    def __post_init__(self) -> None:
        if not self.stated or not self.source:
            raise ValueError(f"limitation {self.defect}: a limitation is quoted with its source")

    @property
    def quoted(self) -> str:
        """The statement with its source, as reports show it."""
        return f"{self.reason} (stated in {self.source}: \u201c{self.stated}\u201d)"


@dataclass(frozen=True)
class Departure:
    """A way a layout departs from the ideal that its authors did not state as a limitation:
    its failures are findings like any other, and they name the upstream report or fix."""

    defect: str
    """The defect id the departure amounts to."""
    upstream: str
    """The upstream issue or PR that reported it or fixed it, e.g. "reported in TensorRT-LLM
    issue 19487, fixed by PR 19505"."""
    what: str
    """One line: what the layout does."""

    @property
    def note(self) -> str:
        """What a failing finding's suspect adds: that the layout does this, and upstream."""
        return f"{self.what}; not a stated limitation: {self.upstream}"


@dataclass(frozen=True)
class ExpectedState:
    """The Philox state a contract predicts for one sampling event."""

    seed: int | None
    """uint64 seed, or None where the contract only promises a seed unique to the request
    (or, under ``unseeded="global-stream"``, the engine's global generator, whatever its seed)."""
    subsequence: int | None
    """uint64 subsequence, or None where it is the event's kernel row (``row_subsequence``)."""
    offset: int | None
    """uint64 offset of the event's first draw; under a shared window (``shared_window_base``
    set) the event's place inside its window, which starts at some ``base + k * window``;
    None where the contract predicts none (an unseeded request on a global generator that
    the whole engine consumes)."""
    shared_window_base: int | None = None
    """Set where the window comes from a counter shared by unseeded requests: the first
    window's offset. None: ``offset`` is the one prediction."""
    window_size: int = 0
    """Draws per window (used with ``shared_window_base``)."""

    def matches_offset(self, observed: int) -> bool:
        """Whether an observed offset is the predicted one (or of the predicted form)."""
        if self.offset is None:
            return True
        if self.shared_window_base is None:
            return observed == self.offset
        start = observed - self.offset
        return (
            start >= self.shared_window_base
            and (start - self.shared_window_base) % max(self.window_size, 1) == 0
        )

    def window_start(self, observed: int) -> int:
        """The start of the shared window an observed offset lies in (for uniqueness)."""
        return observed - (self.offset or 0)


@dataclass(frozen=True)
class RngContract:
    """One RNG layout: how seed, subsequence and offset are chosen for every sampling event."""

    name: str
    summary: str
    unseeded: Literal["default-seed", "unique-seed", "global-stream"]
    """Unseeded requests take ``DEFAULT_SAMPLING_SEED``, a seed of their own, or draw from the
    engine's global generator (its seed and position are the engine's, not the request's)."""
    row_subsequence: bool
    """True: subsequence = the event's row in its kernel call; False: subsequence 0."""
    slot_stride: int
    """Draws reserved per slot of an offset window."""
    separate_target_slots: bool
    """True: target row j and the accept kernel each have a slot; False: all share slot 0."""
    limitations: tuple[Limitation, ...] = field(default=())
    departures: tuple[Departure, ...] = field(default=())
    """How the layout departs from the ideal beyond its stated limitations (upstream bugs it
    carries); each failure they cause is a finding naming the upstream report or fix."""
    accept_slot_last: bool = False
    """With separate target slots: True puts the accept kernel after the draft steps (slot
    2K + 1, TensorRT-LLM's slot-span layout); False right after the target rows (slot K + 1)."""
    unseeded_offsets: Literal["own-iteration", "shared-counter"] = "own-iteration"
    """Where an unseeded request's window comes from: its own iteration count, like a seeded
    request's, or one counter shared by every unseeded request (advanced once per unseeded row
    of every forward pass, in batch order, warmup included)."""
    unseeded_offset_base: int = 0
    """First offset of the shared counter's windows (``shared-counter`` only)."""
    reference: str = ""
    """Where the layout comes from (PR, document)."""
    window_counter: Literal["request", "slot"] = "request"
    """Where a window index comes from: the request's own iterations (``request``), or a
    counter per sequence slot that a new request on the slot inherits (``slot``: TensorRT-LLM
    PR 17599 as merged). Under ``slot`` the contract predicts only the window's form
    (``k * window_size`` with some ``k``); on a slot no earlier request used, ``k`` is the
    request's own iteration."""
    tree_target_slots: bool = False
    """True: a tree drafter's ``max_total_draft_tokens + 1`` target rows each take a slot
    before the draft steps (slot-span layouts); False: the window ignores trees (K + 1)."""
    fused_per_row_subsequence: Literal["row", "zero", "offset-high-bit"] | None = None
    """The fused sampling kernel with one (seed, offset) per row: Philox subsequence = the
    row (``row``); 0 with Philox offset = the row's offset (``zero``); or ``2^63 | offset``
    with Philox offset 0 (``offset-high-bit``). None: the layout predates per-row entries
    (every op reads element 0 of its seed/offset tensors)."""
    subsequence_rule: str = ""
    """The subsequence and element-0 rule as upstream's source states it (kernels win where
    upstream's comments disagree)."""
    upstream_commits: tuple[str, ...] = ()
    """The upstream commits whose layout this contract models."""
    held_to: tuple[str, ...] = ()
    """The upstream tests (file at commit) whose asserts this contract reproduces
    (tests/conformance)."""
    aliases: tuple[str, ...] = ()
    """Other names ``get_contract`` accepts for this contract."""
    offsets: Literal["window", "sequential"] = "window"
    """``window``: offsets from the decoding iteration (``offset()``); ``sequential``: a
    stateful generator per request, each event starting where the request's previous one
    ended (``slot_stride`` and ``separate_target_slots`` unused)."""

    def __post_init__(self) -> None:
        named = [lim.defect for lim in self.limitations] + [d.defect for d in self.departures]
        for defect in named:
            if defect not in DEFECT_IDS:
                raise ValueError(f"contract {self.name}: unknown defect {defect!r}")
        stated = {limitation.defect for limitation in self.limitations}
        for departure in self.departures:
            if departure.defect in stated:
                raise ValueError(
                    f"contract {self.name}: {departure.defect} is both stated and a departure"
                )

    # -- layout -------------------------------------------------------------------------

    def target_slots(self, max_draft_len: int, max_total_draft_tokens: int | None = None) -> int:
        """Target rows with a slot of their own: K + 1, or on a tree (slot-span layouts)
        ``max_total_draft_tokens + 1`` (None: linear drafting, K)."""
        if self.tree_target_slots and max_total_draft_tokens is not None:
            if max_total_draft_tokens < max_draft_len:
                raise ValueError(
                    f"max_total_draft_tokens {max_total_draft_tokens} < max_draft_len "
                    f"{max_draft_len}"
                )
            return max_total_draft_tokens + 1
        return max_draft_len + 1

    def slots_per_iteration(
        self, max_draft_len: int, max_total_draft_tokens: int | None = None
    ) -> int:
        """Slots in one iteration's offset window."""
        if self.separate_target_slots:
            # target rows, the accept kernel, draft steps 0..K-1
            return self.target_slots(max_draft_len, max_total_draft_tokens) + 1 + max_draft_len
        return max_draft_len + 1

    def window_size(self, max_draft_len: int, max_total_draft_tokens: int | None = None) -> int:
        """Offsets (draws) in one decoding iteration's window."""
        return self.slots_per_iteration(max_draft_len, max_total_draft_tokens) * self.slot_stride

    def slot(
        self,
        kind: EventKind,
        index: int,
        max_draft_len: int,
        max_total_draft_tokens: int | None = None,
    ) -> int:
        """The slot of an event inside its iteration's window."""
        targets = self.target_slots(max_draft_len, max_total_draft_tokens)
        if kind == "draft":
            if not 0 <= index < max(max_draft_len, 1):
                raise ValueError(f"draft step {index} outside 0..{max_draft_len - 1}")
            if not self.separate_target_slots:
                return 1 + index
            if self.accept_slot_last:
                return targets + index
            return targets + 1 + index
        if not self.separate_target_slots:
            return 0
        if kind == "accept":
            return targets + max_draft_len if self.accept_slot_last else targets
        if not 0 <= index < targets:
            raise ValueError(f"target row {index} outside 0..{targets - 1}")
        return index

    def offset(
        self,
        decoding_iter: int,
        kind: EventKind,
        index: int,
        max_draft_len: int,
        max_total_draft_tokens: int | None = None,
    ) -> int:
        """Offset of an event's first draw."""
        base = decoding_iter * self.window_size(max_draft_len, max_total_draft_tokens)
        slot = self.slot(kind, index, max_draft_len, max_total_draft_tokens)
        return (base + slot * self.slot_stride) & UINT64_MASK

    def fused_per_row_state(self, seed: int, offset: int) -> tuple[int, int, int] | None:
        """(seed, Philox subsequence, Philox offset) the fused kernel uses for a row with its
        own (seed, offset) entry, ``kernel row`` not known here (None where the rule is the
        row, or the layout has no per-row entries)."""
        if self.fused_per_row_subsequence == "zero":
            return seed & UINT64_MASK, 0, offset & UINT64_MASK
        if self.fused_per_row_subsequence == "offset-high-bit":
            return seed & UINT64_MASK, (1 << 63) | (offset & UINT64_MASK), 0
        return None

    def seed_for(self, request_seed: int | None) -> int | None:
        """The seed a request's events use (None: a seed unique to the request, or the
        engine's global generator)."""
        if request_seed is not None:
            return request_seed & UINT64_MASK
        return DEFAULT_SAMPLING_SEED if self.unseeded == "default-seed" else None

    def expected(
        self,
        *,
        request_seed: int | None,
        decoding_iter: int,
        kind: EventKind,
        index: int,
        max_draft_len: int,
        consumed: int | None = None,
        max_total_draft_tokens: int | None = None,
    ) -> ExpectedState:
        """The state this contract predicts for one sampling event.

        ``consumed``: draws the request's earlier events consumed (sequential contracts
        only). Without it a sequential contract predicts no offset.
        ``max_total_draft_tokens``: a tree drafter's budget (None: linear drafting).
        """
        tree = max_total_draft_tokens
        subsequence = None if self.row_subsequence else 0
        if self.offsets == "sequential":
            sequential = (
                None if request_seed is None and self.unseeded == "global-stream" else consumed
            )
            return ExpectedState(
                seed=self.seed_for(request_seed), subsequence=subsequence, offset=sequential
            )
        if request_seed is None and self.unseeded_offsets == "shared-counter":
            return ExpectedState(
                seed=self.seed_for(request_seed),
                subsequence=subsequence,
                offset=self.offset(0, kind, index, max_draft_len, tree),
                shared_window_base=self.unseeded_offset_base,
                window_size=self.window_size(max_draft_len, tree),
            )
        if self.window_counter == "slot":
            # The slot's counter, not the request, chose the window: only its form is known.
            return ExpectedState(
                seed=self.seed_for(request_seed),
                subsequence=subsequence,
                offset=self.offset(0, kind, index, max_draft_len, tree),
                shared_window_base=0,
                window_size=self.window_size(max_draft_len, tree),
            )
        return ExpectedState(
            seed=self.seed_for(request_seed),
            subsequence=subsequence,
            offset=self.offset(decoding_iter, kind, index, max_draft_len, tree),
        )

    def limitation_for(self, check_id: str, defect: str | None = None) -> Limitation | None:
        """The stated limitation that excuses this check (of this defect class), if any."""
        for limitation in self.limitations:
            if check_id in limitation.checks and defect in (None, limitation.defect):
                return limitation
        return None

    def departure_for(self, defect: str) -> Departure | None:
        """The layout's unstated departure of this defect class, if it has one."""
        return next((d for d in self.departures if d.defect == defect), None)


IDEAL = RngContract(
    name="ideal",
    summary=(
        "per-request seed (unseeded requests get one of their own), subsequence 0 whatever "
        "the batch row, and a separate 1024-draw slot for every sampling event"
    ),
    unseeded="unique-seed",
    row_subsequence=False,
    slot_stride=1024,
    separate_target_slots=True,
    reference="specseed: the layout that holds every invariant",
)
