"""Planning: validated scenarios resolved into run plans.

Every scenario run becomes a ``RunPlan`` carrying the engine settings it will be served
with (model.yaml's, plus the run's overrides). Planning takes the settings as resolved
(``settings_from``: the engine's options already validated) and validates nothing itself:
``plan.resolve.resolve_audit`` reads and validates model.yaml once, then plans here.
``base_settings`` and ``plan_audit`` are for callers that hold only an ``AuditConfig``: they
validate its options and scenarios on each call.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from pydantic import BaseModel

from specseed.checks import CHECKS, registered_comparison_ids
from specseed.core.errors import ScenarioError
from specseed.core.wording import did_you_mean
from specseed.engine_adapters.base import EngineSettings, RequestPlan, RunPlan
from specseed.scenarios.loader import LoadedScenario, engine_options, resolve_scenarios
from specseed.scenarios.schema import AuditConfig, EngineConfig, RunSpec, Scenario
from specseed.traces.records import REQUEST_KNOBS, REQUEST_SAMPLING


@dataclass(frozen=True)
class PlannedScenario:
    """A validated scenario with its runs resolved against the engine configuration."""

    loaded: LoadedScenario
    plans: tuple[RunPlan, ...]
    base: EngineSettings
    """The audit's engine settings (model.yaml's, before any run's overrides), resolved once
    by planning: the engine adapter is built from them."""

    @property
    def scenario(self) -> Scenario:
        return self.loaded.scenario


def _resolve_path(path: Path | None, base_dir: Path) -> Path | None:
    if path is None:
        return None
    return path if path.is_absolute() else (base_dir / path)


def settings_from(engine: EngineConfig, options: BaseModel, base_dir: Path) -> EngineSettings:
    """Engine settings from model.yaml's validated ``engine`` section and its validated
    ``options`` (the engine's options model); paths made absolute against ``base_dir``."""
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
        options=options,
    )


def base_settings(config: AuditConfig | EngineConfig, base_dir: Path) -> EngineSettings:
    """Engine settings from an ``engine`` section (paths relative to model.yaml), its options
    validated here (``resolve_audit`` carries them validated instead)."""
    if isinstance(config, EngineConfig):
        config = AuditConfig(engine=config)
    return settings_from(config.engine, engine_options(config, "model.yaml"), base_dir)


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
                arrival_step=run.arrivals.get(name, 0),
                **spec.model_dump(include={*REQUEST_SAMPLING, *REQUEST_KNOBS}),
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
            fix = did_you_mean(check_id, CHECKS, "See `specseed checks`.")
            problems.append(f"{source}: checks.skip: unknown check '{check_id}'. {fix}")
    if problems:
        raise ScenarioError(f"{source} does not validate", problems)


def plan_scenario(loaded: LoadedScenario, base: EngineSettings) -> PlannedScenario:
    """Every run of a scenario, resolved against the audit's engine settings."""
    scenario = loaded.scenario
    return PlannedScenario(
        loaded, tuple(plan_run(scenario, run, base) for run in scenario.runs), base
    )


def plan_scenarios(
    scenarios: Sequence[LoadedScenario], base: EngineSettings
) -> list[PlannedScenario]:
    """Every run of every scenario, resolved against the audit's engine settings."""
    return [plan_scenario(item, base) for item in scenarios]


def plan_audit(
    config: AuditConfig, base_dir: Path, source: str = "model.yaml"
) -> list[PlannedScenario]:
    """Validate every scenario and resolve every run; raises ``ScenarioError`` on bad input.

    For a caller holding an ``AuditConfig`` (``resolve_audit`` validates and plans in one
    pass): its options and scenarios are validated here."""
    _check_skip_list(config, source)
    base = base_settings(config, base_dir)
    scenarios = resolve_scenarios(config.scenarios, base_dir, registered_comparison_ids())
    return plan_scenarios(scenarios, base)


def engine_settings(
    planned: Sequence[PlannedScenario], config: AuditConfig, base_dir: Path
) -> EngineSettings:
    """The settings an audit's engine adapter is built with: those its plans carry (model.yaml's
    when nothing is planned)."""
    if planned:
        return planned[0].base
    return base_settings(config, base_dir)
