"""Recorded generator positions equal the ones worked out by hand from vLLM 0.32.0's source.

A seeded, sampled request (temperature > 0, no top-k/top-p) consumes its own mt19937
generator (32-bit words, torch 2.13 on the CPU) at these points, and nowhere else:

- every sampling iteration, ``TopKTopPSampler.forward_cpu`` draws
  ``torch.randint(0, 2**31, (1,), generator=gen)``: an int64 draw, 2 words
  (``Sampler.sample``; inside the rejection sampler this is the bonus token);
- an iteration that verifies ``n > 0`` drafts then draws, in ``rejection_sample``,
  ``generate_uniform_probs``: ``uniform_`` over ``n`` float64 values, 2 words each; and
  ``sample_recovered_tokens``: ``q[i].exponential_()`` over the 512-entry vocabulary in
  float32, 2 words each (1024).

So the offsets are cumulative sums of 2, then 2 + 2n + 1024 per verifying iteration; the
first event of the request is at offset 0 (a fresh ``manual_seed``). The word counts per
element are torch's (measured in ``test_words_per_element``), not specseed's.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from specseed.engine_adapters.base import EngineSettings, RequestPlan, RunPlan
from specseed.engine_adapters.vllm.contracts import VLLM_GENERATORS
from specseed.traces.records import TraceRecorder

pytestmark = pytest.mark.vllm

VOCAB = 512
SAMPLE_WORDS = 2
UNIFORM_WORDS_PER_DRAFT = 2
RECOVERED_WORDS = 2 * VOCAB


def hand_worked(drafts_per_iteration: list[int]) -> list[tuple[str, int, int]]:
    """(function, offset, draws) of every event, from the rules in the module docstring."""
    events, offset = [], 0
    for n in drafts_per_iteration:
        plan = [("Sampler.sample", SAMPLE_WORDS)]
        if n:
            plan += [
                ("generate_uniform_probs", UNIFORM_WORDS_PER_DRAFT * n),
                ("sample_recovered_tokens", RECOVERED_WORDS),
            ]
        for function, draws in plan:
            events.append((function, offset, draws))
            offset += draws
    return events


def test_words_per_element() -> None:
    # The torch facts the table rests on: randint int64 2 words, float64 uniform_ 2,
    # float32 exponential_ 2 (mt19937 words, read back from the generator's state index).
    def words(draw) -> int:  # type: ignore[no-untyped-def]
        gen = torch.Generator().manual_seed(3)
        draw(gen)
        return int.from_bytes(bytes(gen.get_state()[16:24].tolist()), "little")

    assert words(lambda g: torch.randint(0, 2**31, (1,), generator=g)) == 2
    assert words(lambda g: torch.empty(3, dtype=torch.float64).uniform_(generator=g)) == 6
    assert words(lambda g: torch.empty(VOCAB).exponential_(generator=g)) == 2 * VOCAB - 624


def _plan(settings: EngineSettings, k: int, name: str) -> RunPlan:
    request = RequestPlan(
        "seeded", (12, 40, 7, 91, 3), seed=4321, temperature=0.8, top_k=0, top_p=1.0,
        max_tokens=12,
    )  # fmt: skip
    return RunPlan("positions", name, dataclasses.replace(settings, max_draft_len=k), (request,))


@pytest.mark.parametrize("k", [0, 3], ids=["no-speculation", "eagle3-k3"])
def test_seeded_request_positions_follow_the_hand_worked_table(engine, settings, k) -> None:  # type: ignore[no-untyped-def]
    trace = engine.run(_plan(settings, k, f"k{k}"), TraceRecorder())
    assert not trace.failed, trace.end.failure
    rows = [row for _step, row in trace.rows_of("seeded")]
    drafts = [len(row.drafts_verified) for row in rows]
    if k == 0:
        assert set(drafts) == {0}
    else:
        assert drafts[0] == 0 and max(drafts) == k
    recorded = [(e.kernel, e.offset, e.draws) for row in rows for e in row.events]
    assert recorded == hand_worked(drafts)
    assert {e.seed for row in rows for e in row.events} == {4321}
    assert {e.subsequence for row in rows for e in row.events} == {0}
    assert len(trace.end.outputs["seeded"]) == 12
    # The contract predicts the same offsets from the draws alone.
    consumed = 0
    for row in rows:
        for event in row.events:
            expected = VLLM_GENERATORS.expected(
                request_seed=4321, decoding_iter=row.decoding_iter, kind=event.kind,
                index=event.index, max_draft_len=k, consumed=consumed,
            )  # fmt: skip
            assert (expected.seed, expected.offset) == (event.seed, event.offset)
            consumed += event.draws
