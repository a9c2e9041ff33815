"""The ``distribution`` check: speculative sampling leaves the target distribution unchanged.

Runs of a scenario with a ``distribution`` section serve many seeded copies of its requests;
this check tests every sampled request's emitted tokens, position by position and
conditionally on the tokens before them, against the exact conditional probabilities of the
target the engine served (``specseed.distribution``: the oracle loads the same checkpoint;
``analysis`` holds the statistics, the significance level and the precision envelope).

Evidence it needs: each sampled request's prompt token ids, sampling setup (temperature,
top_k, top_p) and emitted tokens, and a target checkpoint specseed can load (the trace
header's engine configuration), or the per-token evidence a bundle stored for the run
(``CheckContext.distribution_evidence``: re-judged without the oracle or torch, after
``distribution.evidence.mismatch`` found it describes this trace; otherwise ``skip`` naming
the difference). Evidence the check computed goes back into the context for the bundle. It reads RNG events only to name suspects. The logits dtype
comes from the trace environment (``logits_dtype``); an engine that does not state it is
tested against the bfloat16 envelope, and the finding says so.

Scenarios without a ``distribution`` section produce no finding (nothing to test).

Statuses: ``pass``; ``fail`` with suspects (the planted-bias classes whose preconditions the
trace shows, less those the passing groups rule out), whatever the contract states: a
contract's limitation may excuse overlapping draws, never a biased output. ``skip`` when the
run crashed, has no sampled requests, too few copies, no checkpoint specseed can load, or
stored evidence that does not match the trace.

Measured on the shared 2-core development machine (load average 6-12). The built-in
``distribution`` scenario was 2 x 150 copies x 16 tokens with K = 3 through 128 slots; it is
now K = 1 in one batch of 300 (the step-aware sub-tests, ``distribution/steps.py``, see the
trtllm-pr17599 coupling there and not at K = 3):

- K = 3 figures (not re-measured at K = 1): engine 480 sampled tokens/s, this check about
  1000 tokens/s (4.8 s), the whole scenario 18.6 s (benchmarks/bench_distribution.py);
  false alarms of the correct engine 0 of 30 runs (request seeds moved, model_seed 0-3);
  biased-acceptance, accept-reuses-draft-draw and draft-temperature-skipped each found in
  10 of 10 runs (adjusted p at most 7e-6);
- the two phases (K = 3 scenario, load average 18-30, same process, oracle warm): the check's
  time outside the oracle's forwards went from 2.5-3.2 s (before the split) to 1.1-1.2 s;
  the stored evidence is 79 KiB per 1000 tokens (378 KiB for the 4800 tokens), read and
  validated in 0.04-0.07 s and judged alone (``specseed check``, no torch) in 0.2-0.65 s;
  with the Mersenne Twister PIT noise, 0 false alarms in 150 calibration repeats, sub-test
  p-values below 0.01 / 0.05 in 0.99% / 4.92% of 4855;
- the scenario alone (``specseed audit``, ideal), alternated with its K = 3 form at load
  28-33: 79 s and 117 s against 99 s and 125 s;
- K = 1, one run each: biased-acceptance adjusted p 6.5e-186, accept-reuses-draft-draw
  9.1e-8, draft-temperature-skipped 5.3e-11; the correct engine's smallest adjusted p 0.99;
- the statistics on exact samples: 0 of 500 runs, single sub-test p-values below 0.01 / 0.05
  in 1.06% / 5.04% of 16166; on clean simulated step structures (lossless, traces laid out
  in one-draw slots so every shared class is tested, K = 1 and 3): 0 of 500 runs with the
  step-aware sub-tests in the family (smallest adjusted p 0.003), those sub-tests' p-values
  below 0.01 / 0.05 in 0.63% / 4.60% of 3500; the same with draws shared: 27 of 50 rejected
  (benchmarks/calibrate_distribution_tests.py);
- trtllm-pr17599 (the bonus draw is the next draft step's draw on the same kernel row, the
  residual draw the next accept test's): the built-in scenario fails, ``steps[1/1 accepted,
  +1 shared]`` adjusted p 9.1e-12 (T = 1) and 1.6e-53 (T = 1.4), plus ``pairs-odd-id`` 4.3e-6;
  one request's copies in one batch, K = 1: 150 / 300 / 512 copies adjusted p 8.6e-8 /
  1.9e-17 / 1.3e-44, ``ideal`` passes; K = 1 through 128 slots 1.1e-4; K = 3 in one batch
  not visible up to 512 copies (smallest 0.011: the coupled pairs need two or three drafts
  accepted) (benchmarks/measure_pr17599_visibility.py).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from specseed.checks.context import CheckContext
from specseed.checks.findings import Finding, Status, Suspect
from specseed.checks.registry import run_check
from specseed.checks.trace_evidence import shared_draws, sharing_suspects
from specseed.traces.records import RequestInfo, RunTrace

if TYPE_CHECKING:
    from specseed.distribution.analysis import GroupResult

CHECK_ID = "distribution"
ASSUMED_DTYPE = "bfloat16"
"""Logits dtype assumed for an engine whose trace does not state one (the widest envelope
of the dtypes engines serve in; a wider envelope costs power, never false alarms)."""


def _finding(
    ctx: CheckContext, trace: RunTrace, status: Status, message: str, **kw: Any
) -> Finding:
    return Finding(
        status=status,
        message=f"{trace.name}: {message}",
        runs=(trace.name,),
        **kw,
    )


@run_check(
    CHECK_ID,
    short="dist",
    title="Target distribution preserved",
    description="Sampled tokens follow the target model's exact conditional distribution "
    "(temperature, top-k/top-p applied), position by position and given the tokens before "
    "them: chi-square tests of a randomized probability integral transform and of token "
    "counts, Holm-corrected at alpha 1e-3 per run.",
    targets=("biased-acceptance", "accept-reuses-draft-draw", "draft-temperature-skipped"),
    needs=("tokens",),
)
def distribution(ctx: CheckContext, trace: RunTrace) -> Iterator[Finding]:
    if ctx.scenario.distribution is None:
        return
    if trace.failed:
        yield _finding(ctx, trace, "skip", "the run did not complete; nothing to test")
        return
    # Imported here: listing and validating checks load nothing of the distribution layer,
    # and re-judging stored evidence (``specseed check``) never imports torch.
    from specseed.distribution.analysis import judge
    from specseed.distribution.evidence import Sample, SamplingSetup, mismatch

    samples = [
        Sample(
            info.request_id,
            tuple(info.prompt_ids),
            SamplingSetup(info.temperature, info.top_k, info.top_p),
            tuple(trace.end.outputs.get(info.request_id, ())),
            tuple(row for _, row in trace.rows_of(info.request_id)),
        )
        for info in trace.header.requests
        if info.phase == "scenario" and info.temperature > 0 and not _processed(info)
    ]
    if not samples:
        yield _finding(ctx, trace, "skip", "no sampled requests (greedy only)")
        return
    stated = trace.header.environment.get("logits_dtype")
    dtype = stated or ASSUMED_DTYPE
    evidence = ctx.distribution_evidence.get(trace.name)
    if evidence is not None:
        # Stored with the bundle: re-judged as recorded, never on evidence of other tokens.
        problem = mismatch(evidence, samples, dtype)
        if problem is not None:
            yield _finding(
                ctx,
                trace,
                "skip",
                f"the recorded distribution evidence does not match the trace: {problem}",
            )
            return
    else:
        # torch and the model only here, when no evidence was stored.
        try:
            from specseed.distribution.collect import collect
            from specseed.distribution.oracle import OracleUnavailable, oracle_for
        except ImportError as exc:
            yield _finding(
                ctx,
                trace,
                "skip",
                f"no stored evidence and no oracle here ({exc}): the distribution is judged "
                "where torch is installed",
            )
            return
        named = trace.header.engine_config.checkpoint
        if named is not None and not ctx.load_checkpoints:
            yield _finding(
                ctx,
                trace,
                "skip",
                f"no stored evidence, and the trace names the checkpoint {named}: not loaded "
                "because a bundle names it (pass --engine-from-bundle to load it)",
            )
            return
        try:
            oracle = oracle_for(trace.header.engine_config)
            evidence = collect(samples, oracle, logits_dtype=dtype)
        except OracleUnavailable as exc:
            yield _finding(ctx, trace, "skip", f"no exact target probabilities: {exc}")
            return
        ctx.distribution_evidence[trace.name] = evidence
    result = judge(
        evidence,
        seed_label=f"{ctx.scenario.name}/{trace.name}",
        steps={s.request_id: s.steps for s in samples if s.steps} or None,
    )
    if not result.groups:
        yield _finding(
            ctx, trace, "skip", f"too few copies per request to test ({len(samples)} sampled)"
        )
        return
    details = [
        f"H0: every token follows the target's conditional distribution; alpha "
        f"{result.alpha:g} family-wise over {len(result.tests)} sub-tests (Holm)",
        f"precision: {dtype} logits"
        + ("" if stated else " (assumed: the engine does not state its logits dtype)")
        + ", envelope (TV per token) "
        + ", ".join(f"{g.envelope:.1e}" for g in result.groups),
    ]
    for group in result.groups:
        power = ", ".join(
            f"{t.name} TV >= {t.detectable_tv:.3f}"
            for t in group.tests
            if t.detectable_tv is not None
        )
        details.append(
            f"{group.label}: {group.samples} requests x {group.positions} tokens; detectable "
            f"with 80% power: {power}"
        )
    rejected = result.rejected
    smallest = min(result.tests, key=lambda t: t.adjusted_p)
    if not rejected:
        yield _finding(
            ctx,
            trace,
            "pass",
            f"{result.total_tokens} tokens of {len(samples)} requests follow the target "
            f"distribution (smallest adjusted p {smallest.adjusted_p:.3g})",
            details=tuple(details),
        )
        return
    for group, test in rejected[:8]:
        details.append(
            f"rejected {group.label} {test.name}: chi2 {test.statistic:.1f} on {test.df} df, "
            f"adjusted p {test.adjusted_p:.2g}; {test.note}"
        )
    failing = {g.label for g, _ in rejected}
    affected = tuple(sorted({label.split(" (")[0] for label in failing}))
    # A contract may state that its draws overlap (draw-ranges-disjoint reports that as its
    # limitation); it never makes a biased output distribution pass: what users receive is
    # the distribution, whatever the layout promised.
    yield _finding(
        ctx,
        trace,
        "fail",
        f"emitted tokens do not follow the target distribution: {len(rejected)} of "
        f"{len(result.tests)} sub-tests reject at alpha {result.alpha:g} "
        f"(smallest adjusted p {smallest.adjusted_p:.2g})",
        requests=affected,
        suspects=tuple(
            _suspects(
                trace,
                [g for g in result.groups if g.label in failing],
                [g for g in result.groups if g.label not in failing],
                coupling_only=all(_couples(t.name) for _, t in rejected),
            )
        ),
        details=tuple(details),
    )


def _couples(name: str) -> bool:
    """A sub-test of how tokens depend on each other, not of any token's marginal."""
    return name.startswith(("pairs", "steps[")) or (name.startswith("tokens[") and "|" in name)


def _suspects(
    trace: RunTrace,
    groups: Sequence[GroupResult],
    passed: Sequence[GroupResult] = (),
    *,
    coupling_only: bool = False,
) -> list[Suspect]:
    """Defect classes that fit a biased output and that the other groups do not rule out,
    most specific evidence first.

    A draft distribution taken at temperature 1 is exact at temperature 1: a bias at T = 1
    rules draft-temperature-skipped out, and a bias only where T != 1 while a T = 1 request
    passed rules out an accept test or residual wrong at every temperature. When only coupling
    sub-tests reject (every marginal intact) and the trace shows shared draws, the shared
    draws are the suspect, not the accept test."""
    reuse, overlap = shared_draws(trace)
    suspects = sharing_suspects(reuse, overlap)
    accepts = any(
        event.kind == "accept" for step in trace.steps for row in step.rows for event in row.events
    )
    if accepts and not (coupling_only and overlap and not reuse):
        failed_t = {t for g in groups for t in _temperatures(g.label)}
        passed_t = {t for g in passed for t in _temperatures(g.label)}
        tempered = sorted(failed_t - {1.0})
        if tempered and 1.0 not in failed_t:
            suspects.append(
                Suspect(
                    "draft-temperature-skipped",
                    f"rejection sampling deviates at temperature "
                    f"{', '.join(f'{t:g}' for t in tempered)} only"
                    + (
                        ", while the temperature-1 request follows the target"
                        if 1.0 in passed_t
                        else ""
                    )
                    + ": a draft distribution taken at another temperature than the drafts "
                    "were drawn at biases the accept ratio",
                )
            )
        if 1.0 in failed_t or 1.0 not in passed_t:
            suspects.append(
                Suspect(
                    "biased-acceptance",
                    "tokens emitted through rejection sampling deviate from the target"
                    + (" at temperature 1" if 1.0 in failed_t else "")
                    + ": a wrong accept test or residual",
                )
            )
    return suspects


PROCESSORS = ("min_p", "logit_bias", "presence_penalty", "frequency_penalty", "repetition_penalty")
"""Knobs that change the distribution a token is drawn from: the oracle knows temperature,
top-k and top-p only, so requests that set one are left out (losslessness compares them)."""


def _processed(info: RequestInfo) -> bool:
    return any(getattr(info, knob) is not None for knob in PROCESSORS)


def _temperatures(label: str) -> list[float]:
    inside = label[label.find("(T=") + 3 :].split(",")[0].rstrip(")")
    try:
        return [float(inside)]
    except ValueError:
        return []
