"""Attribution (issue 19): root causes are the fewest hypotheses that explain every failing
finding; consequences hang under their cause; crashes and unexplained failures get no
catalogue name.

The findings here are inputs written by hand (attribution is a pure function of findings);
the detection matrix test holds the same rules on real audits of the reference engine.
"""

from __future__ import annotations

from dataclasses import replace

from specseed.checks.attribution import root_causes
from specseed.checks.findings import Finding, StreamSide, Suspect, TokenDiff


def _f(check: str, runs: tuple[str, ...], *defects: str, status: str = "fail", **kw) -> Finding:
    return Finding(
        status=status,  # type: ignore[arg-type]
        message=f"{check} on {','.join(runs)}",
        runs=runs,
        requests=("a",),
        suspects=tuple(Suspect(d, f"fits {d}") for d in defects),
        check=check,
        scenario="s",
        **kw,
    )


def test_the_one_defect_that_explains_every_finding_is_the_only_cause() -> None:
    findings = [
        _f("rng-contract", ("r1",), "engine-counter", "row0-seed"),
        _f("rng-contract", ("r2",), "neighbor-unseeded", "engine-counter"),
        _f("uptime-invariance", ("r1", "r2"), "engine-counter"),
        _f("rng-contract", ("r3",), status="pass"),
    ]
    causes = root_causes(findings)
    assert [c.label for c in causes] == ["engine-counter"]
    assert len(causes[0].findings) == 3


def test_evidence_that_cannot_separate_two_defects_says_one_of_and_what_would() -> None:
    causes = root_causes(
        [_f("distribution", ("r",), "biased-acceptance", "draft-temperature-skipped")]
    )
    assert len(causes) == 1
    cause = causes[0]
    assert cause.label == "one of biased-acceptance or draft-temperature-skipped"
    assert cause.kind == "ambiguous"
    # No check targets exactly one of them here, so none is invented; the JSON says so too.
    assert cause.to_json()["alternatives"] == ["draft-temperature-skipped"]


def test_a_biased_distribution_on_streams_that_share_numbers_is_their_consequence() -> None:
    sharing = _f("distinct-seeds", ("rejection",), "row0-seed")
    biased = _f("distribution", ("rejection",), "draft-temperature-skipped", "biased-acceptance")
    causes = root_causes([sharing, biased])
    assert [c.label for c in causes] == ["row0-seed"]
    assert causes[0].consequences == (biased,)
    assert causes[0].lead is sharing


def test_a_crash_is_one_cause_named_by_its_site_and_what_it_stopped_hangs_under_it() -> None:
    traceback = (
        "Traceback (most recent call last):\n"
        '  File "/x/src/specseed/engine_adapters/base.py", line 10, in run\n'
        '  File "/v/lib/python3.12/site-packages/vllm/v1/sample/sampler.py", line 99, in sample\n'
        '  File "/v/lib/python3.12/site-packages/torch/nn/functional.py", line 5, in f\n'
        "RuntimeError: boom\n"
    )
    crash = _f("runs-complete", ("topk",), details=("RuntimeError: boom", traceback))
    stopped = _f("batch-invariance", ("topk", "plain"), status="error")
    causes = root_causes([crash, stopped])
    assert len(causes) == 1
    assert causes[0].kind == "crash"
    assert causes[0].label == "crash: RuntimeError in sample (vllm/v1/sample/sampler.py:99)"
    assert causes[0].consequences == (stopped,)


def test_a_failure_no_catalogued_defect_fits_is_named_by_its_evidence() -> None:
    side = StreamSide("x", (1, 2), 3, 0, 1, "f", ())
    diff = TokenDiff("a", 1, 0, side, side, "sampler")
    causes = root_causes([_f("position-invariance", ("x", "y"), diffs=(diff,))])
    assert len(causes) == 1
    assert causes[0].defect is None
    assert (
        causes[0].label
        == "position-invariance: sampler: same RNG state and logits, different token"
    )


def test_no_failing_finding_no_cause() -> None:
    assert root_causes([_f("rng-contract", ("r",), status="pass")]) == []


def _run_ended(run: str, details: tuple[str, ...], *defects: str) -> Finding:
    return _f("runs-complete", (run,), *defects, details=details)


def test_a_crash_in_specseeds_own_code_says_so_and_asks_for_a_report() -> None:
    traceback = (
        "Traceback (most recent call last):\n"
        '  File "/x/src/specseed/engine_adapters/base.py", line 10, in run\n'
        '  File "/x/src/specseed/engine_adapters/vllm/observe.py", line 42, in wrapped\n'
        "KeyError: 'generator'\n"
    )
    [cause] = root_causes([_run_ended("r", ("KeyError: 'generator'", traceback))])
    assert cause.kind == "specseed-bug"
    assert cause.label == (
        "specseed bug: KeyError in wrapped (specseed/engine_adapters/vllm/observe.py:42) "
        "(please report it with the bundle)"
    )


def test_the_reference_engines_own_modules_are_the_engine_not_specseed() -> None:
    traceback = (
        '  File "/x/src/specseed/engine_adapters/reference/rng_assignment.py", line 7, in fill\n'
    )
    [cause] = root_causes([_run_ended("r", ("IndexError: x", traceback))])
    assert cause.kind == "crash" and "specseed bug" not in cause.label


def _not_served(run: str, how: str, error: str, *defects: str) -> Finding:
    """A runs-complete finding as the check words a run the server did not serve."""
    message = f"{run} was not served: the server {how} at the warmup phase (batch of 12): {error}"
    return replace(_f("runs-complete", (run,), *defects, details=(error,)), message=message)


def test_a_server_that_failed_one_run_and_served_the_rest_keeps_that_runs_evidence() -> None:
    # A burst above max_num_requests answered with HTTP 500 while the runs after it were
    # served: the run's own evidence (buffers too small) stands; no "server stopped".
    error = "ServerUnavailable: POST /v1/completions: HTTP 500: boom (2 attempts)"
    burst = _not_served("warm", "answered with an error", error, "warmup-overflow")
    later = _f("runs-complete", ("after",), status="pass")
    causes = root_causes([burst, later])
    assert [c.label for c in causes] == ["warmup-overflow"]
    # The same burst with nothing answering afterwards is the server's, not the buffers'.
    error = "ServerUnavailable: POST /v1/completions: ConnectError: refused (2 attempts)"
    silent = _not_served("warm", "did not answer", error, "warmup-overflow")
    [gone] = root_causes([silent])
    assert gone.kind == "server" and gone.defects == () and gone.lead.suspects == ()
    assert gone.label == (
        "the server stopped answering at run s/warm, the warmup phase (batch of 12); "
        "no run came after it"
    )
