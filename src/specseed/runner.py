"""The audit runner: resolves model.yaml and scenarios into run plans, drives the engine
adapter, streams traces, and applies the checks.

It emits events (``AuditEvent``) for reporters to show progress; it never prints and never
decides how results look. Validation happens entirely before the engine is loaded.
"""

from __future__ import annotations

import difflib
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from specseed.checks import CHECKS
from specseed.checks.context import CheckContext
from specseed.checks.findings import Finding
from specseed.checks.registry import (
    CheckSpec,
    ComparisonCheckSpec,
    RunCheckSpec,
    comparison_checks,
    run_checks,
)
from specseed.contracts import get_contract
from specseed.engine_adapters.base import (
    EngineAdapter,
    EngineSettings,
    RequestPlan,
    RunPlan,
    failure_from,
)
from specseed.engine_adapters.registry import load_adapter_class
from specseed.errors import EngineError, ScenarioError
from specseed.results import (
    AuditResult,
    AuditStarted,
    EventHandler,
    RunFinished,
    RunStarted,
    ScenarioChecked,
    ScenarioResult,
)
from specseed.scenarios.loader import LoadedScenario, engine_options, resolve_scenarios
from specseed.scenarios.schema import AuditConfig, EngineConfig, Expectation, RunSpec, Scenario
from specseed.trace import EVIDENCE_TEXT, RunEnd, RunTrace, TraceRecorder, TraceWriter


@dataclass(frozen=True)
class PlannedScenario:
    """A validated scenario with its runs resolved against the engine configuration."""

    loaded: LoadedScenario
    plans: tuple[RunPlan, ...]

    @property
    def scenario(self) -> Scenario:
        return self.loaded.scenario


# -- planning -----------------------------------------------------------------------------


def _resolve_path(path: Path | None, base_dir: Path) -> Path | None:
    if path is None:
        return None
    return path if path.is_absolute() else (base_dir / path)


def base_settings(config: AuditConfig | EngineConfig, base_dir: Path) -> EngineSettings:
    """Engine settings from model.yaml's ``engine`` section (paths relative to model.yaml)."""
    if isinstance(config, EngineConfig):
        config = AuditConfig(engine=config)
    engine = config.engine
    return EngineSettings(
        name=engine.name,
        device=engine.device,
        max_num_requests=engine.max_num_requests,
        max_draft_len=engine.max_draft_len,
        verification=engine.verification,
        overlap_scheduler=engine.overlap_scheduler,
        checkpoint=_resolve_path(engine.checkpoint, base_dir),
        draft_checkpoint=_resolve_path(engine.draft_checkpoint, base_dir),
        contract=engine.contract,
        options=engine_options(config, "model.yaml"),
    )


def _run_settings(base: EngineSettings, run: RunSpec) -> EngineSettings:
    """The engine settings of one run: model.yaml's, with the run's overrides on top."""
    overrides = {k: v for k, v in run.engine.model_dump().items() if v is not None}
    return replace(base, **overrides)


def _prior_traffic(run: RunSpec) -> tuple[RequestPlan, ...]:
    prior = run.prior_traffic
    if prior is None:
        return ()
    return tuple(
        RequestPlan(
            request_id=f"prior-{i}",
            prompt=f"earlier traffic, request {i}",
            seed=1000 + i if prior.seeded else None,
            temperature=1.0,
            top_k=0,
            top_p=1.0,
            max_tokens=prior.max_tokens,
            phase="prior",
        )
        for i in range(prior.requests)
    )


def plan_run(scenario: Scenario, run: RunSpec, base: EngineSettings) -> RunPlan:
    """One run of a scenario, resolved against the engine settings."""
    settings = _run_settings(base, run)
    requests = []
    for name, spec in scenario.served_requests(run):
        requests.append(
            RequestPlan(
                request_id=spec.name,
                prompt=tuple(spec.prompt) if isinstance(spec.prompt, list) else spec.prompt,
                seed=spec.seed,
                temperature=spec.temperature,
                top_k=spec.top_k,
                top_p=spec.top_p,
                max_tokens=spec.max_tokens,
                arrival_step=run.arrivals.get(name, 0),
            )
        )
    return RunPlan(
        scenario=scenario.name,
        run=run.name,
        settings=settings,
        requests=tuple(requests),
        warmup_batches=tuple(run.warmup_sizes(settings.max_num_requests)),
        prior_traffic=_prior_traffic(run),
    )


def _check_skip_list(config: AuditConfig, source: str) -> None:
    problems = []
    for check_id in config.checks.skip:
        if check_id not in CHECKS:
            close = difflib.get_close_matches(check_id, list(CHECKS), n=1)
            fix = f"Did you mean '{close[0]}'?" if close else "See `specseed checks`."
            problems.append(f"{source}: checks.skip: unknown check '{check_id}'. {fix}")
    if problems:
        raise ScenarioError(f"{source} does not validate", problems)


def plan_audit(
    config: AuditConfig, base_dir: Path, source: str = "model.yaml"
) -> list[PlannedScenario]:
    """Validate every scenario and resolve every run; raises ``ScenarioError`` on bad input."""
    _check_skip_list(config, source)
    base = base_settings(config, base_dir)
    return [
        PlannedScenario(
            item, tuple(plan_run(item.scenario, run, base) for run in item.scenario.runs)
        )
        for item in resolve_scenarios(config.scenarios, base_dir)
    ]


# -- running ------------------------------------------------------------------------------


def _missing_evidence(spec: CheckSpec, traces: Sequence[RunTrace]) -> str | None:
    """Why a check cannot judge these runs (None: it can).

    A check whose evidence the engine did not expose is skipped with the reason, never passed.
    """
    for trace in traces:
        if trace.header.not_served is not None:
            return f"run {trace.name} was not served: {trace.header.not_served}"
    for trace in traces:
        missing = trace.header.observability.missing(spec.needs)
        if missing:
            what = " or ".join(EVIDENCE_TEXT[e] for e in missing)
            return f"engine {trace.header.engine} does not expose {what}"
    return None


def evaluate(
    scenario: Scenario, traces: dict[str, RunTrace], contract_name: str, skip: Sequence[str] = ()
) -> list[Finding]:
    """Apply every check to a scenario's recorded runs (pure: no engine involved).

    Each finding gets its check id from the registry and the scenario's name here, so no
    check repeats its own id.
    """
    ctx = CheckContext(scenario=scenario, traces=traces, contract=get_contract(contract_name))
    findings: list[Finding] = []

    def stamped(spec: CheckSpec, finding: Finding, runs: tuple[str, ...]) -> Finding:
        return replace(finding, check=spec.id, scenario=scenario.name, runs=finding.runs or runs)

    def guarded(
        spec: CheckSpec, runs: Sequence[RunTrace], produce: Callable[[], Iterable[Finding]]
    ) -> None:
        names = tuple(t.name for t in runs)
        if spec.id in skip:
            reason = "skipped by model.yaml checks.skip"
            findings.append(stamped(spec, Finding(status="skip", message=reason), names))
            return
        missing = _missing_evidence(spec, runs)
        if missing is not None:
            message = f"{spec.id}: {missing}"
            findings.append(stamped(spec, Finding(status="skip", message=message), names))
            return
        try:
            findings.extend(stamped(spec, f, names) for f in produce())
        except Exception as exc:  # a broken check must not hide the others
            message = f"the check itself failed: {type(exc).__name__}: {exc}"
            findings.append(stamped(spec, Finding(status="error", message=message), names))

    def run_check(spec: RunCheckSpec, trace: RunTrace) -> None:
        guarded(spec, [trace], lambda: spec.func(ctx, trace))

    def comparison(spec: ComparisonCheckSpec, expectation: Expectation) -> None:
        runs = [traces[name] for name in expectation.runs if name in traces]
        served = [t for t in runs if t.header.not_served is None]
        if runs and runs[0] in served and len(served) >= 2 and len(served) < len(runs):
            # Compare what was served against the first run, and say what was not.
            left_out = [t for t in runs if t not in served]
            note = "; not served: " + "; ".join(
                f"{t.name} ({t.header.not_served})" for t in left_out
            )
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


def run_guarded(engine: EngineAdapter, plan: RunPlan, recorder: TraceRecorder) -> RunTrace:
    """``engine.run``, guarded: an adapter that raises anyway still yields a trace with its
    failure, and the trace file is closed whatever happens."""
    try:
        return engine.run(plan, recorder)
    except Exception as exc:
        if recorder.ended or not recorder.has_header:
            raise EngineError(
                f"engine {engine.name} failed outside a run ({plan.scenario}/{plan.run}): "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        failure = failure_from(exc, recorder)
        return recorder.end(RunEnd(outputs=recorder.emitted_outputs(), failure=failure))
    finally:
        recorder.close()


def run_audit(
    config: AuditConfig,
    planned: Sequence[PlannedScenario],
    base_dir: Path,
    *,
    trace_dir: Path | None = None,
    on_event: EventHandler | None = None,
    adapter: EngineAdapter | None = None,
    command: str = "",
) -> AuditResult:
    """Serve every planned run and check the results."""
    emit = on_event or (lambda _event: None)
    started = time.perf_counter()
    total = sum(len(p.plans) for p in planned)
    emit(AuditStarted(scenarios=len(planned), runs=total, engine=config.engine.name))
    engine = adapter or create_adapter(base_settings(config, base_dir))
    results = []
    try:
        validate_plans(engine, planned)
        for item in planned:
            scenario_started = time.perf_counter()
            traces: dict[str, RunTrace] = {}
            for plan in item.plans:
                emit(RunStarted(plan.scenario, plan.run))
                writer = (
                    TraceWriter(trace_dir / plan.scenario / f"{plan.run}.jsonl")
                    if trace_dir is not None
                    else None
                )
                trace = run_guarded(engine, plan, TraceRecorder(writer))
                traces[plan.run] = trace
                emit(RunFinished(plan.scenario, plan.run, trace.end.seconds, trace.failed))
            findings = evaluate(item.scenario, traces, config.engine.contract, config.checks.skip)
            result = ScenarioResult(
                scenario=item.scenario,
                source=item.loaded.source,
                traces=traces,
                findings=tuple(findings),
                seconds=time.perf_counter() - scenario_started,
            )
            results.append(result)
            emit(ScenarioChecked(result))
        environment = engine.environment()
    finally:
        if adapter is None:
            engine.close()
    return AuditResult(
        config=config,
        contract=config.engine.contract,
        scenarios=tuple(results),
        environment=environment,
        seconds=time.perf_counter() - started,
        command=command,
    )
