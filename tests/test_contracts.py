"""Contracts pinned to offsets worked out by hand, not by the code that computes them.

Each row below was derived on paper from the layout's description, so a wrong window, slot
or seed rule in contracts.py fails here instead of agreeing with itself.

trtllm-pr17599 (TensorRT-LLM PR "Honor SamplingParams.seed on the one-model speculative
path", #17599, as described in shared/ENGINES.md and DESIGN.md section 1): seed =
SamplingParams.seed, or DEFAULT_SAMPLING_SEED = 42 when unset (uint64 bits kept); a window of
K + 1 offsets per decoding iteration, base = n * (K + 1); the target sampler and the rejection
kernel read base + 0 (all K + 1 target rows of a request share it, one entry per logits row
copied from the request's entry); draft step i reads base + 1 + i; subsequence = the row in
the kernel call (flashinfer's blockIdx.x).

ideal (specseed's own layout): the request's seed (unseeded: one of its own, so no fixed
value), subsequence 0, and per iteration a window of 2K + 2 slots of 1024 draws: target row j
in slot j, the accept kernel in slot K + 1, draft step i in slot K + 2 + i.
"""

from __future__ import annotations

import pytest

from specseed.contracts import get_contract

U64 = (1 << 64) - 1

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
