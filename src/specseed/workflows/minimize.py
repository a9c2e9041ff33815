"""Shrinking a failing scenario to a minimal reproduction.

Greedy reduction: try a smaller scenario (other expectations dropped, a run dropped, a
request dropped, prior traffic and warmup removed or halved, every request's max_tokens
halved, arrivals removed), audit it on the same engine, and keep it when the same finding
still fails: the same check, naming the same suspect defect. Passes repeat until nothing
shrinks or the audit budget is spent. Every candidate costs one audit of one scenario (its
runs only); candidates that do not validate cost nothing. Every candidate runs on one
engine, loaded once through an ``EngineSession``.

``minimize`` is the search; ``Minimize`` is ``specseed minimize``: which scenario and finding
to keep (from a bundle's recorded findings or a model.yaml), the search, and where the
minimal scenario is written; ``minimize_for_report`` is what ``specseed report`` does before
it writes an issue body.
"""

from __future__ import annotations

import contextlib
import copy
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from pydantic import ValidationError
from rich.markup import escape

from specseed.checks.findings import FAILING, Finding
from specseed.core.errors import InputError, SpecseedError
from specseed.core.wording import plural
from specseed.engine_adapters.base import EngineAdapter, EngineSettings
from specseed.plan.planning import base_settings, plan_scenario
from specseed.run.results import AuditResult
from specseed.scenarios.loader import LoadedScenario
from specseed.scenarios.schema import AuditConfig, Scenario
from specseed.workflows.base import Workflow
from specseed.workflows.outputs import write_stdout
from specseed.workflows.session import EngineSession

if TYPE_CHECKING:
    from specseed.bundle.format import Bundle

DEFAULT_MAX_AUDITS = 60
AUTO_MINIMIZE_TOKENS = 2000
"""``specseed report`` minimizes a scenario on its own only up to this many tokens
(max_tokens summed over every request of every run): small enough that its audits take
seconds on a CPU."""
ScenarioDict = dict[str, Any]


@dataclass(frozen=True)
class Target:
    """The finding a reduction must keep failing: its check and its first suspect."""

    check: str
    defect: str | None
    comparison: bool

    def matches(self, finding: Finding) -> bool:
        return (
            finding.status in FAILING
            and finding.check == self.check
            and (self.defect is None or any(s.defect == self.defect for s in finding.suspects))
        )

    def describe(self) -> str:
        return self.check + (f" (suspect {self.defect})" if self.defect else "")


def target_of(finding: Finding, cause: str | None = None) -> Target:
    """What to keep failing: ``finding``'s check naming ``cause`` where it is among its
    suspects, else its first suspect."""
    from specseed.checks import CHECKS

    spec = CHECKS.get(finding.check)
    suspects = [s.defect for s in finding.suspects]
    return Target(
        check=finding.check,
        defect=cause if cause in suspects else (suspects[0] if suspects else None),
        comparison=spec is not None and spec.kind == "comparison",
    )


@dataclass(frozen=True)
class Size:
    """How big a scenario is, in the units the minimizer shrinks."""

    requests: int
    runs: int
    tokens: int
    """max_tokens summed over every request of every run."""
    warmup: int
    """Warmup requests summed over runs ("max+N" counted at max_num_requests 8)."""
    prior: int
    """Prior-traffic requests summed over runs."""

    def text(self) -> str:
        parts = [f"{self.requests} requests", f"{self.runs} runs", f"{self.tokens} tokens"]
        if self.warmup:
            parts.append(f"{self.warmup} warmup requests")
        if self.prior:
            parts.append(f"{self.prior} prior requests")
        return ", ".join(parts)


def size_of(scenario: Scenario) -> Size:
    tokens = sum(
        scenario.resolved_request(r).max_tokens for run in scenario.runs for r in run.requests
    )
    return Size(
        requests=len(scenario.requests),
        runs=len(scenario.runs),
        tokens=tokens,
        warmup=sum(sum(run.warmup_sizes(8)) for run in scenario.runs),
        prior=sum(run.prior_traffic.requests if run.prior_traffic else 0 for run in scenario.runs),
    )


def small_enough(scenario: Scenario) -> bool:
    """Whether ``specseed report`` may minimize this scenario without being asked."""
    size = size_of(scenario)
    return size.tokens <= AUTO_MINIMIZE_TOKENS and size.warmup + size.prior <= 64


@dataclass(frozen=True)
class MinimizeResult:
    original: Scenario
    minimal: Scenario
    target: Target
    audits: int
    """Audits run, the first (which confirms the failure) included."""
    steps: tuple[str, ...]
    """The reductions kept, in order."""
    budget_spent: bool
    """True when it stopped on the audit budget rather than at a fixed point."""

    def yaml_text(self, source: str) -> str:
        return scenario_yaml(
            self.minimal,
            f"Minimized by `specseed minimize` from {source} ({size_of(self.original).text()}) "
            f"in {self.audits} audits: {self.target.describe()} still fails.",
        )


class _ScenarioDumper(yaml.SafeDumper):
    """Writes scenarios the way the library's files look: one line per request and run."""


def _flat(value: Any) -> bool:
    if isinstance(value, list):
        return all(not isinstance(v, (list, dict)) for v in value)
    if isinstance(value, dict):
        return all(
            not isinstance(v, dict) and _flat(v) if isinstance(v, list) else not isinstance(v, dict)
            for v in value.values()
        )
    return True


def _represent_dict(dumper: yaml.SafeDumper, data: dict[str, Any]) -> yaml.Node:
    return dumper.represent_mapping("tag:yaml.org,2002:map", data.items(), flow_style=_flat(data))


def _represent_list(dumper: yaml.SafeDumper, data: list[Any]) -> yaml.Node:
    return dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=_flat(data))


def _represent_str(dumper: yaml.SafeDumper, data: str) -> yaml.Node:
    style = ">" if len(data) > 80 else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_ScenarioDumper.add_representer(dict, _represent_dict)
_ScenarioDumper.add_representer(list, _represent_list)
_ScenarioDumper.add_representer(str, _represent_str)


def scenario_yaml(scenario: Scenario, comment: str = "") -> str:
    """A scenario as YAML that reads like the library's files, with a comment on top."""
    data = scenario.model_dump(mode="json", exclude_unset=True)
    head = "".join(f"# {line}\n" for line in _wrap(comment)) if comment else ""
    return head + yaml.dump(data, Dumper=_ScenarioDumper, sort_keys=False, width=92)


def _wrap(text: str, width: int = 92) -> list[str]:
    import textwrap

    return textwrap.wrap(text, width) or [""]


# -- candidates ---------------------------------------------------------------------------


def _fix_references(d: ScenarioDict) -> ScenarioDict | None:
    """Drop runs without requests and expectations left with fewer than two runs."""
    names = set(d["requests"])
    runs = []
    for run in d["runs"]:
        run["requests"] = [r for r in run["requests"] if r in names]
        if "arrivals" in run:
            run["arrivals"] = {k: v for k, v in run["arrivals"].items() if k in names}
        if run["requests"]:
            runs.append(run)
    if not runs:
        return None
    d["runs"] = runs
    run_names = {run["name"] for run in runs}
    expect = []
    for item in d.get("expect", []):
        item["runs"] = [r for r in item["runs"] if r in run_names]
        if item.get("requests") is not None:
            item["requests"] = [r for r in item["requests"] if r in names]
            if not item["requests"]:
                continue
        if len(item["runs"]) >= 2:
            expect.append(item)
    d["expect"] = expect
    return d


def _candidates(
    d: ScenarioDict, target: Target, evidence: Finding
) -> Iterator[tuple[str, ScenarioDict | None]]:
    """Smaller variants of ``d``, the cuts the failing finding suggests first (only its
    affected requests; tokens up to its first divergence), then shorter requests (every later
    audit gets cheaper), then one structural cut at a time."""
    scenario = Scenario.model_validate(d)
    focus = [r for r in evidence.requests if r in d["requests"]]
    for keep_only in (focus, focus[:1]):
        if keep_only and len(keep_only) < len(d["requests"]):
            c = copy.deepcopy(d)
            c["requests"] = {k: v for k, v in c["requests"].items() if k in keep_only}
            yield f"keep only the affected request(s) {', '.join(keep_only)}", _fix_references(c)
        if len(focus) == 1:
            break
    if evidence.diffs:
        last = max(diff.position for diff in evidence.diffs) + 1
        if any(scenario.resolved_request(r).max_tokens > last for r in d["requests"]):
            c = copy.deepcopy(d)
            for name in c["requests"]:
                current = scenario.resolved_request(name).max_tokens
                c["requests"][name]["max_tokens"] = min(current, last)
            yield f"max_tokens cut to the divergence ({last})", c
    longest = max(scenario.resolved_request(r).max_tokens for r in d["requests"])
    if longest > 1:
        c = copy.deepcopy(d)
        for name in c["requests"]:
            current = scenario.resolved_request(name).max_tokens
            c["requests"][name]["max_tokens"] = max(1, current // 2)
        yield f"max_tokens halved (longest {longest} -> {max(1, longest // 2)})", c
    expect = d.get("expect", [])
    keep = [e for e in expect if target.comparison and e["check"] == target.check]
    if len(keep) < len(expect):
        c = copy.deepcopy(d)
        c["expect"] = copy.deepcopy(keep)
        yield "drop the other expectations", c
    for run in reversed(d["runs"]):
        c = copy.deepcopy(d)
        c["runs"] = [r for r in c["runs"] if r["name"] != run["name"]]
        yield f"drop run {run['name']}", _fix_references(c)
    for name in reversed(list(d["requests"])):
        c = copy.deepcopy(d)
        del c["requests"][name]
        yield f"drop request {name}", _fix_references(c)
    for i, run in enumerate(d["runs"]):
        prior = run.get("prior_traffic")
        if prior:
            c = copy.deepcopy(d)
            del c["runs"][i]["prior_traffic"]
            yield f"{run['name']}: no prior traffic", c
            if prior["requests"] > 1:
                c = copy.deepcopy(d)
                c["runs"][i]["prior_traffic"]["requests"] = prior["requests"] // 2
                yield f"{run['name']}: prior traffic {prior['requests'] // 2} requests", c
            if prior.get("max_tokens", 8) > 1:
                c = copy.deepcopy(d)
                c["runs"][i]["prior_traffic"]["max_tokens"] = max(
                    1, prior.get("max_tokens", 8) // 2
                )
                yield f"{run['name']}: prior traffic shorter", c
        warmup = run.get("warmup") or []
        for j, size in enumerate(warmup):
            c = copy.deepcopy(d)
            del c["runs"][i]["warmup"][j]
            yield f"{run['name']}: drop warmup batch {size}", c
            smaller: int | str | None = None
            if isinstance(size, int) and size > 1:
                smaller = size // 2
            elif isinstance(size, str) and size.startswith("max+") and size != "max+1":
                smaller = "max+1"
            if smaller is not None:
                c = copy.deepcopy(d)
                c["runs"][i]["warmup"][j] = smaller
                yield f"{run['name']}: warmup batch {size} -> {smaller}", c
        if run.get("arrivals"):
            c = copy.deepcopy(d)
            del c["runs"][i]["arrivals"]
            yield f"{run['name']}: every request arrives at step 0", c


# -- the search ---------------------------------------------------------------------------


def _audit(
    config: AuditConfig,
    scenario: Scenario,
    base_dir: Path,
    session: EngineSession,
    base: EngineSettings,
) -> AuditResult | None:
    planned = [plan_scenario(LoadedScenario(scenario, "minimize"), base)]
    try:
        return session.run(config, planned, base_dir)
    except SpecseedError:  # the engine refuses the candidate: not a reproduction
        return None


def minimize(
    config: AuditConfig,
    scenario: Scenario,
    base_dir: Path,
    *,
    target: Target | None = None,
    max_audits: int = DEFAULT_MAX_AUDITS,
    adapter: EngineAdapter | None = None,
    on_step: Callable[[int, str, bool], None] | None = None,
    session: EngineSession | None = None,
) -> MinimizeResult:
    """Shrink ``scenario`` while ``target`` (default: its first failing finding) still fails.

    ``on_step(audits, description, kept)`` is called after every audited candidate. Every
    candidate runs on ``session``'s engine (default: a session of its own, on ``adapter``
    when given). Raises ``InputError`` when the scenario does not fail to begin with.
    """
    # Resolved once: every candidate is audited with the same engine settings (the session's
    # when it has them).
    if session is not None and session.settings is not None:
        base = session.settings
    else:
        base = base_settings(config, base_dir)
    if session is None:
        with EngineSession(base, adapter=adapter) as own:
            return minimize(
                config,
                scenario,
                base_dir,
                target=target,
                max_audits=max_audits,
                on_step=on_step,
                session=own,
            )
    session.engine()  # loaded before the search: an engine that cannot run is EngineError
    first = _audit(config, scenario, base_dir, session, base)
    audits = 1
    failing = [f for f in (first.findings if first else []) if f.status in FAILING]
    if target is None:
        if not failing:
            raise InputError(
                f"scenario {scenario.name} does not fail on this engine: nothing to minimize"
            )
        # The audit's first root cause, where it names one class, decides which suspect to
        # keep: a finding that fits two keeps the one attribution chose, not the first listed.
        from specseed.checks.attribution import root_causes

        causes = root_causes(failing)
        cause = causes[0].defects[0] if causes and len(causes[0].defects) == 1 else None
        target = target_of(_clearest(failing, cause), cause)
    elif not any(target.matches(f) for f in failing):
        raise InputError(
            f"scenario {scenario.name}: {target.describe()} does not fail on this engine: "
            "nothing to minimize"
        )
    evidence = next(f for f in failing if target.matches(f))
    current = scenario.model_dump(mode="json", exclude_unset=True)
    steps: list[str] = []
    refused: set[str] = set()
    """Structural cuts that lost the finding once; not tried again on smaller variants."""
    changed = True
    while changed and audits < max_audits:
        changed = False
        for description, candidate in _candidates(current, target, evidence):
            if audits >= max_audits:
                break
            if candidate is None or description in refused:
                continue
            try:
                parsed = Scenario.model_validate(candidate)
            except ValidationError:
                continue
            if target.comparison and not any(e.check == target.check for e in parsed.expect):
                continue
            result = _audit(config, parsed, base_dir, session, base)
            audits += 1
            match = next(
                (f for f in (result.findings if result else []) if target.matches(f)), None
            )
            kept = match is not None
            if on_step is not None:
                on_step(audits, description, kept)
            if not kept and description.startswith(("drop", "keep only", "max_tokens cut")):
                refused.add(description)
            if match is not None:
                evidence = match
                current = parsed.model_dump(mode="json", exclude_unset=True)
                steps.append(description)
                changed = True
                break  # restart from the biggest cuts on the smaller scenario
    return MinimizeResult(
        original=scenario,
        minimal=Scenario.model_validate(redescribed(current, scenario, target)),
        target=target,
        audits=audits,
        steps=tuple(steps),
        budget_spent=changed and audits >= max_audits,
    )


def redescribed(minimal: ScenarioDict, original: Scenario, target: Target) -> ScenarioDict:
    """The minimal scenario with a description and ``covers`` of its own: the original's
    described requests and runs the reductions removed."""
    requests = list(minimal.get("requests", {}))
    runs = [run["name"] for run in minimal.get("runs", [])]
    description = (
        f"Minimized from {original.name}: {target.describe()} still fails with "
        f"{plural(len(requests), 'request')} ({', '.join(requests)}) in "
        f"{plural(len(runs), 'run')} ({', '.join(runs)})."
    )
    covers = [target.defect] if target.defect is not None else []
    return {**minimal, "description": description, "covers": covers}


def _clearest(failing: list[Finding], cause: str | None = None) -> Finding:
    """The finding to keep: one naming ``cause`` (the audit's root cause) where one does,
    with a token diff first (what users file), then the rest."""
    named = [f for f in failing if any(s.defect == cause for s in f.suspects)]
    pool = named or failing
    with_diffs = [f for f in pool if f.diffs and f.suspects]
    with_suspects = [f for f in pool if f.suspects]
    return (with_diffs or with_suspects or pool)[0]


# -- the workflows ------------------------------------------------------------------------


@dataclass(frozen=True)
class MinimizeOutcome:
    """What ``Minimize.run`` returns."""

    scenario: str
    """The scenario shrunk."""
    result: MinimizeResult
    written: tuple[Path, ...]
    """The files the minimal scenario was written to (none when it went to stdout)."""
    exit_code: int = 0


class Minimize(Workflow):
    """``specseed minimize``: shrink a failing scenario of a bundle (keeping the finding
    ``specseed report`` leads with) or of a model.yaml, and write the smallest.

    ``target``: a bundle folder or a model.yaml. ``scenario``, ``check``: which scenario and
    which check to keep failing (defaults: the first failing, the clearest finding).
    ``output``: where to write it (``-``: stdout; default: the bundle's
    ``<scenario>/minimal.yaml``, or ``<scenario>.min.yaml`` for a model.yaml).
    ``engine_from_bundle``: consent to run an engine the bundle names. ``terminal``: print
    each audited candidate and the summary. ``engine_log``: where the engine's own log goes
    (``AuditOutputs.engine_log``).
    """

    def __init__(
        self,
        target: Path,
        *,
        scenario: str | None = None,
        check: str | None = None,
        output: Path | None = None,
        max_audits: int = DEFAULT_MAX_AUDITS,
        engine_from_bundle: bool = False,
        terminal: bool = False,
        adapter: EngineAdapter | None = None,
        engine_log: Path | None = None,
    ) -> None:
        from specseed.workflows.outputs import AuditOutputs

        super().__init__(AuditOutputs(terminal=terminal, engine_log=engine_log))
        self.target = target
        self.scenario = scenario
        self.check = check
        self.output = output
        self.max_audits = max_audits
        self.engine_from_bundle = engine_from_bundle
        self.adapter = adapter

    def _note(self, text: str) -> None:
        consoles = self.consoles()
        if consoles is not None:
            consoles[1].print(text)

    def _write(self, path: Path, text: str) -> None:
        if str(path) == "-":
            write_stdout(text, "minimal scenario")  # OutputError (exit 5) when it cannot
            return
        from specseed.core.files import write_output

        write_output(path, text, "output")  # OutputError (exit 5) when it cannot be written
        self._note(f"wrote {escape(str(path))}")

    def run(self) -> MinimizeOutcome:
        """Choose, shrink, write. ``InputError`` for an unwritable output, an unknown
        scenario or check, a scenario that does not fail, or an engine the bundle names
        without consent."""
        from specseed.workflows.outputs import check_output_paths, check_writable

        check_writable(self.output, "minimal scenario")
        target = self.target
        if not target.is_dir():
            return self._run(store=False)
        check_output_paths([("--output", self.output)], (), bundle=target, bundle_flag="BUNDLE")
        if not os.access(target, os.W_OK):
            if self.output is None:
                raise InputError(
                    f"cannot store the minimal scenario in the bundle {target}: it is read-only",
                    hint="give --output FILE (or --output - for stdout)",
                )
            self._note(f"{escape(str(target))} is read-only: minimal.yaml is not stored in it")
            return self._run(store=False)
        with self.folder_lock(target, "BUNDLE"):  # it writes minimal.yaml into the bundle
            return self._run(store=True)

    def _run(self, *, store: bool) -> MinimizeOutcome:
        from specseed.bundle.format import read_bundle, recorded_scenarios, write_minimal
        from specseed.reporting.causes import root_causes
        from specseed.workflows.consent import engine_consent
        from specseed.workflows.outputs import check_output_paths

        target, scenario, check_id = self.target, self.scenario, self.check
        is_bundle = target.is_dir()
        wanted = None
        candidates: dict[str, LoadedScenario]
        inputs: tuple[Path, ...] = ()
        if is_bundle:
            loaded = read_bundle(target)
            engine_consent(loaded, self.engine_from_bundle, "minimize", self._note)
            config, base_dir = loaded.config, loaded.root
            settings = base_settings(config, base_dir)
            candidates = {s.scenario.name: s for s in recorded_scenarios(loaded)}
            failing = [
                f
                for s in loaded.scenarios
                for f in (s.findings or ())
                if f.status in ("fail", "error") and (check_id is None or f.check == check_id)
            ]
            if scenario is not None:
                failing = [f for f in failing if f.scenario == scenario]
            if failing:
                # The finding `specseed report` leads with: the clearest of the first cause.
                wanted = root_causes(failing)[0].lead
                scenario = wanted.scenario
        else:
            from specseed.plan.resolve import resolve_audit

            resolved = resolve_audit(target)
            config, base_dir, settings = resolved.config, resolved.base_dir, resolved.engine
            candidates = {p.scenario.name: p.loaded for p in resolved.planned}
            inputs = resolved.inputs
        if scenario is None and len(candidates) == 1:
            # A model.yaml or a bundle of one scenario needs no --scenario.
            scenario = next(iter(candidates))
        if scenario is None:
            raise InputError(
                "which scenario? pass --scenario NAME",
                hint=f"scenarios: {', '.join(candidates)}",
            )
        if scenario not in candidates:
            raise InputError(
                f"--scenario {scenario}: not in {target}",
                hint=f"scenarios: {', '.join(candidates)}",
            )
        chosen = candidates[scenario].scenario
        output = self.output
        if not is_bundle:  # beside a model.yaml by default; never over an input
            output = output if output is not None else Path(f"{scenario}.min.yaml")
            check_output_paths([("--output", output)], inputs)
        goal = target_of(wanted) if wanted is not None else None
        if goal is None and check_id is not None:
            from specseed.checks import CHECKS

            if check_id not in CHECKS:
                raise InputError(f"--check {check_id}: unknown check", hint="see specseed checks")
            goal = Target(check_id, None, CHECKS[check_id].kind == "comparison")

        def step(audits: int, description: str, kept: bool) -> None:
            mark = "[green]kept[/]" if kept else "[dim]no[/]"
            self._note(f"[dim]audit {audits}:[/] {escape(description)}: {mark}")

        with self.session(settings, adapter=self.adapter) as session:
            result = minimize(
                config,
                chosen,
                base_dir,
                target=goal,
                max_audits=self.max_audits,
                on_step=step,
                session=session,
            )
        log = self.temporary_log()
        if log is not None:
            from specseed.reporting.console import engine_log_note

            self._note(escape(engine_log_note(log)))
        text = result.yaml_text(candidates[scenario].source)
        written: list[Path] = []
        if output is not None:
            self._write(output, text)
            if str(output) != "-":
                written.append(output)
        if is_bundle and store:
            path = write_minimal(target, scenario, text)
            written.append(path)
            self._note(f"wrote {path} (specseed report {target} uses it)")
        consoles = self.consoles()
        if consoles is not None:
            stop = " (stopped on --max-audits)" if result.budget_spent else ""
            consoles[0].print(
                f"minimized {scenario}: {size_of(result.original).text()} -> "
                f"{size_of(result.minimal).text()} in {result.audits} audits{stop}; "
                f"{result.target.describe()} still fails"
            )
        return MinimizeOutcome(scenario, result, tuple(written))


def minimize_for_report(
    bundle: Bundle,
    findings: list[Finding],
    *,
    forced: bool,
    engine_from_bundle: bool,
    say: Callable[[str], None],
) -> Bundle:
    """``specseed report``'s shrinking: the scenario the report leads with, minimized when
    that is worth it and possible here (``forced``: asked for) and stored in the bundle
    under its lock; ``say`` (Rich markup) what happens. Returns the bundle with the minimal
    scenario in it (also when a read-only bundle cannot store it: the report carries it),
    or ``bundle`` as it was."""
    from specseed.bundle.format import BundleError, recorded_scenarios, write_minimal
    from specseed.core.errors import TraceDirBusy
    from specseed.engine_adapters.registry import get_engine
    from specseed.reporting.causes import root_causes
    from specseed.workflows.consent import engine_consent, self_contained

    causes = root_causes(findings)
    if not causes:
        return bundle
    lead = causes[0].lead
    item = next((s for s in bundle.scenarios if s.name == lead.scenario), None)
    if item is None or item.minimal is not None:
        return bundle
    engine = bundle.config.engine.name
    if forced:
        engine_consent(bundle, engine_from_bundle, "report --minimize", say)
    # On its own, report minimizes only on the self-contained reference engine: a bundle's
    # server, checkpoint or key variable is used only when the user asks for it.
    local = self_contained(bundle.config.engine) or engine_from_bundle
    if not forced and (
        not local or not small_enough(item.scenario) or get_engine(engine).missing_packages()
    ):
        say(
            f"[dim]report: {item.name} not minimized (run specseed minimize "
            f"{escape(str(bundle.root))} to shrink it)[/]"
        )
        return bundle
    loaded = next(s for s in recorded_scenarios(bundle) if s.scenario.name == item.name)
    writable = os.access(bundle.root, os.W_OK)
    try:
        with Workflow.folder_lock(bundle.root) if writable else contextlib.nullcontext():
            say(f"[dim]report: minimizing {item.name} on engine {engine}…[/]")
            result = minimize(bundle.config, item.scenario, bundle.root, target=target_of(lead))
            text = result.yaml_text(loaded.source)
            if writable:
                write_minimal(bundle.root, item.name, text)
    except TraceDirBusy as exc:  # another workflow writes into the bundle right now
        if forced:
            raise
        say(f"[yellow]report: {item.name} not minimized:[/] {escape(exc.message)}")
        return bundle
    except (BundleError, SpecseedError) as exc:
        if forced:
            raise
        say(f"[yellow]report: could not minimize {item.name}:[/] {escape(exc.message)}")
        return bundle
    if writable:
        say(f"[dim]report: stored {item.name}/minimal.yaml ({result.audits} audits)[/]")
    else:
        say(
            f"[yellow]report: {escape(str(bundle.root))} is read-only: the minimal scenario "
            f"of {item.name} ({result.audits} audits) is in this report only[/]"
        )
    minimal = replace(item, minimal=text)
    return replace(bundle, scenarios=tuple(minimal if s is item else s for s in bundle.scenarios))
