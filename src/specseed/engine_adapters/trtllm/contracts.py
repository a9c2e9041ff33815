"""TensorRT-LLM's RNG layouts, as contracts (``EngineInfo.contracts`` of the ``trtllm`` engine).

TensorRT-LLM's contracts are named by the PR or commit whose layout they model; each records
``upstream_commits`` and the upstream tests it was held to (``held_to``, reproduced assert for
assert by tests/conformance/): PR 17599 (fresh slots, and as merged), PR 19601, and the
slot-span layouts of 740c856b and 8de196e3. The mechanism (``RngContract``, ``Limitation``)
is ``specseed.core.contracts``.
"""

from __future__ import annotations

from dataclasses import replace

from specseed.core.contracts import Departure, Limitation, RngContract

TRTLLM_UNSEEDED_OFFSET_BASE = 1 << 62
"""TensorRT-LLM's ``UNSEEDED_OFFSET_BASE`` (``pyexecutor/sampler/ops/custom.py``): where the
shared counter of unseeded requests starts in the slot-span layout."""
TRTLLM_RNG_SLOT_SPAN = 32
"""Draws per slot of TensorRT-LLM's slot-span layouts: ``_RNG_SLOT_SPAN = 32``
(``tensorrt_llm/_torch/speculative/interface.py`` at 8de196e3) and ``MAX_DRAWS_PER_ROW = 32``
(``tensorrt_llm/_torch/pyexecutor/sampler/ops/custom.py`` at 740c856b, "the kernel's
kMaxRejectRounds"). With K = 3 a linear window is 8 * 32 = 256 draws."""


_INVARIANCE_CHECKS = (
    "position-invariance",
    "batch-invariance",
    "overlap-invariance",
    "uptime-invariance",
)
_PR17599 = "TensorRT-LLM PR 17599 (its description)"

# What PR 17599's authors stated, the only limitations its layouts carry. Later layouts keep
# both (their non-fused ops still run on the kernel row and on element 0).
_ROW_SUBSEQUENCE = Limitation(
    "row-subsequence",
    _INVARIANCE_CHECKS,
    "flashinfer's kernels use the batch row as the Philox subsequence, so a seeded "
    "request's tokens depend on its row",
    stated="reproducibility is per decoding position, not across batch positions",
    source=_PR17599,
)
_ELEMENT0_LIMIT = Limitation(
    "row0-seed",
    _INVARIANCE_CHECKS,
    "the pinned flashinfer's sampling ops and accept kernel read element 0 of the seed and "
    "offset tensors, so every row of a call draws from the first row's seed and window "
    "(excused where the recorded states follow the contract and row 0 had another seed)",
    stated="the pinned flashinfer reads element 0 of the seed and offset tensors only",
    source=f"{_PR17599} and tensorrt_llm/_torch/speculative/interface.py of that era",
)

# What the authors did not state: failures, each naming upstream's report or fix.
_SLOT_SPAN_FIX = (
    "fixed upstream by the slot-span layout (32-draw slots: TensorRT-LLM PR 19601, "
    "MAX_DRAWS_PER_ROW = 32 at commit 740c856b)"
)
_ONE_DRAW_SLOTS = Departure(
    "draw-overlap",
    _SLOT_SPAN_FIX,
    "slots are one draw wide: the accept kernel (K + 1 or K + 2 draws) and multi-round "
    "top-k/top-p kernels read into the next slots on the same row, and the bonus token and "
    "the next draft can read one draw, which couples consecutive tokens",
)
_UNSEEDED_SHARED = Departure(
    "unseeded-shared-stream",
    "reported in TensorRT-LLM issue 19487 and fixed as a bug by PR 19505 (the PR "
    "said unseeded rows stay independent through the kernel's per-row subsequence)",
    "unseeded requests all take seed 42 with per-request offsets, so two that sit on the "
    "same row at the same iteration draw the same numbers",
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
_UNSEEDED_FROM_ZERO = Departure(
    "unseeded-shared-stream",
    "fixed upstream at commit 8de196e3 (unseeded windows from UNSEEDED_OFFSET_BASE = 1 << 62)",
    "unseeded windows start at 0 like seeded ones, so an unseeded request and one seeded "
    "with 42 can meet on the same (seed, row, offset)",
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
    limitations=(_ROW_SUBSEQUENCE, _ELEMENT0_LIMIT),
    departures=(_UNSEEDED_SHARED, _ONE_DRAW_SLOTS),
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
    limitations=(_ROW_SUBSEQUENCE, _ELEMENT0_LIMIT),
    departures=(_ONE_DRAW_SLOTS, _UNSEEDED_FROM_ZERO),
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
    limitations=(_ROW_SUBSEQUENCE, _ELEMENT0_LIMIT),
    departures=(_UNSEEDED_FROM_ZERO,),
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
    departures=(),
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


CONTRACTS: tuple[RngContract, ...] = (
    TRTLLM_PR17599,
    TRTLLM_PR17599_AS_MERGED,
    TRTLLM_PR19601,
    TRTLLM_SLOT_SPAN_740C856B,
    TRTLLM_SLOT_SPAN,
)
"""TensorRT-LLM's contracts, in the order ``specseed contracts`` lists them."""
