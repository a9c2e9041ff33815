"""RNG layout contracts: the rule an engine follows to give each sampling event its Philox state.

A contract is data, not code scattered through checks: adding an engine's layout is one entry
here, and every check reads it through the same questions. The reference
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

from dataclasses import dataclass, field, replace
from functools import cache
from typing import Literal

from specseed.core.defects import DEFECT_IDS

EventKind = Literal["target", "accept", "draft"]

UINT64_MASK = (1 << 64) - 1
DEFAULT_SAMPLING_SEED = 42
"""TensorRT-LLM's seed for requests that set none (``DEFAULT_SAMPLING_SEED``)."""
UNSEEDED_SEED_BASE = 1 << 62
"""First seed the ideal layout hands to unseeded requests (one per request, counting up)."""
TRTLLM_UNSEEDED_OFFSET_BASE = 1 << 62
"""TensorRT-LLM's ``UNSEEDED_OFFSET_BASE`` (``pyexecutor/sampler/ops/custom.py``): where the
shared counter of unseeded requests starts in the slot-span layout."""
TRTLLM_RNG_SLOT_SPAN = 32
"""Draws per slot of TensorRT-LLM's slot-span layouts: ``_RNG_SLOT_SPAN = 32``
(``tensorrt_llm/_torch/speculative/interface.py`` at 8de196e3) and ``MAX_DRAWS_PER_ROW = 32``
(``tensorrt_llm/_torch/pyexecutor/sampler/ops/custom.py`` at 740c856b, "the kernel's
kMaxRejectRounds"). With K = 3 a linear window is 8 * 32 = 256 draws."""


@dataclass(frozen=True)
class Limitation:
    """An invariant a contract gives up on purpose, with the defect class it amounts to."""

    defect: str
    """The defect id (``specseed.core.defects``) that this limitation is an instance of."""
    checks: tuple[str, ...]
    """Check ids whose failures this limitation explains (when states follow the contract)."""
    reason: str
    """One line a user can read: why the contract cannot hold this invariant."""


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
        for limitation in self.limitations:
            if limitation.defect not in DEFECT_IDS:
                raise ValueError(f"contract {self.name}: unknown defect {limitation.defect!r}")

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

    def limitation_for(self, check_id: str) -> Limitation | None:
        """The stated limitation that excuses this check, if any."""
        for limitation in self.limitations:
            if check_id in limitation.checks:
                return limitation
        return None


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

_ROW_SUBSEQUENCE = Limitation(
    "row-subsequence",
    ("position-invariance", "batch-invariance", "overlap-invariance", "uptime-invariance"),
    "flashinfer's kernels use the batch row as the Philox subsequence; the PR states "
    "that a seeded request's tokens depend on its row",
)
_ONE_DRAW_SLOTS = Limitation(
    "draw-overlap",
    ("draw-ranges-disjoint", "distribution"),
    "slots are one draw wide: the accept kernel (K + 1 or K + 2 draws) and multi-round "
    "top-k/top-p kernels read into the next slots on the same row; the bonus token and "
    "the next draft can read one draw, which couples consecutive tokens (seen by the "
    "distribution check's step-aware sub-tests in the built-in distribution scenario: K = 1, "
    "2 x 150 copies in one batch)",
)

_TEST = "tests/unittest/_torch/speculative/hw_agnostic/test_rng_window_counter.py"
_ELEMENT0 = (
    "subsequence = the row in the kernel call (flashinfer's blockIdx.x); interface.py of this "
    "era states that the pinned flashinfer sampling ops and the accept kernel "
    "(chain_speculative_sampling) read element 0 of the seed and offset tensors, so every "
    "row of one call uses the first row's seed and window: the per-row values are carried "
    "but not yet honored per request (specseed's row0-seed defect class)"
)
_SLOT_SPAN_FLASHINFER = (
    "the flashinfer ops behind the non-fused sampling modes and the accept kernel read "
    "element 0 of the seed/offset tensors, subsequence = the kernel row; "
)

TRTLLM_PR17599 = RngContract(
    name="trtllm-pr17599",
    summary=(
        "seed = SamplingParams.seed or 42; window of max_draft_len + 1 offsets per iteration "
        "(base = n * (K + 1), n the request's own iteration); target and accept kernels at "
        "base + 0, draft step i at base + 1 + i; subsequence = the row in the kernel call"
    ),
    unseeded="default-seed",
    row_subsequence=True,
    slot_stride=1,
    separate_target_slots=False,
    limitations=(
        _ROW_SUBSEQUENCE,
        Limitation(
            "unseeded-shared-stream",
            ("unseeded-independence",),
            "unseeded requests all take seed 42 with per-request offsets, so requests that "
            "sit on the same row at the same iteration draw the same numbers",
        ),
        _ONE_DRAW_SLOTS,
    ),
    reference=(
        "TensorRT-LLM PR 'Honor SamplingParams.seed on the one-model speculative path' "
        "(#17599, commit 2c0eca97d3), on fresh slots: n is the request's own iteration. As "
        "merged the window index came from a counter per sequence slot that is not reset "
        "when a new request takes the slot; trtllm-pr17599-as-merged models that"
    ),
    subsequence_rule=_ELEMENT0,
    upstream_commits=("2c0eca97d3", "d5e2f8f8a39a46aeedc39a4d81087285a238ebaa"),
    held_to=(f"{_TEST} at d5e2f8f8 (slots no earlier request used)",),
)

TRTLLM_PR17599_AS_MERGED = replace(
    TRTLLM_PR17599,
    name="trtllm-pr17599-as-merged",
    summary=(
        "PR 17599 as merged: as trtllm-pr17599, but the window index is a counter per sequence "
        "slot (every request, seeded or not, advances its slot's counter once per forward "
        "pass) that a new request on the slot inherits: a seeded request on a reused slot "
        "starts partway into its stream"
    ),
    window_counter="slot",
    reference=(
        "TensorRT-LLM PR #17599 (commit 2c0eca97d3); the test at d5e2f8f8 keys the counter "
        "by py_seq_slot and never resets it, and interface.py of that era says a new request "
        "on a recycled slot starts partway into its stream. Requests without a slot (warmup "
        "dummies) share one counter of their own. A seeded request's tokens then depend on "
        "the slot's earlier traffic: the slot-reuse scenario shows it"
    ),
    held_to=(f"{_TEST} at d5e2f8f8",),
)

TRTLLM_PR19601 = RngContract(
    name="trtllm-pr19601",
    summary=(
        "seed = SamplingParams.seed or 42; window of K + 1 offsets (trees too): target and "
        "accept at base + 0, draft step i at base + 1 + i; seeded: base = n * (K + 1), the "
        "slot's counter restarting for each new request; unseeded: base = k * (K + 1) from one "
        "counter shared by all unseeded requests; subsequence = the row in the kernel call"
    ),
    unseeded="default-seed",
    row_subsequence=True,
    slot_stride=1,
    separate_target_slots=False,
    unseeded_offsets="shared-counter",
    unseeded_offset_base=0,
    limitations=(_ROW_SUBSEQUENCE, _ONE_DRAW_SLOTS),
    reference=(
        "TensorRT-LLM PRs #19505 (commit ca3c570f22: unseeded requests on one shared window "
        "counter) and #19601 (commit b88149e535: a seeded request's per-slot counter restarts "
        "when a new request takes the slot; a block drafter's K rows all at base + 1, told "
        "apart by their kernel rows). Unseeded windows start at 0 like seeded ones, so an "
        "unseeded request and one seeded with 42 can meet on the same (seed, row, offset)"
    ),
    subsequence_rule=_ELEMENT0,
    upstream_commits=(
        "b88149e535265b52e8ddb1339e35710e10b7ecf8",
        "04fa7c4c7fa50f02992d7f5a2e3cb85a020f1629",
    ),
    held_to=(
        f"{_TEST}, version of b88149e5's layout (its commit not identified)",
        f"{_TEST} at 04fa7c4c",
    ),
)

TRTLLM_SLOT_SPAN_740C856B = RngContract(
    name="trtllm-slot-span-740c856b",
    summary=(
        "seed = SamplingParams.seed or 42; window of T + K + 1 slots of 32 draws "
        "(MAX_DRAWS_PER_ROW; T = K + 1, or max_total_draft_tokens + 1 on a tree): target rows "
        "0..T - 1, draft steps T..T + K - 1, accept T + K; seeded: base = n * window per "
        "request; unseeded: base = k * window from one shared counter starting at 0"
    ),
    unseeded="default-seed",
    row_subsequence=True,
    slot_stride=TRTLLM_RNG_SLOT_SPAN,
    separate_target_slots=True,
    accept_slot_last=True,
    unseeded_offsets="shared-counter",
    unseeded_offset_base=0,
    tree_target_slots=True,
    fused_per_row_subsequence="zero",
    limitations=(_ROW_SUBSEQUENCE,),
    reference=(
        "TensorRT-LLM commit 740c856b: MAX_DRAWS_PER_ROW = 32 in pyexecutor/sampler/ops/"
        "custom.py, slots rng_draft_slot(i) = T + i and rng_accept_slot = T + K in "
        "speculative/interface.py. Unseeded windows start at 0, so an unseeded request and "
        "one seeded with 42 can meet on the same (seed, offset)"
    ),
    subsequence_rule=(
        _SLOT_SPAN_FLASHINFER
        + "the fused kernel with per-row entries uses subsequence 0 and Philox offset = the "
        "row's offset (custom.py and the kernel agree; kMaxRejectRounds = 32 bounds a row's "
        "draws, so 32-draw slots keep rows apart)"
    ),
    upstream_commits=("740c856bca85ba7d0f1d63dea4262e0419d17f25",),
    held_to=(f"{_TEST} at 740c856b",),
    aliases=("trtllm-740c856b",),
)

TRTLLM_SLOT_SPAN = replace(
    TRTLLM_SLOT_SPAN_740C856B,
    name="trtllm-slot-span",
    summary=(
        "seed = SamplingParams.seed or 42; window of T + K + 1 slots of _RNG_SLOT_SPAN = 32 "
        "draws (T = K + 1, or max_total_draft_tokens + 1 on a tree): target rows 0..T - 1, "
        "draft steps T..T + K - 1, accept T + K; seeded: base = n * window per request; "
        "unseeded: base = 2^62 + k * window from one shared counter"
    ),
    unseeded_offset_base=TRTLLM_UNSEEDED_OFFSET_BASE,
    fused_per_row_subsequence="offset-high-bit",
    reference=(
        "TensorRT-LLM commit 8de196e3: _RNG_SLOT_SPAN = 32 in speculative/interface.py, "
        "UNSEEDED_OFFSET_BASE = 1 << 62 in pyexecutor/sampler/ops/custom.py"
    ),
    subsequence_rule=(
        _SLOT_SPAN_FLASHINFER
        + "the fused kernel with per-row entries (a single-row call included) uses "
        "subsequence 2^63 | offset and Philox offset 0 (kPerRowSubsequenceBase in the "
        "kernel; custom.py says only that the offset names the row's subsequence and does "
        "not mention the high bit: the kernel is modelled). On that path the predicted "
        "offset is the row's subsequence, not its Philox offset"
    ),
    upstream_commits=("8de196e32781be0b8ec7edcf56c2a92d45457177",),
    held_to=(
        f"{_TEST} at 8de196e3",
        f"{_TEST}, later version with test_block_rows_take_consecutive_slots (commit not "
        "identified)",
    ),
    aliases=("trtllm-8de196e3",),
)

VLLM_GENERATORS = RngContract(
    name="vllm-generators",
    summary=(
        "vLLM V1: each seeded request owns a torch.Generator seeded with its seed, consumed "
        "sequentially by its sampling events (offset = draws so far, subsequence 0); "
        "unseeded requests draw from the engine's global generator"
    ),
    unseeded="global-stream",
    row_subsequence=False,
    slot_stride=1,
    separate_target_slots=False,
    offsets="sequential",
    reference=(
        "vLLM 0.32.0 vllm/v1/worker/gpu_model_runner.py (_update_states: "
        "torch.Generator.manual_seed(sampling_params.seed)), vllm/v1/worker/gpu_input_batch.py "
        "(InputBatch.generators)"
    ),
)
"""Offsets count the generator's outputs: 32-bit Mersenne Twister words on the CPU, the
Philox offset (``Generator.get_offset()``) on CUDA. specseed.engine_adapters.vllm.observe
lists every point where vLLM 0.32.0 consumes them."""

ENTRY_POINT_GROUP = "specseed.contracts"

CONTRACTS: dict[str, RngContract] = {
    c.name: c
    for c in (
        IDEAL,
        TRTLLM_PR17599,
        TRTLLM_PR17599_AS_MERGED,
        TRTLLM_PR19601,
        TRTLLM_SLOT_SPAN_740C856B,
        TRTLLM_SLOT_SPAN,
        VLLM_GENERATORS,
    )
}
"""The built-in contracts. ``all_contracts()`` adds those other packages register."""
CONTRACT_NAMES: tuple[str, ...] = tuple(CONTRACTS)


@cache
def all_contracts() -> dict[str, RngContract]:
    """Built-in contracts, then those registered by other packages: entry points in the
    ``specseed.contracts`` group whose object is an ``RngContract`` of the same name. A
    broken plugin is left out rather than breaking every command."""
    from importlib.metadata import entry_points

    found = dict(CONTRACTS)
    for point in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda p: p.name):
        try:
            contract = point.load()
        except Exception:  # a broken plugin is left out, not fatal
            continue
        if isinstance(contract, RngContract) and contract.name == point.name:
            found.setdefault(contract.name, contract)
    return found


def _aliases() -> dict[str, str]:
    return {alias: c.name for c in all_contracts().values() for alias in c.aliases}


def contract_names() -> tuple[str, ...]:
    """Every name a contract answers to: its own, then the aliases."""
    return (*all_contracts(), *(a for a in _aliases() if a not in all_contracts()))


def get_contract(name: str) -> RngContract:
    """The contract with this name or alias; ``KeyError`` if there is none."""
    found = all_contracts()
    return found[name] if name in found else found[_aliases()[name]]
