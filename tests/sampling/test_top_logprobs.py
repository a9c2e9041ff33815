"""The log-probabilities an engine reports (``sampling/processors.top_logprobs``), against
the definition row by row: the token's own, then the ``count`` most probable tokens, ties by
id, tokens of probability 0 left out."""

from __future__ import annotations

import math

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from specseed.sampling.processors import top_logprobs

_ROW = st.lists(
    st.sampled_from([0.0, 0.0, 1e-42, 3e-42, 1.0, 2.0, 2.0, 3.5]), min_size=1, max_size=9
)
"""Weights with ties, and some so small that their probability is a float32 subnormal."""


@settings(max_examples=200, deadline=None)
@given(st.lists(_ROW, min_size=1, max_size=4), st.integers(0, 10), st.data())
def test_each_row_reports_its_token_and_its_most_probable_tokens(
    rows: list[list[float]], count: int, data: st.DataObject
) -> None:
    width = max(len(r) for r in rows)
    weights = [r + [0.0] * (width - len(r)) for r in rows]
    weights = [w if sum(w) > 0 else [1.0, *w[1:]] for w in weights]
    probs = torch.tensor([[x / sum(w) for x in w] for w in weights], dtype=torch.float32)
    tokens = [data.draw(st.integers(0, width - 1)) for _ in weights]
    reported = top_logprobs(probs, tokens, count)
    assert len(reported) == len(weights)
    for row, token, (chosen, top) in zip(probs.tolist(), tokens, reported, strict=True):
        p = torch.tensor(row, dtype=torch.float32).double()
        assert chosen == (math.log(p[token].item()) if p[token] > 0 else -math.inf)
        ranked = sorted((t for t in range(width) if p[t] > 0), key=lambda t: (-p[t].item(), t))
        assert [t for t, _ in top] == ranked[:count]
        assert all(v == math.log(p[t].item()) for t, v in top)


def test_a_row_with_nan_is_ranked_as_a_stable_sort_ranks_it() -> None:
    # A NaN probability (no engine should give one) is put last, as the sort puts it, not
    # first, as a top-k would.
    probs = torch.tensor([[0.25, float("nan"), 0.5, 0.25]], dtype=torch.float32)
    [(_, top)] = top_logprobs(probs, [0], 3)
    assert [t for t, _ in top] == [2, 0, 3]
