"""Contracts pinned to offsets worked out by hand, not by the code that computes them.

Each row below was derived on paper from the layout's description, so a wrong window, slot
or seed rule in contracts.py fails here instead of agreeing with itself.

trtllm-pr17599 (TensorRT-LLM PR "Honor SamplingParams.seed on the one-model speculative
path", #17599; the ``trtllm-pr17599`` entry of contracts.py): seed =
SamplingParams.seed, or DEFAULT_SAMPLING_SEED = 42 when unset (uint64 bits kept); a window of
K + 1 offsets per decoding iteration, base = n * (K + 1); the target sampler and the rejection
kernel read base + 0 (all K + 1 target rows of a request share it, one entry per logits row
copied from the request's entry); draft step i reads base + 1 + i; subsequence = the row in
the kernel call (flashinfer's blockIdx.x). Upstream's test of that era
(test_rng_window_counter.py at commit d5e2f8f8a3) pins offsets [0, 0], [W, W], [2W, 2W] with
W = K + 1 = 4 for two requests over three passes, the rows below for n = 0, 1, 2; it keys the
counter by sequence slot and never resets it, which this contract does not model
(docs/trtllm.md).

trtllm-pr19601 (TensorRT-LLM PRs #19505, commit ca3c570f22, and #19601, commit b88149e535;
upstream test tests/unittest/_torch/speculative/hw_agnostic/test_rng_window_counter.py as of
commit 04fa7c4c7f): the same K + 1 window and slots as pr17599; a seeded request's windows
are counted per request (the per-slot counter restarts when a new request takes the slot:
test_seeded_slot_reuse_resets_the_stream, [0, W] then [0, W] again); unseeded requests take
windows k * (K + 1) from ONE counter in batch order (test_unseeded_requests_in_one_batch_get_
distinct_windows: [0, W, 2W] then [3W, 4W, 5W]); seed 42.

trtllm-slot-span (TensorRT-LLM commit 8de196e3: _RNG_SLOT_SPAN = 32 in
speculative/interface.py, UNSEEDED_OFFSET_BASE = 1 << 62 in pyexecutor/sampler/ops/custom.py):
T target slots (T = K + 1 linear, max_total_draft_tokens + 1 on a tree), then the K draft
steps, then the accept kernel; WINDOW = (T + K + 1) * 32; target row j in slot j; draft step
i in slot T + i (a block drafter's row r too: test_block_rows_take_consecutive_slots,
base + (4 + row) * 32 for K = 3); accept in slot T + K; seeded windows n * WINDOW per request;
unseeded windows BASE + k * WINDOW from one counter, BASE = 2^62, seed 42. With K = 3 linear,
WINDOW = 8 * 32 = 256; with max_total_draft_tokens = 10, 15 * 32 = 480.
trtllm-slot-span-740c856b (commit 740c856b: MAX_DRAWS_PER_ROW = 32 in custom.py): the same
slots, unseeded windows k * WINDOW from 0.

ideal (specseed's own layout): the request's seed (unseeded: one of its own, so no fixed
value), subsequence 0, and per iteration a window of 2K + 2 slots of 1024 draws: target row j
in slot j, the accept kernel in slot K + 1, draft step i in slot K + 2 + i.
"""

from __future__ import annotations

import pytest

from specseed.engine_adapters.contracts import get_contract

U64 = (1 << 64) - 1
BASE = 1 << 62

# (K, iteration n, kind, index, kernel row, request seed) -> (seed, subsequence, offset)
PR17599 = [
    # K = 3: window 4
    (3, 0, "target", 0, 2, 7, 7, 2, 0),
    (3, 0, "draft", 0, 2, 7, 7, 2, 1),
    (3, 0, "draft", 2, 0, 7, 7, 0, 3),
    (3, 1, "accept", 0, 1, 7, 7, 1, 4),
    (3, 1, "target", 3, 1, 7, 7, 1, 4),
    (3, 5, "draft", 1, 0, None, 42, 0, 22),
    (3, 2, "accept", 0, 0, U64, U64, 0, 8),
    (3, 7, "target", 0, 5, -1, U64, 5, 28),
    # K = 1: window 2
    (1, 3, "accept", 0, 0, 9, 9, 0, 6),
    (1, 3, "draft", 0, 4, 9, 9, 4, 7),
    # K = 0: window 1, every iteration one target draw
    (0, 9, "target", 0, 0, None, 42, 0, 9),
]

# Seeded requests only: unseeded ones have a shared-counter window (UNSEEDED below).
PR19601 = [
    # K = 3: window 4, as pr17599 for a seeded request
    (3, 0, "target", 0, 2, 7, 7, 2, 0),
    (3, 1, "accept", 0, 1, 7, 7, 1, 4),
    (3, 1, "draft", 0, 1, 7, 7, 1, 5),
    (3, 2, "draft", 2, 0, 11, 11, 0, 11),
    (3, 7, "target", 0, 5, -1, U64, 5, 28),
    # K = 1: window 2
    (1, 3, "draft", 0, 4, 9, 9, 4, 7),
]

SLOT_SPAN = [
    # K = 3: slots target 0..3, draft 4..6, accept 7; window 8 * 32 = 256
    (3, 0, "target", 0, 2, 7, 7, 2, 0),
    (3, 0, "target", 3, 2, 7, 7, 2, 96),
    (3, 0, "draft", 0, 2, 7, 7, 2, 128),
    (3, 0, "draft", 2, 2, 7, 7, 2, 192),
    (3, 1, "accept", 0, 1, 7, 7, 1, 256 + 224),
    (3, 2, "draft", 1, 0, 42, 42, 0, 512 + 160),
    (3, 1, "target", 1, 3, -1, U64, 3, 256 + 32),
    # K = 1: slots target 0..1, draft 2, accept 3; window 128
    (1, 2, "accept", 0, 0, 5, 5, 0, 256 + 96),
    (1, 2, "draft", 0, 0, 5, 5, 0, 256 + 64),
    # K = 0: target 0, accept 1; window 64
    (0, 4, "target", 0, 1, 5, 5, 1, 256),
]

# Trees (slot-span layouts): (K, max_total_draft_tokens, n, kind, index) -> offset.
# K = 3, budget 10: targets 0..10, drafts 11..13, accept 14; window 15 * 32 = 480.
TREE = [
    (3, 10, 0, "target", 10, 320),
    (3, 10, 0, "draft", 0, 352),
    (3, 10, 1, "draft", 2, 480 + 416),
    (3, 10, 2, "accept", 0, 960 + 448),
    # a budget equal to K is the linear layout
    (3, 3, 1, "accept", 0, 256 + 224),
    # K = 2, budget 5: targets 0..5, drafts 6..7, accept 8; window 9 * 32 = 288
    (2, 5, 1, "draft", 1, 288 + 224),
    (2, 5, 1, "accept", 0, 288 + 256),
]

# Unseeded requests under a shared counter: (contract, K, kind, index, window k) -> offset,
# from the upstream tests' sequences: window k of the shared counter starts at base + k * W.
UNSEEDED = [
    ("trtllm-pr19601", 3, "target", 0, 0, 0),
    ("trtllm-pr19601", 3, "target", 0, 1, 4),
    ("trtllm-pr19601", 3, "target", 0, 5, 20),
    ("trtllm-pr19601", 3, "draft", 2, 5, 23),
    ("trtllm-slot-span", 3, "target", 0, 0, BASE),
    ("trtllm-slot-span", 3, "target", 0, 1, BASE + 256),
    ("trtllm-slot-span", 3, "target", 0, 2, BASE + 512),
    ("trtllm-slot-span", 3, "accept", 0, 2, BASE + 512 + 224),
    ("trtllm-slot-span", 3, "draft", 0, 3, BASE + 3 * 256 + 128),
    ("trtllm-slot-span-740c856b", 3, "target", 0, 0, 0),
    ("trtllm-slot-span-740c856b", 3, "target", 0, 5, 5 * 256),
    ("trtllm-slot-span-740c856b", 3, "accept", 0, 2, 512 + 224),
]

IDEAL = [
    # K = 3: 8 slots of 1024, window 8192
    (3, 0, "target", 0, 2, 7, 7, 0, 0),
    (3, 0, "draft", 0, 2, 7, 7, 0, 5120),
    (3, 1, "accept", 0, 1, 7, 7, 0, 12288),
    (3, 1, "draft", 0, 1, 7, 7, 0, 13312),
    (3, 2, "target", 3, 3, 7, 7, 0, 16384 + 3072),
    (3, 1, "draft", 2, 0, None, None, 0, 8192 + 7168),
    # K = 1: 4 slots, window 4096
    (1, 2, "target", 1, 0, 5, 5, 0, 9216),
    (1, 2, "accept", 0, 0, 5, 5, 0, 10240),
    (1, 2, "draft", 0, 0, 5, 5, 0, 11264),
]


def _check(name: str, row: tuple) -> None:  # type: ignore[type-arg]
    k, n, kind, index, kernel_row, request_seed, seed, subsequence, offset = row
    contract = get_contract(name)
    state = contract.expected(
        request_seed=request_seed, decoding_iter=n, kind=kind, index=index, max_draft_len=k
    )
    observed_subsequence = kernel_row if state.subsequence is None else state.subsequence
    assert (state.seed, observed_subsequence, state.offset) == (seed, subsequence, offset)


@pytest.mark.parametrize("row", PR17599, ids=lambda r: f"K{r[0]}-n{r[1]}-{r[2]}{r[3]}")
def test_trtllm_pr17599_offsets_match_the_hand_derived_table(row: tuple) -> None:  # type: ignore[type-arg]
    _check("trtllm-pr17599", row)


@pytest.mark.parametrize("row", IDEAL, ids=lambda r: f"K{r[0]}-n{r[1]}-{r[2]}{r[3]}")
def test_ideal_offsets_match_the_hand_derived_table(row: tuple) -> None:  # type: ignore[type-arg]
    _check("ideal", row)


@pytest.mark.parametrize("row", PR19601, ids=lambda r: f"K{r[0]}-n{r[1]}-{r[2]}{r[3]}")
def test_trtllm_pr19601_seeded_offsets_match_the_hand_derived_table(row: tuple) -> None:  # type: ignore[type-arg]
    _check("trtllm-pr19601", row)


@pytest.mark.parametrize("row", SLOT_SPAN, ids=lambda r: f"K{r[0]}-n{r[1]}-{r[2]}{r[3]}")
def test_trtllm_slot_span_seeded_offsets_match_the_hand_derived_table(row: tuple) -> None:  # type: ignore[type-arg]
    _check("trtllm-slot-span", row)


@pytest.mark.parametrize("name", ["trtllm-slot-span", "trtllm-slot-span-740c856b"])
@pytest.mark.parametrize("row", SLOT_SPAN, ids=lambda r: f"K{r[0]}-n{r[1]}-{r[2]}{r[3]}")
def test_both_slot_span_layouts_place_seeded_events_alike(row: tuple, name: str) -> None:  # type: ignore[type-arg]
    _check(name, row)


@pytest.mark.parametrize("name", ["trtllm-slot-span", "trtllm-slot-span-740c856b"])
@pytest.mark.parametrize("row", TREE, ids=lambda r: f"K{r[0]}-T{r[1]}-n{r[2]}-{r[3]}{r[4]}")
def test_tree_drafting_puts_max_total_draft_tokens_plus_one_targets_first(
    row: tuple,  # type: ignore[type-arg]
    name: str,
) -> None:
    k, budget, n, kind, index, offset = row
    state = get_contract(name).expected(
        request_seed=7,
        decoding_iter=n,
        kind=kind,
        index=index,
        max_draft_len=k,
        max_total_draft_tokens=budget,
    )
    assert state.offset == offset


def test_the_k_plus_one_layouts_ignore_trees() -> None:
    for name in ("trtllm-pr17599", "trtllm-pr19601"):
        contract = get_contract(name)
        assert contract.window_size(3, 10) == 4
        assert contract.offset(1, "draft", 2, 3, 10) == 7


def test_pr17599_as_merged_predicts_only_the_window_form() -> None:
    state = get_contract("trtllm-pr17599-as-merged").expected(
        request_seed=7, decoding_iter=1, kind="draft", index=0, max_draft_len=3
    )
    # The slot's earlier requests set k: any k * 4 + 1, nothing else.
    assert [state.matches_offset(o) for o in (1, 5, 13, 4, 6)] == [True] * 3 + [False] * 2


def test_aliases_name_the_same_contract() -> None:
    assert get_contract("trtllm-8de196e3") is get_contract("trtllm-slot-span")
    assert get_contract("trtllm-740c856b") is get_contract("trtllm-slot-span-740c856b")


@pytest.mark.parametrize("row", UNSEEDED, ids=lambda r: f"{r[0]}-K{r[1]}-{r[2]}{r[3]}-k{r[4]}")
def test_unseeded_shared_counter_windows_have_the_hand_derived_form(row: tuple) -> None:  # type: ignore[type-arg]
    name, k, kind, index, _window, offset = row
    contract = get_contract(name)
    # The iteration does not matter for an unseeded request: its window is the counter's.
    for decoding_iter in (0, 3):
        state = contract.expected(
            request_seed=None, decoding_iter=decoding_iter, kind=kind, index=index, max_draft_len=k
        )
        assert state.seed == 42
        assert state.matches_offset(offset)
        # One draw off, or a window before the base, is not of the form.
        assert not state.matches_offset(offset + 1)
        below = BASE if get_contract(name).unseeded_offset_base else 1
        assert not state.matches_offset(offset - below)


def test_window_slots_of_the_slot_span_layout_are_disjoint_and_inside_the_window() -> None:
    # test_window_slots_do_not_overlap upstream: every target row, draft step and the accept
    # kernel own a stretch of SPAN draws, and none reaches the next window.
    contract = get_contract("trtllm-slot-span")
    for k in (0, 1, 3, 5):
        events = [("target", j) for j in range(k + 1)] + [("draft", i) for i in range(k)]
        events.append(("accept", 0))
        slots = [contract.slot(kind, index, k) for kind, index in events]  # type: ignore[arg-type]
        assert sorted(slots) == list(range(2 * k + 2))
        assert contract.window_size(k) == (2 * k + 2) * contract.slot_stride == (2 * k + 2) * 32


def test_pr17599_and_pr19601_differ_only_for_unseeded_requests() -> None:
    old, new = get_contract("trtllm-pr17599"), get_contract("trtllm-pr19601")
    seeded = dict(request_seed=7, decoding_iter=3, kind="draft", index=1, max_draft_len=3)
    assert old.expected(**seeded) == new.expected(**seeded)  # type: ignore[arg-type]
    unseeded = dict(request_seed=None, decoding_iter=3, kind="target", index=0, max_draft_len=3)
    assert old.expected(**unseeded).offset == 12  # type: ignore[arg-type]
    # pr17599: iteration 3's window (12) and nothing else; pr19601: any window of the counter
    assert not old.expected(**unseeded).matches_offset(0)  # type: ignore[arg-type]
    assert new.expected(**unseeded).matches_offset(0)  # type: ignore[arg-type]
    assert new.expected(**unseeded).matches_offset(12)  # type: ignore[arg-type]


# vllm-generators (vLLM 0.32.0 V1, see the docstring of
# specseed.engine_adapters.vllm.observe): a seeded request's events read its own generator in
# order, so an event's offset is the draws of the request's earlier events; on the CPU, per
# sampling iteration: the sampler 2 words (randint int64), and with n drafts the uniforms 2n
# words (float64) and the recovered-token noise 2 * vocab words (float32 exponential_).
# Vocabulary 512, K = 3: iteration 0 (prefill) 2 words; each later iteration with 3 drafts
# 2 + 6 + 1024 = 1032 words. Unseeded requests read the global generator: no offset promised.
# (K, iteration n, kind, index, kernel row, request seed, consumed) -> (seed, subseq, offset)
VLLM = [
    (3, 0, "target", 0, 0, 4321, 0, 4321, 0, 0),
    (3, 1, "target", 3, 2, 4321, 2, 4321, 0, 2),
    (3, 1, "accept", 0, 2, 4321, 4, 4321, 0, 4),
    (3, 1, "accept", 1, 2, 4321, 10, 4321, 0, 10),
    (3, 2, "target", 3, 1, 4321, 1034, 4321, 0, 1034),
    (3, 3, "accept", 1, 0, 4321, 1034 + 1032 + 8, 4321, 0, 2074),
    (0, 5, "target", 0, 3, 7, 10, 7, 0, 10),
    (3, 4, "accept", 0, 1, None, 0, None, 0, None),
    (3, 0, "target", 0, 0, U64, 0, U64, 0, 0),
]


@pytest.mark.parametrize("row", VLLM, ids=lambda r: f"K{r[0]}-n{r[1]}-{r[2]}{r[3]}-c{r[6]}")
def test_vllm_generators_offsets_match_the_hand_derived_table(row: tuple) -> None:  # type: ignore[type-arg]
    k, n, kind, index, _kernel_row, request_seed, consumed, seed, subsequence, offset = row
    state = get_contract("vllm-generators").expected(
        request_seed=request_seed,
        decoding_iter=n,
        kind=kind,
        index=index,
        max_draft_len=k,
        consumed=consumed,
    )
    assert (state.seed, state.subsequence, state.offset) == (seed, subsequence, offset)


def test_vllm_generators_without_the_consumed_count_predicts_no_offset() -> None:
    state = get_contract("vllm-generators").expected(
        request_seed=5, decoding_iter=2, kind="target", index=0, max_draft_len=3
    )
    assert (state.seed, state.offset) == (5, None)
