"""The step-aware sub-tests (``distribution/steps.py``) on simulated step structures.

A pure-Python speculative sampler (``distribution/simulation.py``) serves a known Markov
target and records its steps as an engine does; with fresh draws per event it is lossless (so
every p-value must be uniform, whatever overlaps the trace shows), with draws shared the way
one-draw slots share them it is not (the step-aware test must reject). The engine's own
coupling is tested in tests/checks/test_distribution_check.py.
"""

from __future__ import annotations

import random

from specseed.distribution import stats
from specseed.distribution.simulation import markov_tables, simulate_group, speculative_request
from specseed.distribution.steps import conditional_uniformity, step_pairs, step_tests

LENGTH = 16


def _run(seed: int, *, k: int, share: bool, requests: int = 150, layout: str = "one-draw-slots"):  # type: ignore[no-untyped-def]
    rng = random.Random(seed)
    target, draft = markov_tables(16, rng)
    _, pits, rows = simulate_group(
        target,
        draft,
        requests=requests,
        length=LENGTH,
        k=k,
        rng=rng,
        layout=layout,
        share=share,  # type: ignore[arg-type]
    )
    return step_tests(pits, rows, [[0.0] * LENGTH] * requests)


def test_pairs_come_from_the_recorded_draws_not_the_layout_name() -> None:
    rng = random.Random(1)
    target, draft = markov_tables(16, rng)
    _, one_draw = speculative_request(
        target,
        draft,
        request_id="a",
        start=3,
        length=LENGTH,
        k=1,
        rng=rng,
        layout="one-draw-slots",
    )
    _, disjoint = speculative_request(
        target, draft, request_id="b", start=3, length=LENGTH, k=1, rng=rng, layout="disjoint"
    )
    shared = step_pairs(one_draw)
    # K = 1, one-draw slots: the bonus draw is draft 0's draw, the residual draw the next
    # accept test's; both land on the next token. Disjoint slots share nothing.
    decode = [p for p in shared if not p.label.startswith("plain") and p.second < LENGTH]
    assert decode and all(p.label.endswith("+1 shared") and p.second == p.first + 1 for p in decode)
    assert not any("shared" in p.label for p in step_pairs(disjoint))
    assert {p.label for p in step_pairs(disjoint)} <= {"0/1 accepted, +1", "1/1 accepted, +1"}
    # The last step has no later step: its pair points past the end (step_tests drops it).
    assert max(p.second for p in shared) == LENGTH


def test_clean_structures_give_uniform_p_values() -> None:
    # Fresh draws for every event, while the trace shows the one-draw layout's overlaps: the
    # shared classes are selected and must still be uniform under H0. K = 1 and K = 3.
    p_values = []
    family_alarms = 0
    for seed in range(60):
        tests = _run(seed, k=1 + 2 * (seed % 2), share=False, requests=100)
        assert tests and all("shared" in t.name for t in tests)
        p_values.extend(t.p_value for t in tests)
        _, adjusted = stats.holm([t.p_value for t in tests], 1e-3)
        family_alarms += min(adjusted) <= 1e-3
    assert family_alarms == 0
    n = len(p_values)
    # Uniform p-values: 5% below 0.05 and 1% below 0.01, within sampling error (about 4
    # standard deviations at n ~ 400; chi-square p-values of discrete counts run a little
    # conservative, never liberal).
    below_05 = sum(p < 0.05 for p in p_values) / n
    below_01 = sum(p < 0.01 for p in p_values) / n
    assert 0.01 < below_05 < 0.05 + 4 * (0.05 * 0.95 / n) ** 0.5, below_05
    assert below_01 < 0.01 + 4 * (0.01 * 0.99 / n) ** 0.5, below_01
    assert 0.35 < sum(p < 0.5 for p in p_values) / n < 0.65


def test_shared_bonus_and_draft_draw_is_rejected() -> None:
    tests = {t.name: t for t in _run(7, k=1, share=True)}
    coupled = tests["steps[1/1 accepted, +1 shared]"]
    assert coupled.p_value < 1e-8, coupled
    assert "expected" in coupled.note


def test_disjoint_slots_are_only_tested_structurally_and_pass() -> None:
    tests = _run(3, k=3, share=True, layout="disjoint")
    assert {t.name for t in tests} <= {f"steps[{a}/3 accepted, +1]" for a in range(4)}
    assert min(t.p_value for t in tests) > 1e-4


def test_conditional_uniformity_ignores_the_covariate_marginal() -> None:
    # A covariate far from uniform (residual tokens are) with independent uniform values is
    # no deviation; the same values made to follow the covariate are.
    rng = random.Random(4)
    xs = [rng.random() ** 4 for _ in range(2000)]
    ys = [rng.random() for _ in xs]
    clean = conditional_uniformity("c", xs, ys, 0.0)
    assert clean is not None and clean.p_value > 1e-3
    follows = [min(0.999, x + 0.1 * rng.random()) for x in xs]
    coupled = conditional_uniformity("c", xs, follows, 0.0)
    assert coupled is not None and coupled.p_value < 1e-12
    assert conditional_uniformity("c", xs[:15], ys[:15], 0.0) is None
