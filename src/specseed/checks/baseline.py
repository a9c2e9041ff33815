"""The ``losslessness`` check: speculative tokens against a K = 0 baseline, no oracle.

A scenario names it under ``expect`` with two runs: the speculative run first, then the run
that is its baseline (``baseline_of``: served with max_draft_len 0, its distribution copies
seeded after the speculative run's). Per group (a copied request: one prompt and sampling
setup) both arms' emitted tokens are compared by ``specseed.distribution.twosample`` (token
counts per position, the first two tokens jointly, later tokens given frequent prefixes),
Holm-corrected at alpha 1e-3 per scenario. Where the baseline's copies report
log-probabilities (``logprobs: n``), the family also holds a per-token test: the speculative
tokens scored by those reports (``specseed.distribution.pertoken``). It reads nothing but
tokens and what the engine reports, so it judges any engine, a black-box server included,
without the model.

Statuses: ``pass`` with the smallest total variation the samples detect with 80% power;
``fail`` with suspects (what the speculative run's setup and recorded draws support);
``skip`` when a run crashed or was interrupted, the second run is not a K = 0 baseline (or
was not served: the engine's reason says how to configure one), the arms share seeds, or
there are too few copies per arm or no token varies.

Measured on the shared 2-core development machine (load average about 28),
benchmarks/bench_losslessness.py: the statistic 74,500 sequences/s; the library scenario
(150 + 150 copies x 16 tokens, K = 3 against K = 0, reference engine) 11.6 s with every
check; detectable TV (80% power) 0.30 for the first token, 0.31 for the second, extrapolated
to one minute of audit 0.13 (from 150 copies per arm) and 0.11 (from 300); false alarms of
the statistic on simulated clean scenarios 1 of 500 (stated: 1e-3 per scenario).
biased-acceptance fails it in-process (adjusted p 3e-10 with 4 tokens) and behind
``specseed serve``; vLLM 0.32.0 CPU under EAGLE3 fails it (docs/vllm.md).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from specseed.checks.context import CheckContext
from specseed.checks.findings import Finding, Suspect
from specseed.checks.registry import comparison_check
from specseed.checks.token_suspects import TokenDivergence
from specseed.checks.trace_evidence import shared_draws, sharing_suspects
from specseed.distribution.pertoken import NAME as PER_TOKEN
from specseed.traces.records import RequestInfo, RunTrace

if TYPE_CHECKING:
    from specseed.distribution.pertoken import Top
    from specseed.distribution.twosample import TwoSampleResult
    from specseed.scenarios.schema import Expectation

CHECK_ID = "losslessness"
_COPY = re.compile(r"^(?P<base>.+)\.(?P<index>[0-9]+)$")
BASELINE_HINT = (
    "over HTTP, add a server of the same model without speculation to model.yaml's "
    "engine.options: `variants: [{when: {max_draft_len: 0}, base_url: http://HOST:PORT}]`"
)


GroupKey = tuple[str, tuple[int, ...], float, int, float, str]
"""A sampled request's group: the copied request's name, its prompt and sampling setup
(its knobs included)."""


def _group_key(info: RequestInfo) -> GroupKey:
    match = _COPY.match(info.request_id)
    base = match["base"] if match else info.request_id
    # The knobs too: copies that set other knobs are other distributions (one group per knob).
    knobs = repr(sorted((k, v) for k, v in info.knobs().items() if k not in ("logprobs", "n")))
    return (base, tuple(info.prompt_ids), info.temperature, info.top_k, info.top_p, knobs)


def sampled_groups(trace: RunTrace) -> dict[GroupKey, list[str]]:
    """The run's sampled scenario requests by group, in trace order: the arms' groups the
    check compares (and a report plots)."""
    groups: dict[GroupKey, list[str]] = {}
    for info in trace.header.requests:
        if info.phase == "scenario" and info.temperature > 0:
            groups.setdefault(_group_key(info), []).append(info.request_id)
    return groups


def _reported_tops(trace: RunTrace, ids: Sequence[str]) -> tuple[tuple[Top, ...], ...] | None:
    """The top-n log-probabilities the run reported for each request's tokens, where every
    request asked for at least one (``logprobs: n``, n >= 1); None otherwise."""
    if not ids or any((trace.request(i).logprobs or 0) < 1 for i in ids):
        return None
    reported = trace.end.logprobs or {}
    return tuple(tuple(entry.top for entry in reported.get(i, ())) for i in ids)


def _skip(runs: tuple[str, ...], message: str) -> Finding:
    return Finding(status="skip", message=message, runs=runs)


def _streams_differ_by_design(_: TokenDivergence) -> list[Suspect]:
    """The arms use different seeds, so per-request streams differ by design: a divergence
    of one request is no evidence here (the distributions are compared instead)."""
    return []


@comparison_check(
    CHECK_ID,
    short="lossless",
    title="Speculation is lossless (two-sample)",
    description="Sampled tokens have the same distribution with speculation as without "
    "(a K = 0 baseline run, other seeds): chi-square two-sample tests of token counts per "
    "position, of the first two tokens jointly and of later tokens given frequent "
    "prefixes, Holm-corrected at alpha 1e-3 per scenario. Needs no model.",
    targets=("biased-acceptance", "accept-reuses-draft-draw", "draft-temperature-skipped"),
    token_suspects=_streams_differ_by_design,
)
def losslessness(ctx: CheckContext, expectation: Expectation) -> Iterator[Finding]:
    runs = tuple(expectation.runs)
    traces = [ctx.traces[r] for r in runs if r in ctx.traces]
    if len(traces) != 2 or len(runs) != 2:
        yield _skip(runs, "losslessness compares exactly two runs: speculative, then baseline")
        return
    spec, base = traces
    unfinished = [t.name for t in traces if t.failed]
    if unfinished:
        yield _skip(
            runs,
            f"run {', '.join(unfinished)} did not complete (see runs-complete); nothing to compare",
        )
        return
    if base.header.engine_config.max_draft_len != 0:
        yield _skip(
            runs,
            f"run {base.name} is not a K = 0 baseline (max_draft_len "
            f"{base.header.engine_config.max_draft_len}); set `baseline_of: {spec.name}`",
        )
        return
    if spec.header.engine_config.max_draft_len == 0:
        yield _skip(runs, f"run {spec.name} does not speculate (max_draft_len 0)")
        return
    from specseed.distribution.twosample import TwoSampleGroup, analyse

    left, right = sampled_groups(spec), sampled_groups(base)
    groups: list[TwoSampleGroup] = []
    for key, ids in left.items():
        other = right.get(key)
        if not other:
            continue
        seeds = {spec.request(i).seed for i in ids} - {None}
        shared = seeds & {base.request(i).seed for i in other}
        if shared:
            yield _skip(
                runs,
                f"{key[0]}: {len(shared)} seeds are used in both runs, so the arms are not "
                f"independent; give {base.name} `baseline_of: {spec.name}`",
            )
            return
        label = f"{key[0]} (T={key[2]:g}" + (f", top_k={key[3]}" if key[3] else "")
        label += (f", top_p={key[4]:g}" if key[4] < 1.0 else "") + ")"
        groups.append(
            TwoSampleGroup(
                label,
                tuple(tuple(spec.end.outputs.get(i, ())) for i in ids),
                tuple(tuple(base.end.outputs.get(i, ())) for i in other),
                _reported_tops(base, other),
            )
        )
    if not groups:
        yield _skip(runs, f"no sampled request served in both {spec.name} and {base.name}")
        return
    result = analyse(groups)
    if not result.tests:
        yield _skip(
            runs,
            "nothing to compare: " + "; ".join(result.skipped),
        )
        return
    details = _details(result, spec.name, base.name)
    smallest = min(result.tests, key=lambda t: t.adjusted_p)
    if not result.rejected:
        first = [t for t in result.tests if t.name == "position 1"] or list(result.tests)
        scored = [t for t in result.tests if t.name == PER_TOKEN]
        per_token = (
            f", per token {min(t.detectable_tv for t in scored):.3f} over "
            f"{sum(t.speculative for t in scored)} scored tokens"
            if scored
            else ""
        )
        yield Finding(
            status="pass",
            message=f"{len(result.groups)} sampled request"
            f"{'' if len(result.groups) == 1 else 's'} x "
            f"{first[0].speculative} + {first[0].baseline} copies: speculative tokens follow "
            f"the K = 0 distribution (smallest adjusted p {smallest.adjusted_p:.3g}; "
            f"detectable TV {min(t.detectable_tv for t in first):.3f}{per_token})",
            runs=runs,
            details=details,
        )
        return
    failing = sorted({t.group for t in result.rejected})
    yield Finding(
        status="fail",
        message=f"speculative tokens differ from the K = 0 baseline: "
        f"{len(result.rejected)} of {len(result.tests)} sub-tests reject at alpha "
        f"{result.alpha:g} (smallest adjusted p {smallest.adjusted_p:.2g})",
        runs=runs,
        requests=tuple(label.split(" (")[0] for label in failing),
        suspects=tuple(_suspects(spec, result, failing)),
        details=details,
    )


def _details(result: TwoSampleResult, spec: str, base: str) -> tuple[str, ...]:
    lines = [
        f"H0: {spec}'s tokens have the distribution of {base}'s (K = 0); alpha "
        f"{result.alpha:g} family-wise over {len(result.tests)} sub-tests (Holm)",
    ]
    for group in result.groups:
        tv = [
            f"{t.name} {t.detectable_tv:.3f}"
            for t in result.tests
            if t.group == group.label and t.name in ("position 0", "position 1")
        ]
        lines.append(
            f"{group.label}: {len(group.speculative)} speculative, {len(group.baseline)} "
            f"baseline; TV detectable with 80% power: {', '.join(tv)}"
        )
        lines.extend(
            f"{group.label}: {t.speculative} speculative and {t.baseline} baseline tokens "
            f"scored by the K = 0 run's log-probabilities (randomized PIT); a per-token shift "
            f"toward or away from the likelier tokens of TV {t.detectable_tv:.3f} is "
            "detected with 80% power"
            for t in result.tests
            if t.group == group.label and t.name == PER_TOKEN
        )
    lines.extend(f"not tested: {s}" for s in result.skipped)
    for test in sorted(result.rejected, key=lambda t: t.adjusted_p)[:8]:
        if test.name == PER_TOKEN:
            lines.append(
                f"rejected {test.group} {test.name}: Kolmogorov-Smirnov D "
                f"{test.statistic:.3f}, adjusted p {test.adjusted_p:.2g}; {test.worst_cell}"
            )
            continue
        lines.append(
            f"rejected {test.group} {test.name}: chi2 {test.statistic:.1f} on {test.df} df, "
            f"adjusted p {test.adjusted_p:.2g}; most different cell {test.worst_cell}"
        )
    return tuple(lines)


def _suspects(trace: RunTrace, result: TwoSampleResult, failing: Sequence[str]) -> list[Suspect]:
    """Defect classes the evidence supports: the speculative run's verification, the
    temperatures that fail and pass, and draws the trace shows shared."""
    suspects: list[Suspect] = []
    rejected = result.rejected
    marginal = [t for t in rejected if t.name.startswith("position ") and " after " not in t.name]
    suspects.extend(sharing_suspects(*shared_draws(trace)))
    collapsed = [
        g
        for g in result.groups
        if g.label in failing
        and len(g.speculative) >= 2
        and len(set(g.speculative)) == 1
        and len(set(g.baseline)) > 1
    ]
    if collapsed and len(collapsed) == len(failing):
        # Every copy one stream, while the baseline's copies differ: not a biased accept
        # test (which still samples) but no sampling at all on the speculative path.
        group = collapsed[0]
        return [
            *suspects,
            Suspect(
                "unset-temperature-greedy",
                f"all {len(group.speculative)} speculative copies of {group.label} emitted one "
                f"stream, against {len(set(group.baseline))} distinct among "
                f"{len(group.baseline)} without speculation: not sampled on the speculative "
                "path (as at a greedy temperature)",
            ),
        ]
    if trace.header.engine_config.verification != "rejection":
        return suspects
    temperatures = {g.label: _temperature(g.label) for g in result.groups}
    failed_t = {temperatures[g] for g in failing}
    passed_t = {temperatures[g.label] for g in result.groups if g.label not in failing}
    tempered = sorted(t for t in failed_t if t is not None and t != 1.0)
    if tempered and 1.0 not in failed_t:
        suspects.append(
            Suspect(
                "draft-temperature-skipped",
                "tokens deviate from the baseline at temperature "
                + ", ".join(f"{t:g}" for t in tempered)
                + " only"
                + (", while temperature 1 holds" if 1.0 in passed_t else "")
                + ": a draft distribution taken at another temperature biases the accept ratio",
            )
        )
    if 1.0 in failed_t or 1.0 not in passed_t:
        suspects.append(
            Suspect(
                "biased-acceptance",
                "tokens emitted through rejection sampling deviate from the K = 0 baseline"
                + (" in their marginals" if marginal else " jointly")
                + ": a wrong accept test or residual",
            )
        )
    return suspects


def _temperature(label: str) -> float | None:
    try:
        return float(label[label.find("(T=") + 3 :].split(",")[0].rstrip(")"))
    except ValueError:
        return None
