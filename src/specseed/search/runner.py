"""One share of a search on one engine: Hypothesis draws cases, the engine serves them, the
checks judge them, candidates are confirmed, and a confirmed failure is shrunk.

A ``SearchSlice`` is picklable: ``specseed search --jobs N`` hands slices to worker
processes (``run.parallel.run_engine_tasks``), each serving them on its own engine; with one
process the workflow calls :func:`search_slice` itself, with ``on_event`` for its progress.

Within a slice, Hypothesis runs again and again (``hypothesis.find``, a fresh random stream
each time, :data:`EXAMPLES_PER_RUN` cases at most) until the slice's time is up, the search
is told to stop, or a failure is confirmed. Every run first replays the example database
(known failures first), then generates; the first confirmed failure is shrunk by
Hypothesis's shrinker (fewer requests, shorter prompts, smaller values) for at most
``shrink_seconds``, every smaller case confirmed like the first before it counts. What was
judged is remembered for the slice's process (the same case is never served twice).

A case's verdict is an audit of its scenario on the engine (``run.execute.run_audit``):
every run check on every run, and the comparisons it names under ``expect``. A failing
finding makes it a candidate; it is confirmed (``statistics``) by serving it again (exact
checks) or again with fresh seeds (statistical checks).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from random import Random
from typing import TYPE_CHECKING, Any

from specseed.checks.findings import FAILING, Finding
from specseed.core.errors import InputError
from specseed.scenarios.schema import UINT64_MAX, AuditConfig
from specseed.search.coverage import Coverage, case_coverage
from specseed.search.statistics import STATISTICAL_CHECKS
from specseed.search.strategies import (
    KINDS,
    RequestKind,
    TrafficBounds,
    cases,
    field_strategies,
    is_statistical,
)
from specseed.traces.records import REQUEST_KNOBS

if TYPE_CHECKING:
    from specseed.engine_adapters.base import EngineAdapter, EngineSettings

EXAMPLES_PER_RUN = 25
"""Cases one Hypothesis run draws before the next starts from a fresh random stream."""
DATABASE_KEY = b"specseed-search-v2"
"""The example database's key for drawn cases: bump it when the strategies change what a
stored example draws."""
SEED_SHIFT = 0x9E3779B97F4A7C15
"""Added to every request seed (times the rerun's number) for a statistical confirmation:
fresh seeds far from the drawn ones and their copies."""
STATISTICAL_TESTS_PER_CASE = 3
"""Most statistical tests one case runs (a distribution finding per run, a losslessness one
per expectation)."""


@dataclass(frozen=True)
class SearchOptions:
    """What every slice of one search shares."""

    config: AuditConfig
    settings: EngineSettings
    base_dir: Path
    seed: int
    started: float
    """``time.time()`` when the search started (slices measure time to a failure from it)."""
    deadline: float
    """``time.time()`` after which no new case is drawn."""
    shrink_seconds: float
    confirmations: int
    """Fresh reruns a statistical candidate must also fail (``statistics.AlarmBudget``)."""
    database: str | None
    """The example database: a folder, ``redis://...``, or None (none)."""
    stop_file: str | None = None
    """A file whose existence tells every slice to stop drawing (a failure was confirmed)."""
    hypothesis_home: str | None = None
    """Where Hypothesis keeps its own files (its character tables): the search's scratch
    folder, never the user's working directory."""
    max_requests: int = 5
    max_tokens: int = 12
    statistical: bool = True
    kinds: tuple[RequestKind, ...] = KINDS
    """Request kinds drawn; statistical cases need sampled ones (seeded)."""
    max_scenarios: int | None = None
    """Most cases a slice judges while drawing (None: as many as its time allows); with
    ``shrink_scenarios``, a search that does not depend on the machine's speed."""
    shrink_scenarios: int | None = None
    """Most cases judged while shrinking (None: as many as ``shrink_seconds`` allows)."""


@dataclass(frozen=True)
class SearchSlice:
    """One share of a search: a time and a cap on statistical tests."""

    options: SearchOptions
    index: int
    seconds: float
    statistical_cap: int


@dataclass(frozen=True)
class Candidate:
    """A failing case before confirmation."""

    check: str
    statistical: bool
    confirmed: bool
    during_shrink: bool


@dataclass(frozen=True)
class FoundFailure:
    """A confirmed failure, shrunk."""

    check: str
    """The check it keeps failing (the first that failed, exact checks before statistical)."""
    scenario: dict[str, Any]
    """The smallest confirmed failing case (scenario dict form)."""
    original: dict[str, Any]
    """The case first confirmed."""
    findings: tuple[Finding, ...]
    """The findings of the smallest case."""
    statistical: bool
    confirmations: int
    """Reruns that confirmed it."""
    shrink_steps: int
    """Smaller failing cases Hypothesis's shrinker kept."""
    shrink_cases: int
    """Cases judged while shrinking."""
    found_after: float
    """Seconds from the search's start to the first confirmation."""
    shrink_seconds: float
    cases_before: int
    """Cases this slice judged before the first confirmation (that one included)."""


@dataclass
class SliceResult:
    """What one slice did."""

    index: int
    scenarios_run: int = 0
    """Cases judged (served and checked), shrinking included."""
    runs_served: int = 0
    statistical_tests: int = 0
    """Statistical tests run while drawing (the ones the false-alarm budget counts)."""
    candidates: list[Candidate] = field(default_factory=list)
    failures: list[FoundFailure] = field(default_factory=list)
    coverage: Coverage = field(default_factory=Coverage)
    refused: int = 0
    """Cases the engine refused before serving (a limit it states)."""
    unexplored: tuple[str, ...] = ()
    """Request fields with no strategy (left unset)."""
    hypothesis_errors: list[str] = field(default_factory=list)
    """Notes for the report: Hypothesis's complaints (an unreliable case), and the first
    refusals of a knob by the engine."""
    seconds: float = 0.0
    interrupted: bool = False
    """A signal stopped it (what it did until then is here)."""


@dataclass(frozen=True)
class SearchEvent:
    """Progress of a slice in this process: ``kind`` is ``case`` (a case judged),
    ``candidate``, ``confirmed``, ``refuted``, ``shrunk`` (a smaller failing case kept)."""

    kind: str
    result: SliceResult
    check: str | None = None
    size: str | None = None


@dataclass(frozen=True)
class _Outcome:
    failing: tuple[str, ...]
    """Failing checks, exact ones first (registry order), after confirmation."""
    findings: tuple[Finding, ...]
    confirmed: bool
    statistical: bool
    refused: bool = False

    @property
    def check(self) -> str | None:
        return self.failing[0] if self.failing and self.confirmed else None


class StopSearch(KeyboardInterrupt):
    """Raised inside Hypothesis to end a run at once, as an interrupt ends it (nothing saved
    to the example database, nothing shrunk): the slice's time or cases are spent, or the
    shrinking budget is (the smallest failing case seen so far stands)."""


SHRINK_CALLS_PER_CASE = 4
"""Hypothesis's calls while shrinking, per case ``shrink_scenarios`` allows (most calls meet a
case already judged, but each still draws one)."""


class SearchFailure(Exception):
    """Raised inside Hypothesis for a confirmed failing case; one subclass per check, so the
    shrinker keeps the same check failing."""

    check = ""

    def __init__(self, case: dict[str, Any], outcome: _Outcome) -> None:
        super().__init__(f"{self.check} fails")
        self.case = case
        self.outcome = outcome


_FAILURE_CLASSES: dict[str, type[SearchFailure]] = {}


def failure_class(check: str) -> type[SearchFailure]:
    if check not in _FAILURE_CLASSES:
        name = "Fails_" + "".join(c if c.isalnum() else "_" for c in check)
        _FAILURE_CLASSES[check] = type(name, (SearchFailure,), {"check": check})
    return _FAILURE_CLASSES[check]


_JUDGED: dict[tuple[int, float], dict[str, _Outcome]] = {}
"""Cases judged in this process, per search (its seed and start): never served twice."""


def open_database(spec: str | None) -> Any:
    """The example database a spec names: a folder (Hypothesis's directory database) or
    ``redis://host:port/db`` (its Redis database; needs the redis package)."""
    if spec is None:
        return None
    if spec.startswith(("redis://", "rediss://")):
        import redis
        from hypothesis.extra.redis import RedisExampleDatabase

        return RedisExampleDatabase(redis.Redis.from_url(spec))
    from hypothesis.database import DirectoryBasedExampleDatabase

    return DirectoryBasedExampleDatabase(spec)


def size_text(case: Mapping[str, Any]) -> str:
    """A case's size as the shrinker reduces it."""
    requests = case["requests"]
    prompts = sum(
        len(r["prompt"].encode()) if isinstance(r["prompt"], str) else len(r["prompt"])
        for r in requests.values()
    )
    tokens = sum(r.get("max_tokens", 16) for r in requests.values())
    runs = len(case["runs"])
    return (
        f"{len(requests)} request{'s' * (len(requests) != 1)}, {runs} run{'s' * (runs != 1)}, "
        f"{prompts} prompt tokens, {tokens} max_tokens"
    )


def _order(failing: list[Finding]) -> tuple[str, ...]:
    from specseed.checks import CHECKS

    order = {check: i for i, check in enumerate(CHECKS)}
    ids = sorted(
        {f.check for f in failing}, key=lambda c: (c in STATISTICAL_CHECKS, order.get(c, 0))
    )
    return tuple(ids)


def reseeded(case: Mapping[str, Any], rerun: int) -> dict[str, Any]:
    """``case`` with every request seed moved by ``rerun`` * :data:`SEED_SHIFT` (fresh,
    independent samples for a statistical confirmation)."""
    moved = json.loads(json.dumps(case))
    for request in moved["requests"].values():
        if isinstance(request.get("seed"), int):
            request["seed"] = (request["seed"] + rerun * SEED_SHIFT) & UINT64_MAX
    return moved


class _Slice:
    """The state of one slice while Hypothesis calls it."""

    def __init__(
        self,
        engine: EngineAdapter,
        item: SearchSlice,
        on_event: Callable[[SearchEvent], None] | None,
    ) -> None:
        from specseed.checks import registered_comparison_ids

        self.engine = engine
        self.item = item
        self.options = item.options
        self.on_event = on_event
        self.started = time.time()
        self.until = min(self.options.deadline, self.started + item.seconds)
        self.result = SliceResult(index=item.index)
        limits = engine.traffic_limits()
        settings = self.options.settings
        defaults = TrafficBounds()
        self.bounds = TrafficBounds(
            vocab_size=limits.vocab_size or defaults.vocab_size,
            context_length=limits.context_length or defaults.context_length,
            max_num_requests=settings.max_num_requests,
            max_draft_len=settings.max_draft_len,
            fixed_settings=limits.fixed_settings,
            max_requests=self.options.max_requests,
            max_tokens=self.options.max_tokens,
            # A server's distribution is judged only where specseed loads its checkpoint,
            # and a K = 0 baseline needs a setting it cannot change: no statistical cases.
            statistical=self.options.statistical and not limits.fixed_settings,
            comparisons=registered_comparison_ids(),
            knobs=tuple(k for k in REQUEST_KNOBS if k not in limits.refused_knobs),
            kinds=self.options.kinds,
        )
        strategies = field_strategies()
        self.fields = tuple(name for name, s in strategies.items() if s is not None)
        self.result.unexplored = tuple(name for name, s in strategies.items() if s is None)
        self.judged = _JUDGED.setdefault((self.options.seed, self.options.started), {})
        self.target: str | None = None
        self.shrink_until = 0.0
        self.first: FoundFailure | None = None
        self.best: tuple[dict[str, Any], _Outcome] | None = None
        self.steps = 0
        """Smaller failing cases the shrinker reached."""
        self.shrink_calls = 0

    # -- time ----------------------------------------------------------------------------

    def drawing_over(self) -> bool:
        if time.time() >= self.until:
            return True
        cap = self.options.max_scenarios
        if cap is not None and self.result.scenarios_run >= cap:
            return True
        stop = self.options.stop_file
        return stop is not None and os.path.exists(stop)

    # -- Hypothesis's test function ------------------------------------------------------

    def condition(self, case: dict[str, Any]) -> bool:
        """Hypothesis's predicate: never true; raises the check's ``SearchFailure`` for a
        confirmed failing case (while shrinking: only for the check being shrunk)."""
        key = json.dumps(case, sort_keys=True)
        if self.target is not None:
            self.shrink_calls += 1
            if self._shrinking_over():
                raise StopSearch
        elif self.drawing_over():
            raise StopSearch
        outcome = self.judged.get(key)
        if outcome is None:
            outcome = self._judge(case)
            if outcome is None:
                return False
            self.judged[key] = outcome
        check = outcome.check
        if check is None:
            return False
        if self.target is None:
            self.target = check
            self.shrink_until = time.time() + self.options.shrink_seconds
            self.first = self._found(case, outcome)
            self.best = (case, outcome)
        elif check != self.target and self.target not in outcome.failing:
            return False
        elif self.best is not None and _smaller(case, self.best[0]):
            self.best = (case, outcome)
            self.steps += 1
            self._emit("shrunk", self.target, size_text(case))
        raise failure_class(self.target)(case, outcome)

    def _shrinking_over(self) -> bool:
        if time.time() >= self.shrink_until:
            return True
        cap = self.options.shrink_scenarios
        assert self.first is not None
        if cap is None:
            return False
        judged = self.result.scenarios_run - self.first.cases_before
        return judged >= cap or self.shrink_calls > cap * SHRINK_CALLS_PER_CASE

    # -- judging -------------------------------------------------------------------------

    def _judge(self, case: dict[str, Any]) -> _Outcome | None:
        statistical = is_statistical(case)
        shrinking = self.target is not None
        if statistical and not shrinking:
            used = self.result.statistical_tests
            if used + STATISTICAL_TESTS_PER_CASE > self.item.statistical_cap:
                return None  # the false-alarm budget's cap: not run
        findings = self._audit(case)
        if findings is None:
            self.result.refused += 1
            return _Outcome((), (), False, statistical, refused=True)
        self.result.scenarios_run += 1
        self.result.runs_served += len(case["runs"])
        if not shrinking:
            self.result.statistical_tests += sum(
                1 for f in findings if f.check in STATISTICAL_CHECKS and f.status != "skip"
            )
            self.result.coverage.merge(
                case_coverage(
                    case,
                    longest_prompt=self.bounds.longest_prompt,
                    max_num_requests=self.bounds.max_num_requests,
                    max_draft_len=self.bounds.max_draft_len,
                    sampling_fields=self.fields,
                )
            )
        self._emit("case")
        failing = _order([f for f in findings if f.status in FAILING])
        if not failing:
            return _Outcome((), (), False, statistical)  # a pass keeps no findings
        lead = failing[0]
        exact = lead not in STATISTICAL_CHECKS
        if shrinking:
            # A smaller case that fails is kept unconfirmed; the smallest is confirmed at
            # the end (``_final``), and the first confirmed case stands if it is not.
            return _Outcome(failing, findings, True, not exact)
        self._emit("candidate", lead)
        confirmed = self._confirm(case, lead, exact)
        self.result.candidates.append(Candidate(lead, not exact, confirmed, shrinking))
        self._emit("confirmed" if confirmed else "refuted", lead)
        return _Outcome(failing, findings, confirmed, not exact)

    def _confirm(self, case: dict[str, Any], check: str, exact: bool) -> bool:
        """The same case again (an exact check), or again with fresh seeds ``r`` times (a
        statistical one): the same check must fail every time."""
        reruns = (
            [case] if exact else [reseeded(case, i + 1) for i in range(self.options.confirmations)]
        )
        for rerun in reruns:
            findings = self._audit(rerun)
            if findings is None or not any(
                f.check == check and f.status in FAILING for f in findings
            ):
                return False
        return True

    def _audit(self, case: dict[str, Any]) -> tuple[Finding, ...] | None:
        """The case's findings on this engine; None when it cannot be served as drawn."""
        from pydantic import ValidationError

        from specseed.checks import registered_comparison_ids
        from specseed.plan.planning import plan_scenario
        from specseed.run.execute import run_audit
        from specseed.scenarios.loader import LoadedScenario
        from specseed.scenarios.schema import COMPARISON_IDS_CONTEXT, Scenario

        try:
            scenario = Scenario.model_validate(
                case, context={COMPARISON_IDS_CONTEXT: registered_comparison_ids()}
            )
        except ValidationError:
            return None
        planned = plan_scenario(LoadedScenario(scenario, "search"), self.options.settings)
        try:
            result = run_audit(
                self.options.config, [planned], self.options.base_dir, adapter=self.engine
            )
        except InputError:  # a limit the engine states (prompt ids, capacity): not served
            return None
        if result.interrupted:
            raise KeyboardInterrupt
        refusals = [
            trace.end.refused
            for scenario in result.scenarios
            for trace in scenario.traces.values()
            if trace.end.refused is not None
        ]
        if refusals:  # a knob the engine says it does not take: not judged, not a pass
            note = f"the engine refused a sampling knob: {refusals[0]}"[:300]
            if note not in self.result.hypothesis_errors and len(self.result.hypothesis_errors) < 3:
                self.result.hypothesis_errors.append(note)
            return None
        crashed = [
            trace.end.failure
            for scenario in result.scenarios
            for trace in scenario.traces.values()
            if trace.failed and trace.end.failure is not None
        ]
        if crashed and "runs-complete" in self.options.config.checks.skip:
            # model.yaml sets crashes aside (a known one, say): a case whose run crashed
            # cannot be judged by the other checks either, so it is not judged at all.
            failure = crashed[0]
            note = f"a run crashed and runs-complete is skipped: {failure.exception}"[:300]
            if note not in self.result.hypothesis_errors and len(self.result.hypothesis_errors) < 3:
                self.result.hypothesis_errors.append(note)
            return None
        return tuple(f for s in result.scenarios for f in s.findings)

    # -- reporting -----------------------------------------------------------------------

    def _found(self, case: dict[str, Any], outcome: _Outcome) -> FoundFailure:
        return FoundFailure(
            check=outcome.failing[0],
            scenario=case,
            original=case,
            findings=outcome.findings,
            statistical=outcome.statistical,
            confirmations=1 if not outcome.statistical else self.options.confirmations,
            shrink_steps=0,
            shrink_cases=0,
            found_after=time.time() - self.options.started,
            shrink_seconds=0.0,
            cases_before=self.result.scenarios_run,
        )

    def _emit(self, kind: str, check: str | None = None, size: str | None = None) -> None:
        if self.on_event is not None:
            self.on_event(SearchEvent(kind, self.result, check, size))


def _size_key(case: Mapping[str, Any]) -> tuple[int, ...]:
    requests = case["requests"]
    prompts = sum(
        len(r["prompt"].encode()) if isinstance(r["prompt"], str) else len(r["prompt"])
        for r in requests.values()
    )
    tokens = sum(r.get("max_tokens", 16) for r in requests.values())
    return (len(requests), len(case["runs"]), prompts, tokens)


def _smaller(case: Mapping[str, Any], than: Mapping[str, Any]) -> bool:
    return _size_key(case) < _size_key(than)


def search_slice(
    engine: EngineAdapter,
    item: SearchSlice,
    on_event: Callable[[SearchEvent], None] | None = None,
) -> SliceResult:
    """Search for ``item.seconds`` (or until the search's deadline or stop file) on
    ``engine``; returns what was judged, the candidates and the confirmed failure (shrunk)."""
    from hypothesis import HealthCheck, Phase, Verbosity, settings
    from hypothesis.errors import HypothesisException

    state = _Slice(engine, item, on_event)
    if state.drawing_over():
        return state.result
    options = item.options
    if options.hypothesis_home is not None:
        from hypothesis.configuration import set_hypothesis_home_dir

        set_hypothesis_home_dir(options.hypothesis_home)
    strategy = cases(state.bounds)
    config = settings(
        database=open_database(options.database),
        max_examples=EXAMPLES_PER_RUN,
        deadline=None,
        phases=(Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink),
        verbosity=Verbosity.quiet,
        print_blob=False,
        suppress_health_check=list(HealthCheck),
    )
    rounds = 0
    while not state.drawing_over():
        random = Random(f"{options.seed}:{item.index}:{rounds}")
        rounds += 1
        try:
            _hypothesis_run(strategy, state.condition, config, random.getrandbits(64))
        except StopSearch:
            if state.first is not None:  # shrinking stopped: the smallest failing case stands
                state.result.failures.append(_final(state, None))
                break
            continue  # drawing is over: the loop ends
        except KeyboardInterrupt:
            state.result.interrupted = True
            break
        except SearchFailure as exc:
            state.result.failures.append(_final(state, exc))
            break
        except HypothesisException as exc:  # an unreliable case: noted, the search goes on
            state.result.hypothesis_errors.append(f"{type(exc).__name__}: {exc}"[:300])
            if state.target is not None and state.first is not None and state.best is not None:
                state.result.failures.append(_final(state, None))
                break
    state.result.seconds = time.time() - state.started
    return state.result


def _hypothesis_run(
    strategy: Any, condition: Callable[[Any], bool], config: Any, seed: int
) -> None:
    """One Hypothesis run of ``condition`` over ``strategy``: what ``hypothesis.find`` does
    (its database key, its settings), with a seed that keeps the example database (the
    ``seed`` decorator turns the database off): replay known failures, generate, shrink."""
    from hypothesis import given

    def test(case: Any) -> None:
        condition(case)

    test._hypothesis_internal_use_seed = seed  # type: ignore[attr-defined]
    wrapped = config(given(strategy)(test))
    wrapped._hypothesis_internal_database_key = DATABASE_KEY
    with _no_local_constants():
        wrapped()


@contextmanager
def _no_local_constants() -> Iterator[None]:
    """Hypothesis (6.131 on) also draws literals it finds in the source of the local modules
    loaded so far, and which are loaded depends on what ran before (an import on first use,
    a test module beside): the same seed would draw other cases. Off while the search draws,
    so that a seed draws the same cases; where a Hypothesis release lacks the hook, it stays
    on (the search still runs)."""
    from hypothesis.internal.conjecture import providers

    local = getattr(providers, "_get_local_constants", None)
    constants = getattr(providers, "Constants", None)
    if local is None or constants is None:
        yield
        return

    def forget() -> None:  # the constants allowed per draw, remembered with the local ones
        cache = getattr(getattr(providers, "CONSTANTS_CACHE", None), "cache", None)
        if cache is not None:
            cache.clear()

    providers._get_local_constants = constants  # an empty set of constants
    forget()
    try:
        yield
    finally:
        providers._get_local_constants = local
        forget()


def _final(state: _Slice, raised: SearchFailure | None) -> FoundFailure:
    """The confirmed failure as shrunk: the case Hypothesis ended on (or the smallest seen),
    confirmed like the first (else the first confirmed case stands)."""
    assert state.first is not None and state.best is not None
    case, outcome = (raised.case, raised.outcome) if raised is not None else state.best
    if _smaller(state.best[0], case):
        case, outcome = state.best
    check = state.first.check
    if case is not state.first.original and not state._confirm(
        case, check, check not in STATISTICAL_CHECKS
    ):
        case, outcome = state.first.original, _Outcome((check,), state.first.findings, True, False)
    return FoundFailure(
        check=state.first.check,
        scenario=case,
        original=state.first.original,
        findings=outcome.findings,
        statistical=state.first.statistical,
        confirmations=state.first.confirmations,
        shrink_steps=state.steps,
        shrink_cases=state.result.scenarios_run - state.first.cases_before,
        found_after=state.first.found_after,
        shrink_seconds=max(0.0, time.time() - state.options.started - state.first.found_after),
        cases_before=state.first.cases_before,
    )


__all__ = [
    "DATABASE_KEY",
    "FoundFailure",
    "SearchEvent",
    "SearchOptions",
    "SearchSlice",
    "SliceResult",
    "open_database",
    "reseeded",
    "search_slice",
    "size_text",
]
