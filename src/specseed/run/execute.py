"""The audit runner: resolves model.yaml and scenarios into run plans, drives the engine
adapter, streams traces, and applies the checks.

It emits events (``AuditEvent``) for reporters to show progress; it never prints and never
decides how results look. Validation happens entirely before the engine is loaded.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from specseed.checks.context import CheckContext
from specseed.checks.findings import Finding
from specseed.checks.registry import (
    CheckSpec,
    ComparisonCheckSpec,
    RunCheckSpec,
    comparison_checks,
    run_checks,
)
from specseed.checks.suspects import with_departures
from specseed.core.errors import AuditInterrupted, EngineError, ScenarioError, plugin_code
from specseed.engine_adapters.base import (
    EngineAdapter,
    EngineSettings,
    RunPlan,
    failure_from,
    held_at_once,
    held_within,
    plain_environment,
)
from specseed.engine_adapters.contracts import get_contract
from specseed.engine_adapters.registry import load_adapter_class
from specseed.plan.planning import PlannedScenario, engine_settings
from specseed.run.collector import first_freeze, quiet_imports
from specseed.run.results import (
    AuditResult,
    AuditStarted,
    EventHandler,
    RunFinished,
    RunStarted,
    ScenarioChecked,
    ScenarioResult,
)
from specseed.scenarios.schema import SKIPPED_BY_MODEL_YAML, AuditConfig, Expectation, Scenario
from specseed.traces.folder import TraceDir
from specseed.traces.records import (
    EVIDENCE_TEXT,
    EngineFailure,
    RunEnd,
    RunTrace,
    TraceRecorder,
    TraceWriter,
)

# -- running ------------------------------------------------------------------------------


def _missing_evidence(spec: CheckSpec, traces: Sequence[RunTrace]) -> str | None:
    """Why a check cannot judge these runs (None: it can).

    A check whose evidence the engine did not expose is skipped with the reason, never passed.
    """
    for trace in traces:
        if trace.unserved is not None:
            return f"run {trace.name} was not served: {trace.unserved}"
    for trace in traces:
        missing = trace.header.observability.missing(spec.needs)
        if missing:
            what = " or ".join(EVIDENCE_TEXT[e] for e in missing)
            return f"engine {trace.header.engine} does not expose {what}"
    return None


def evaluate(
    scenario: Scenario,
    traces: dict[str, RunTrace],
    contract_name: str,
    skip: Sequence[str] | Mapping[str, str] = (),
    evidence: dict[str, Any] | None = None,
    *,
    load_checkpoints: bool = True,
) -> list[Finding]:
    """Apply every check to a scenario's recorded runs (pure: no engine involved).

    Each finding gets its check id from the registry and the scenario's name here, so no
    check repeats its own id. ``skip``: check ids not to apply, or each with the reason its
    skip finding gives. ``evidence``: the distribution check's evidence by run name
    (``CheckContext.distribution_evidence``): what a bundle stored is re-judged, and what
    the check computes is added. ``load_checkpoints``: ``CheckContext.load_checkpoints``.
    """
    ctx = CheckContext(
        scenario=scenario,
        traces=traces,
        contract=get_contract(contract_name),
        distribution_evidence=evidence if evidence is not None else {},
        load_checkpoints=load_checkpoints,
    )
    findings: list[Finding] = []

    def stamped(spec: CheckSpec, finding: Finding, runs: tuple[str, ...]) -> Finding:
        named = with_departures(finding, ctx.contract)  # upstream's report of what it names
        return replace(named, check=spec.id, scenario=scenario.name, runs=finding.runs or runs)

    def guarded(
        spec: CheckSpec, runs: Sequence[RunTrace], produce: Callable[[], Iterable[Finding]]
    ) -> None:
        names = tuple(t.name for t in runs)
        if spec.id in skip:
            reason = skip[spec.id] if isinstance(skip, Mapping) else SKIPPED_BY_MODEL_YAML
            findings.append(stamped(spec, Finding(status="skip", message=reason), names))
            return
        missing = _missing_evidence(spec, runs)
        if missing is not None:
            message = f"{spec.id}: {missing}"
            findings.append(stamped(spec, Finding(status="skip", message=message), names))
            return
        try:
            with plugin_code(f"check {spec.id}"):  # a plugin's sys.exit() too
                findings.extend(stamped(spec, f, names) for f in produce())
        except Exception as exc:  # a broken check must not hide the others
            message = (
                f"the check itself failed: {type(exc).__name__}: {exc} (a fault in the "
                "check, not the engine: please report it with this audit's bundle)"
            )
            findings.append(stamped(spec, Finding(status="error", message=message), names))

    def run_check(spec: RunCheckSpec, trace: RunTrace) -> None:
        guarded(spec, [trace], lambda: spec.func(ctx, trace))

    def comparison(spec: ComparisonCheckSpec, expectation: Expectation) -> None:
        runs = [traces[name] for name in expectation.runs if name in traces]
        served = [t for t in runs if t.unserved is None]
        if runs and runs[0] in served and len(served) >= 2 and len(served) < len(runs):
            # Compare what was served against the first run, and say what was not.
            left_out = [t for t in runs if t not in served]
            note = "; not served: " + "; ".join(f"{t.name} ({t.unserved})" for t in left_out)
            narrowed = expectation.model_copy(update={"runs": [t.name for t in served]})
            guarded(
                spec,
                served,
                lambda: (replace(f, message=f.message + note) for f in spec.func(ctx, narrowed)),
            )
            return
        guarded(spec, runs, lambda: spec.func(ctx, expectation))

    for run_spec in run_checks():
        for trace in traces.values():
            run_check(run_spec, trace)
    comparisons = comparison_checks()
    for expectation in scenario.expect:
        comparison(comparisons[expectation.check], expectation)
    return findings


def create_adapter(settings: EngineSettings) -> EngineAdapter:
    """Load the engine (heavy: imports torch and the model). Raises ``EngineError``."""
    # The engine's imports (torch; vLLM's, in its adapter's constructor) without full
    # collections walking their objects (measured: vLLM's import 1.4 s instead of 2.1 s);
    # in the specseed command's own process, the first engine's frozen out of later
    # collections' sight too.
    with quiet_imports(freeze=first_freeze()):
        adapter_class = load_adapter_class(settings.name)
        adapter = adapter_class(settings)
    if not isinstance(adapter, EngineAdapter):
        raise EngineError(f"{adapter_class!r} is not an EngineAdapter")
    return adapter


def validate_plans(engine: EngineAdapter, planned: Sequence[PlannedScenario]) -> None:
    """Ask the engine about every plan before anything runs (``ScenarioError``: exit 2)."""
    problems = [p for item in planned for plan in item.plans for p in engine.validate(plan)]
    if problems:
        raise ScenarioError("the engine cannot serve these scenarios as written", problems)


def _interrupted_end(exc: KeyboardInterrupt, recorder: TraceRecorder) -> RunEnd:
    step, phase, batch_size = recorder.position
    signal_name = exc.signal_name if isinstance(exc, AuditInterrupted) else "SIGINT"
    failure = EngineFailure(
        step, phase, batch_size, "Interrupted", f"the audit was interrupted by {signal_name}"
    )
    return RunEnd(outputs=recorder.emitted_outputs(), failure=failure)


def run_guarded(engine: EngineAdapter, plan: RunPlan, recorder: TraceRecorder) -> RunTrace:
    """``engine.run``, guarded (:func:`run_all_guarded` with one run)."""
    return run_all_guarded(engine, [(plan, recorder)])[0]


def run_all_guarded(
    engine: EngineAdapter, runs: Sequence[tuple[RunPlan, TraceRecorder]]
) -> list[RunTrace]:
    """``engine.run_all``, guarded: an adapter that raises anyway still yields traces with
    its failure, an interrupt ends every open trace with an ``Interrupted`` failure before it
    goes on up, and the trace files are closed whatever happens."""
    recorders = [recorder for _, recorder in runs]
    try:
        return engine.run_all(runs)
    except KeyboardInterrupt as exc:
        for recorder in recorders:
            if recorder.has_header and not recorder.ended:
                recorder.end(_interrupted_end(exc, recorder))
        raise
    except Exception as exc:
        if all(r.ended for r in recorders) or not all(r.has_header for r in recorders):
            names = ", ".join(f"{plan.scenario}/{plan.run}" for plan, _ in runs)
            raise EngineError(
                f"engine {engine.name} failed outside a run ({names}): {type(exc).__name__}: {exc}"
            ) from exc
        return [
            recorder.trace
            if recorder.ended
            else recorder.end(
                RunEnd(outputs=recorder.emitted_outputs(), failure=failure_from(exc, recorder))
            )
            for recorder in recorders
        ]
    finally:
        for recorder in recorders:
            recorder.close()


def _unwritten(recorder: TraceRecorder) -> str | None:
    if recorder.write_error is None or recorder.path is None:
        return None
    path = recorder.path
    held = recorder.written_steps
    return (
        f"{path}: {recorder.write_error.message.removeprefix(f'cannot write the trace {path}: ')}"
        f"; the file holds {held} of {len(recorder.steps)} steps and no end record"
    )


class _ScenarioServing:
    """One scenario of one audit being served: its runs' recorders, their traces, and the
    result once the checks have judged them."""

    def __init__(
        self,
        item: PlannedScenario,
        trace_dir: TraceDir | None,
        emit: EventHandler,
        trace_writer: Callable[[str, str], TraceWriter] | None,
    ) -> None:
        self.item = item
        self.emit = emit
        self.trace_dir = trace_dir
        self.trace_writer = trace_writer
        self.started = time.perf_counter()
        self.opened = False
        self.traces: dict[str, RunTrace] = {}
        self.missing: list[str] = []

    def recorder_for(self, plan: RunPlan) -> TraceRecorder:
        if not self.opened:  # the scenario's time starts with its first run
            self.opened, self.started = True, time.perf_counter()
        self.emit(RunStarted(plan.scenario, plan.run))
        writer = (
            self.trace_writer(plan.scenario, plan.run)
            if self.trace_writer is not None
            else self.trace_dir.writer(plan.scenario, plan.run)
            if self.trace_dir is not None
            else None
        )
        return TraceRecorder(writer)

    def served(self, plan: RunPlan, recorder: TraceRecorder, trace: RunTrace) -> None:
        problem = _unwritten(recorder)
        if problem is not None:
            self.missing.append(problem)
        self.traces[plan.run] = trace
        self.emit(RunFinished(plan.scenario, plan.run, trace.end.seconds, trace.failed))

    def result(self, config: AuditConfig, keep_steps: bool) -> ScenarioResult:
        item, traces = self.item, self.traces
        evidence: dict[str, Any] = {}
        findings = evaluate(
            item.scenario, traces, config.engine.contract, config.checks.skip_reasons(), evidence
        )
        return ScenarioResult(
            scenario=item.scenario,
            source=item.loaded.source,
            traces=traces if keep_steps else {n: replace(t, steps=()) for n, t in traces.items()},
            findings=tuple(findings),
            seconds=time.perf_counter() - self.started,
            missing_evidence=tuple(self.missing),
            distribution_evidence=evidence,
        )


def serve_scenario(
    engine: EngineAdapter,
    item: PlannedScenario,
    config: AuditConfig,
    trace_dir: TraceDir | None,
    emit: EventHandler,
    *,
    keep_steps: bool = False,
    trace_writer: Callable[[str, str], TraceWriter] | None = None,
) -> ScenarioResult:
    """Serve a scenario's runs, check them, and keep what reporters need.

    The runs' steps are dropped once the checks have judged them (they are in the trace files
    when ``trace_dir`` is given): an audit's memory then grows with its largest scenario, not
    with all of them. ``keep_steps`` keeps them, for callers that need whole runs in memory.
    """
    serving = _ScenarioServing(item, trace_dir, emit, trace_writer)
    if len(item.plans) > 1 and engine.serves_side_by_side():
        runs = [(plan, serving.recorder_for(plan)) for plan in item.plans]
        for (plan, recorder), trace in zip(runs, run_all_guarded(engine, runs), strict=True):
            serving.served(plan, recorder, trace)
    else:
        for plan in item.plans:
            recorder = serving.recorder_for(plan)
            serving.served(plan, recorder, run_guarded(engine, plan, recorder))
    return serving.result(config, keep_steps)


AUDITS_HELD_TOGETHER = 256
"""Most requests the runs of audits served together may hold at once (``held_at_once``):
the library's small scenarios go together whole, whereas an audit whose scenario holds
more (the 300 requests of ``distribution``) is served on its own, with the memory of one
audit (merging such runs gained nothing: their forwards are large already)."""


def _held_together(servings: Sequence[_ScenarioServing]) -> list[list[_ScenarioServing]]:
    """Consecutive audits' servings of one scenario whose runs' requests held at once fit
    :data:`AUDITS_HELD_TOGETHER` (an audit above it goes alone)."""
    return held_within(
        servings,
        lambda serving: sum(held_at_once(plan) for plan in serving.item.plans),
        AUDITS_HELD_TOGETHER,
    )


def run_audits_side_by_side(
    audits: Sequence[tuple[AuditConfig, Sequence[PlannedScenario]]],
    engine: EngineAdapter,
    *,
    on_event: Sequence[EventHandler] | None = None,
) -> list[AuditResult]:
    """Several audits of the same scenarios on one engine that serves runs side by side
    (``engine.serves_side_by_side()``: their settings, such as injected defects, may differ
    run by run): scenario after scenario, the runs of the audits are served together (as
    many consecutive audits as :data:`AUDITS_HELD_TOGETHER` allows), then each audit's checks
    judge its own runs. Each audit's result is the one ``run_audit``
    gives it alone (every run records exactly what it records alone); only the number of
    engine steps drops. ``on_event[i]`` hears audit ``i``'s events. An interrupt ends every
    open trace and goes on up as ``AuditInterrupted``: no audit is complete.
    """
    if not engine.serves_side_by_side():
        raise ValueError(f"engine {engine.name} does not serve runs side by side")
    names = [[p.scenario.name for p in planned] for _, planned in audits]
    if any(n != names[0] for n in names):
        raise ValueError("audits served side by side must plan the same scenarios")
    emits = list(on_event) if on_event is not None else [lambda _event: None] * len(audits)
    started = time.perf_counter()
    for (config, planned), emit in zip(audits, emits, strict=True):
        validate_plans(engine, planned)
        total = sum(len(p.plans) for p in planned)
        emit(AuditStarted(scenarios=len(planned), runs=total, engine=config.engine.name))
    results: list[list[ScenarioResult]] = [[] for _ in audits]
    try:
        for index in range(len(names[0]) if audits else 0):
            servings = [
                _ScenarioServing(planned[index], None, emit, None)
                for (_, planned), emit in zip(audits, emits, strict=True)
            ]
            of_audit = {id(serving): number for number, serving in enumerate(servings)}
            for together in _held_together(servings):
                runs = [
                    (serving, plan, serving.recorder_for(plan))
                    for serving in together
                    for plan in serving.item.plans
                ]
                plans = [(plan, recorder) for _, plan, recorder in runs]
                for (serving, plan, recorder), trace in zip(
                    runs, run_all_guarded(engine, plans), strict=True
                ):
                    serving.served(plan, recorder, trace)
                # Judged as soon as served: their steps go before the next audits' runs.
                for serving in together:
                    number = of_audit[id(serving)]
                    result = serving.result(audits[number][0], keep_steps=False)
                    results[number].append(result)
                    emits[number](ScenarioChecked(result))
    except KeyboardInterrupt as exc:
        if isinstance(exc, AuditInterrupted):
            raise
        raise AuditInterrupted("SIGINT") from exc
    environment = plain_environment(engine.environment())
    seconds = time.perf_counter() - started
    return [
        AuditResult(
            config=config,
            contract=config.engine.contract,
            scenarios=tuple(done),
            environment=environment,
            seconds=seconds,
        )
        for (config, _), done in zip(audits, results, strict=True)
    ]


def run_audit(
    config: AuditConfig,
    planned: Sequence[PlannedScenario],
    base_dir: Path,
    *,
    trace_dir: Path | None = None,
    on_event: EventHandler | None = None,
    adapter: EngineAdapter | None = None,
    command: str = "",
    trace_writer: Callable[[str, str], TraceWriter] | None = None,
    keep_steps: bool = False,
    lock_trace_dir: bool = True,
    open_engine: Callable[[], EngineAdapter] | None = None,
) -> AuditResult:
    """Serve every planned run and check the results.

    The results' traces hold header and end only, unless ``keep_steps`` (see
    ``serve_scenario``). ``trace_writer(scenario, run)``, when given, opens each run's trace
    file instead of ``trace_dir`` (a bundle writes its traces this way).

    An interrupt (``KeyboardInterrupt``, ``AuditInterrupted``) ends the current run's trace
    with an ``Interrupted`` failure and returns the scenarios that finished, with
    ``interrupted`` set; ``TraceDirBusy`` if another audit writes into ``trace_dir``.

    The engine is ``adapter``, else the one ``open_engine()`` gives once the audit has started
    (a caller's session that loads it once and keeps it), else one built here and closed at
    the end.
    """
    emit = on_event or (lambda _event: None)
    started = time.perf_counter()
    total = sum(len(p.plans) for p in planned)
    results: list[ScenarioResult] = []
    interrupted: str | None = None
    environment: dict[str, str] = {}
    with contextlib.ExitStack() as stack:
        traces_to = None
        if trace_dir is not None:
            traces_to = (
                stack.enter_context(TraceDir(trace_dir)) if lock_trace_dir else TraceDir(trace_dir)
            )
        emit(AuditStarted(scenarios=len(planned), runs=total, engine=config.engine.name))
        if adapter is not None:
            engine = adapter
        elif open_engine is not None:
            engine = open_engine()
        else:
            engine = create_adapter(engine_settings(planned, config, base_dir))
        try:
            validate_plans(engine, planned)
            try:
                for item in planned:
                    result = serve_scenario(
                        engine,
                        item,
                        config,
                        traces_to,
                        emit,
                        keep_steps=keep_steps,
                        trace_writer=trace_writer,
                    )
                    results.append(result)
                    emit(ScenarioChecked(result))
            except KeyboardInterrupt as exc:
                interrupted = exc.signal_name if isinstance(exc, AuditInterrupted) else "SIGINT"
            environment = plain_environment(engine.environment())
        finally:
            if adapter is None and open_engine is None:
                engine.close()
    done = {r.scenario.name for r in results}
    return AuditResult(
        config=config,
        contract=config.engine.contract,
        scenarios=tuple(results),
        environment=environment,
        seconds=time.perf_counter() - started,
        command=command,
        interrupted=interrupted,
        unfinished=tuple(p.scenario.name for p in planned if p.scenario.name not in done),
    )
