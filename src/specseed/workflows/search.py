"""``specseed search``: draw traffic nobody wrote a scenario for, judge it, confirm what
fails, shrink it, and report it as ``audit --bundle`` would.

``Search`` takes a resolved model.yaml (its engine section; its scenarios are not run) and
the outputs asked for. It checks the outputs, then searches for ``budget`` seconds on one
``EngineSession``: in this process (``search.runner.search_slice``, one share as long as the
budget, with progress per case) or in ``--jobs`` workers (shares of :data:`SLICE_SECONDS`,
each worker on its own engine, progress per share). The false-alarm budget
(``search.statistics``) is set before the search starts and stated in the header.

A confirmed failure stops the search (the workers see a stop file). Its smallest case becomes
a scenario of its own, ``search-<check>``; with ``--bundle`` that scenario is audited again
on the same session into the bundle (model.yaml, the scenario, traces, findings, root
causes: the bundle ``specseed report`` turns into an issue body) and stored as its
``minimal.yaml``. The terminal shows the audit's report of it. Where that audit passes (the
engine gives the same case another verdict on another serve), the failure is reported as
flaky: said under the audit's report and in the verdict, ``flaky`` in the JSON with the
findings the search saw, and still exit 1 (an exact check failed on at least two serves of
the case; a statistical one on every confirmation). The example database lives in
the bundle's folder (``DIR/.hypothesis``, kept by ``--force``) unless ``--database`` names
another (a folder shared by CI machines, or Redis), so a rerun tries the known failures
first. ``--json`` writes the search's own document: ``scenarios_run``, ``failures`` (each
with its minimal scenario as YAML and its root causes), the candidates, the false-alarm
budget and the coverage.

Exit codes: 1 a confirmed failure (flaky or not); 0 none within the budget; 4 no scenario judged (the engine
refused every one, or the budget ended first); 130/143 interrupted (what was searched is still
reported); 5 an output could not be written; 2 bad input; 3 the engine could not run.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
import time
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.markup import escape

from specseed.checks.findings import FAILING, Finding
from specseed.core.errors import InputError, OutputError
from specseed.core.text import for_json, for_terminal
from specseed.run.results import AuditFinished, AuditResult, EventHandler
from specseed.scenarios.loader import LoadedScenario
from specseed.scenarios.schema import Scenario
from specseed.search.coverage import Coverage
from specseed.search.render import (
    SearchProgress,
    clock,
    coverage_table,
    duration,
    failure_line,
)
from specseed.search.runner import (
    Candidate,
    FoundFailure,
    SearchEvent,
    SearchOptions,
    SearchSlice,
    SliceResult,
    search_slice,
    size_text,
)
from specseed.search.statistics import DEFAULT_TARGET, AlarmBudget, alarm_budget
from specseed.search.strategies import KINDS, RequestKind
from specseed.workflows.base import Interrupts, Workflow
from specseed.workflows.exit_codes import decide
from specseed.workflows.minimize import scenario_yaml
from specseed.workflows.outputs import AuditOutputs, check_output_paths, check_writable

if TYPE_CHECKING:
    from specseed.plan.resolve import ResolvedAudit
    from specseed.workflows.session import EngineSession

SLICE_SECONDS = 30.0
"""A worker's share of the search: its progress reaches the terminal share by share."""
DATABASE_FOLDER = ".hypothesis"
"""The example database's folder inside the bundle folder (hidden: a bundle's ``--force``
keeps it)."""
DEFAULT_SHRINK_SECONDS = 120.0


@dataclass(frozen=True)
class ReportedFailure:
    """A confirmed failure as the search reports it."""

    name: str
    """Its scenario's name (``search-<check>``): in the bundle and the JSON."""
    found: FoundFailure
    scenario: Scenario
    yaml: str
    """The minimal scenario as YAML (a comment on top says where it came from)."""

    def reproduced(self, audit: AuditResult | None) -> bool | None:
        """Whether the report's audit of the minimal scenario failed the check again: False
        makes the failure flaky (the engine gave the same case another verdict); None where
        that audit did not run (interrupted first)."""
        findings = self.report_findings(audit)
        if findings is None:
            return None
        return any(f.check == self.found.check and f.status in FAILING for f in findings)

    def report_findings(self, audit: AuditResult | None) -> tuple[Finding, ...] | None:
        """The findings of the report's audit of the minimal scenario (None: not audited)."""
        for scenario in audit.scenarios if audit is not None else ():
            if scenario.scenario.name == self.name:
                return scenario.findings
        return None


@dataclass
class SearchResult:
    """Everything a search produced."""

    seed: int
    budget: float
    alarm: AlarmBudget
    workers: int
    seconds: float = 0.0
    scenarios_run: int = 0
    runs_served: int = 0
    statistical_tests: int = 0
    refused: int = 0
    candidates: list[Candidate] = field(default_factory=list)
    failures: list[ReportedFailure] = field(default_factory=list)
    coverage: Coverage = field(default_factory=Coverage)
    unexplored: tuple[str, ...] = ()
    notes: list[str] = field(default_factory=list)
    """Hypothesis's complaints (an unreliable case), and the like."""
    audit: AuditResult | None = None
    """The audit of the minimal scenarios (with ``--bundle``: the bundle's)."""
    database: str | None = None
    interrupted: str | None = None

    def flaky(self) -> list[ReportedFailure]:
        """The failures the report's audit did not fail again."""
        return [f for f in self.failures if f.reproduced(self.audit) is False]

    def outcome(self) -> str:
        """``fail``, ``flaky`` (every failure passed when audited again for the report),
        ``pass``, ``nothing-checked`` or ``interrupted``: what the exit code means."""
        if self.interrupted:
            return "interrupted"
        if self.failures:
            return "flaky" if len(self.flaky()) == len(self.failures) else "fail"
        return "pass" if self.scenarios_run else "nothing-checked"

    def add(self, part: SliceResult) -> None:
        self.scenarios_run += part.scenarios_run
        self.runs_served += part.runs_served
        self.statistical_tests += part.statistical_tests
        self.refused += part.refused
        self.candidates += part.candidates
        self.coverage.merge(part.coverage)
        self.unexplored = part.unexplored or self.unexplored
        self.notes += part.hypothesis_errors


@dataclass(frozen=True)
class SearchOutcome:
    """What ``Search.run`` returns."""

    result: SearchResult
    exit_code: int


def parse_duration(text: str) -> float:
    """``--budget``: ``90``, ``90s``, ``5m``, ``1h``, ``1h30m`` in seconds (``InputError``
    otherwise)."""
    import re

    match = re.fullmatch(r"\s*(?:(\d+)h)?\s*(?:(\d+)m)?\s*(?:(\d+(?:\.\d+)?)s?)?\s*", text)
    if not text.strip() or match is None or not any(match.groups()):
        raise InputError(
            f"cannot read the duration {text!r}", hint="write e.g. 90s, 5m, 1h or 1h30m"
        )
    hours, minutes, seconds = match.groups()
    total = int(hours or 0) * 3600 + int(minutes or 0) * 60 + float(seconds or 0)
    if total <= 0:
        raise InputError(f"the duration {text!r} is zero", hint="give a positive duration")
    return total


def parse_kinds(text: str) -> tuple[RequestKind, ...]:
    """``--kinds``: a comma-separated subset of seeded, greedy, unseeded (``InputError``
    otherwise), in the order the search draws them."""
    asked = [part.strip() for part in text.split(",") if part.strip()]
    unknown = [part for part in asked if part not in KINDS]
    if not asked or unknown:
        raise InputError(
            f"cannot read the request kinds {text!r}"
            + (f": not a kind: {', '.join(map(repr, unknown))}" if unknown else ""),
            hint=f"name one or more of {', '.join(KINDS)}, comma-separated",
        )
    return tuple(kind for kind in KINDS if kind in asked)


class Search(Workflow):
    """``specseed search`` as one object (the CLI and tests call it the same way).

    ``budget``: seconds to search (drawing new cases stops then; shrinking a failure found
    in time may take up to ``shrink_budget`` more). ``seed``: the search's random seed (the
    same seed draws the same cases in the same order). ``database``: the example database (a
    folder or ``redis://...``; default: ``DIR/.hypothesis`` with a bundle, else none).
    ``jobs``: worker processes (``"auto"``: one per CPU for the reference engine's built-in
    model on the CPU). ``json``: the search's JSON document. ``max_scenarios``,
    ``shrink_scenarios``: caps on the cases judged while drawing (per worker share) and while
    shrinking, for a search that does not depend on the machine's speed. ``adapter``: an
    engine already built (one process).
    """

    def __init__(
        self,
        resolved: ResolvedAudit,
        outputs: AuditOutputs | None = None,
        *,
        budget: float,
        seed: int,
        json: Path | None = None,
        database: str | None = None,
        shrink_budget: float = DEFAULT_SHRINK_SECONDS,
        target: float = DEFAULT_TARGET,
        max_requests: int = 5,
        max_tokens: int = 12,
        statistical: bool = True,
        kinds: tuple[RequestKind, ...] = KINDS,
        max_scenarios: int | None = None,
        shrink_scenarios: int | None = None,
        adapter: Any = None,
        on_event: EventHandler | None = None,
    ) -> None:
        super().__init__(outputs, on_event)
        self.resolved = resolved
        self.budget = budget
        self.seed = seed
        self.json = json
        self.database_spec = database
        self.shrink_budget = shrink_budget
        self.target = target
        self.max_requests = max_requests
        self.max_tokens = max_tokens
        self.statistical = statistical
        self.kinds = kinds
        self.max_scenarios = max_scenarios
        self.shrink_scenarios = shrink_scenarios
        self.adapter = adapter
        self._progress = SearchProgress(None, show=False)
        self._scratch_log: Path | None = None
        """Where the engine's log goes while no bundle exists yet (``engine_log_path``)."""

    # -- before anything runs -------------------------------------------------------------

    def inputs(self) -> tuple[Path, ...]:
        return self.resolved.inputs

    def check_outputs(self) -> None:
        super().check_outputs()
        log = self.outputs.engine_log
        check_output_paths(
            [("--json", self.json), ("--engine-log", None if str(log) == "-" else log)],
            self.inputs(),
        )
        check_writable(self.json, "JSON report")
        spec = self.database_spec
        if spec is not None and spec.startswith(("redis://", "rediss://")):
            try:
                import redis  # noqa: F401
                from hypothesis.extra.redis import RedisExampleDatabase  # noqa: F401
            except ImportError:
                raise InputError(
                    "--database redis://...: the redis package is not installed",
                    hint="pip install redis, or give a folder",
                ) from None
        elif spec is not None:
            check_writable(Path(spec), "example database", directory=True)

    def consoles(self) -> Any:
        """As every workflow's, but with ``--json -`` the report goes to stderr."""
        if self.outputs.terminal and self._out is None and str(self.json) == "-":
            from specseed.core.secrets import SafeConsole
            from specseed.workflows.outputs import StdoutConsole

            self._out, self._err = StdoutConsole(stderr=True), SafeConsole(stderr=True)
        return super().consoles()

    def engine_log_path(self) -> Path | None:
        """``--engine-log``; else, with a bundle, a scratch file while the search runs, whose
        text becomes the bundle's ``engine.log`` once the bundle is written (the folder must
        hold nothing else before)."""
        if self.outputs.engine_log is None and self._scratch_log is not None:
            return self._scratch_log
        return super().engine_log_path()

    def database(self) -> str | None:
        """The example database this search uses."""
        if self.database_spec is not None:
            return self.database_spec
        if self.outputs.bundle is not None:
            return str(self.outputs.bundle / DATABASE_FOLDER)
        return None

    def workers(self) -> int:
        """Worker processes for the search (``--jobs``)."""
        jobs = self.outputs.jobs
        config = self.resolved.config
        if self.adapter is not None:
            return 1
        if config.engine.name == "openai" and jobs not in ("auto", 1):
            raise InputError(
                f"--jobs {jobs}: a server is one engine; two workers' traffic at once would "
                "be each other's neighbours",
                hint="search a server with --jobs 1",
            )
        from specseed.run.parallel import resolve_matrix_jobs, workers_for

        return workers_for(resolve_matrix_jobs(jobs, config), 1 << 16)

    # -- the search -----------------------------------------------------------------------

    def run(self, *, interrupts: Interrupts | None = None) -> SearchOutcome:
        """Search, then report. ``InputError`` before anything runs (an output that cannot
        be written, bad --jobs), ``EngineError`` when the engine cannot start."""
        self.check_outputs()
        workers = self.workers()
        alarm = alarm_budget(self.budget, workers, target=self.target)
        result = SearchResult(self.seed, self.budget, alarm, workers, database=self.database())
        consoles = self.consoles()
        self._progress = SearchProgress(
            consoles[1] if consoles else None, show=self.outputs.terminal and self.outputs.progress
        )
        self._header(result)
        guard = self.guard(interrupts)
        started = time.time()
        with guard, tempfile.TemporaryDirectory(prefix="specseed-search-") as scratch:
            if self.outputs.bundle is not None:
                self._scratch_log = Path(scratch) / "engine.log"
            options = SearchOptions(
                config=self.resolved.config,
                settings=self.resolved.engine,
                base_dir=self.resolved.base_dir,
                seed=self.seed,
                started=started,
                deadline=started + self.budget,
                shrink_seconds=self.shrink_budget,
                confirmations=alarm.confirmations,
                database=result.database,
                stop_file=os.path.join(scratch, "stop"),
                hypothesis_home=os.path.join(scratch, "hypothesis"),
                max_requests=self.max_requests,
                max_tokens=self.max_tokens,
                statistical=self.statistical,
                kinds=self.kinds,
                max_scenarios=self.max_scenarios,
                shrink_scenarios=self.shrink_scenarios,
            )
            try:
                with self.session(
                    self.resolved.engine, adapter=self.adapter, jobs=workers, guard=guard
                ) as session:
                    self._search(session, options, result, workers)
                    result.seconds = time.time() - started
                    self._progress.__exit__()
                    if result.failures:
                        self._report(session, result)
            except KeyboardInterrupt:
                guard.defer()
                result.interrupted = guard.received or "SIGINT"
                result.seconds = time.time() - started
            finally:
                self._progress.__exit__()
            guard.defer()
            self._keep_engine_log(result)
            code = self._finish(result)
        return SearchOutcome(result, code)

    def _header(self, result: SearchResult) -> None:
        engine = self.resolved.engine
        options = getattr(engine.options, "defects", None)
        defects = f", defects: {', '.join(options)}" if options else ""
        self._progress.note(
            f"specseed search: engine {escape(engine.name)} on {engine.device}, contract "
            f"{escape(engine.contract)}{escape(defects)}, budget {duration(self.budget)}, "
            f"seed {self.seed}, {result.workers} worker{'s' * (result.workers != 1)}",
            always=True,
        )
        self._progress.note(f"[dim]{escape(result.alarm.text())}[/]", always=True)
        if result.database:
            self._progress.note(
                f"[dim]example database: {shown(result.database)} (known failures first)[/]",
                always=True,
            )

    def _search(
        self, session: EngineSession, options: SearchOptions, result: SearchResult, workers: int
    ) -> None:
        progress = self._progress
        found: list[FoundFailure] = []
        with progress:
            if session.workers(workers) <= 1:
                engine = session.engine()  # loaded first: the budget is time to search
                now = time.time()
                options = replace(options, started=now, deadline=now + self.budget)
                progress.started = now
                item = SearchSlice(options, 0, self.budget, result.alarm.max_tests)
                part = search_slice(engine, item, self._on_case)
                result.add(part)
                if part.interrupted:
                    raise KeyboardInterrupt
                found += part.failures
            else:
                count = workers * math.ceil(self.budget / SLICE_SECONDS)
                per = result.alarm.tests_per_slice(count)
                items = [SearchSlice(options, i, SLICE_SECONDS, per) for i in range(count)]

                def done(part: SliceResult) -> None:
                    result.add(part)
                    self._slice_done(part)
                    if part.failures and options.stop_file is not None:
                        Path(options.stop_file).touch()

                parts = session.map(
                    self.resolved.config, search_slice, items, on_result=done, doing="searching"
                )
                found += [f for part in parts for f in part.failures]
        result.failures = self._reported(found)

    def _on_case(self, event: SearchEvent) -> None:
        """Progress of the search in this process."""
        part, totals, progress = event.result, self._progress.totals, self._progress
        totals.scenarios, totals.runs = part.scenarios_run, part.runs_served
        check = escape(event.check or "")
        if event.kind == "candidate":
            totals.candidates += 1
            progress.note(f"candidate: {check} fails; confirming by fresh runs")
        elif event.kind == "confirmed":
            totals.confirmed += 1
            totals.shrinking = event.check
            progress.note(
                f"[red]confirmed[/]: {check} after {plural_cases(part.scenarios_run)} "
                f"({clock(time.time() - progress.started)}); shrinking"
            )
        elif event.kind == "refuted":
            totals.refuted += 1
            progress.note(f"[dim]not confirmed: {check} passed again; searching on[/]")
        elif event.kind == "shrunk":
            progress.note(f"[dim]shrunk: {escape(event.size or '')}[/]")
        progress.update()

    def _slice_done(self, part: SliceResult) -> None:
        """Progress of the search in workers: one share done."""
        totals, progress = self._progress.totals, self._progress
        totals.scenarios += part.scenarios_run
        totals.runs += part.runs_served
        for candidate in part.candidates:
            if candidate.during_shrink:
                continue
            totals.candidates += 1
            if candidate.confirmed:
                totals.confirmed += 1
            else:
                totals.refuted += 1
                progress.note(f"[dim]not confirmed: {escape(candidate.check)} passed again[/]")
        for failure in part.failures:
            progress.note(
                failure_line(
                    failure.check,
                    size_text(failure.scenario),
                    failure.shrink_steps,
                    failure.found_after,
                )
            )
        progress.update()
        progress.note(f"[dim]{escape(totals.line(time.time() - progress.started))}[/]")

    def _reported(self, found: Sequence[FoundFailure]) -> list[ReportedFailure]:
        """One failure per check (the smallest case), as a scenario of its own."""
        from specseed.search.runner import _size_key

        best: dict[str, FoundFailure] = {}
        for failure in found:
            kept = best.get(failure.check)
            if kept is None or _size_key(failure.scenario) < _size_key(kept.scenario):
                best[failure.check] = failure
        engine = self.resolved.engine
        reported = []
        for check, failure in best.items():
            name = f"search-{check}"
            description = (
                f"Found by specseed search (seed {self.seed}) on engine {engine.name}: {check} "
                f"fails. Shrunk from {size_text(failure.original)} to "
                f"{size_text(failure.scenario)}."
            )
            data = {**failure.scenario, "name": name, "description": description}
            scenario = Scenario.model_validate(data)
            text = scenario_yaml(
                scenario,
                f"Minimal case of specseed search (seed {self.seed}): {check} fails; confirmed "
                f"by {plural_reruns(failure.confirmations)}, shrunk in "
                f"{failure.shrink_steps} steps.",
            )
            reported.append(ReportedFailure(name, failure, scenario, text))
        return reported

    # -- the report -----------------------------------------------------------------------

    def _report(self, session: EngineSession, result: SearchResult) -> None:
        """The minimal scenarios audited again on the session (into the bundle, with one):
        the report ``audit --bundle`` gives."""
        from specseed.bundle.format import write_minimal
        from specseed.plan.planning import plan_scenarios

        resolved = self.resolved
        loaded = [LoadedScenario(f.scenario, f"search:{f.name}", f.yaml) for f in result.failures]
        planned = plan_scenarios(loaded, resolved.engine)
        scenarios = [(p.loaded, [plan.run for plan in p.plans]) for p in planned]
        with self.bundle(resolved.config, scenarios, resolved.base_dir, resolved.engine) as bundle:
            if bundle is not None:  # already minimal: `specseed report` shrinks nothing
                for failure in result.failures:
                    write_minimal(bundle.root, failure.name, failure.yaml)
            documents = self.documents()
            console = self.terminal_reporter()
            self._progress.note("", always=True)
            self._progress.note(
                "The minimal "
                + ("scenario, audited" if len(loaded) == 1 else "scenarios, audited")
                + " as specseed audit reports it:",
                always=True,
            )
            with console if console is not None else nullcontext():
                audit = session.run(
                    resolved.config,
                    planned,
                    resolved.base_dir,
                    on_event=self.emit,
                    command=self.outputs.command,
                    trace_writer=bundle.trace_writer if bundle is not None else None,
                )
            result.audit = audit
            code = self.write_documents(audit, documents, self._audit_code)
            if console is not None:
                code = self.flush_terminal(lambda: console.finish(audit, code), code)
            self.emit(AuditFinished(audit, code, self.outputs.bundle))
        for failure in result.failures:
            if failure.reproduced(audit) is False:
                self._progress.note(
                    f"[yellow]Not reproduced[/]: {escape(failure.found.check)} passed in this "
                    f"audit of {escape(failure.name)}, though it failed on the same scenario "
                    "in the search: flaky (see the verdict below)",
                    always=True,
                )

    @staticmethod
    def _audit_code(audit: AuditResult, problems: int) -> int:
        """The code the minimal scenarios' documents state: the search confirmed a
        violation, so 1 whatever this one audit of them decides (a rerun that passed is
        reported, not a reason to state 0)."""
        return decide(interrupted=audit.interrupted, violation=True, incomplete=bool(problems))

    def _keep_engine_log(self, result: SearchResult) -> None:
        """The scratch engine log into the bundle, once the bundle was written."""
        log, bundle = self._scratch_log, self.outputs.bundle
        if log is None or bundle is None or result.audit is None or not log.exists():
            return
        from specseed.core.files import write_inside
        from specseed.workflows.engine_log import ENGINE_LOG

        try:  # inside the bundle: never through a link left at its name
            write_inside(bundle, ENGINE_LOG, log.read_text(encoding="utf-8", errors="replace"))
        except OSError as exc:
            result.notes.append(f"the engine log could not be kept: {exc}")

    def _finish(self, result: SearchResult) -> int:
        """The coverage table, the verdict, the JSON document; the exit code."""
        problems = 0
        code = self._code(result, 0)
        if self.json is not None:
            try:
                from specseed.workflows.outputs import write_document

                write_document(self.json, search_json(result, self, code), "JSON report")
            except OutputError as exc:
                problems += 1
                self._progress.note(f"[red]Error:[/] {shown(exc.message)}")
        code = self._code(result, problems)
        consoles = self.consoles()
        if consoles is not None:
            err = consoles[1]
            err.print()
            err.print(coverage_table(result.coverage, result.unexplored))
            for line in self._verdict(result, code):
                err.print(line)
            log = self.temporary_log()
            if log is not None:
                from specseed.reporting.console import engine_log_note

                err.print(f"[dim]{shown(engine_log_note(log))}[/]")
        return code

    @staticmethod
    def _code(result: SearchResult, problems: int) -> int:
        """The audit's order (``exit_codes.decide``): interrupted, a confirmed failure, an
        output not written, no scenario judged."""
        return decide(
            interrupted=result.interrupted,
            violation=bool(result.failures),
            incomplete=bool(problems),
            checked_nothing=not result.scenarios_run,
        )

    def _verdict(self, result: SearchResult, code: int) -> list[str]:
        searched = (
            f"{plural_cases(result.scenarios_run)} ({result.runs_served} runs) in "
            f"{clock(result.seconds)}"
        )
        candidates = result.candidates
        first = [c for c in candidates if not c.during_shrink]
        confirmed = sum(1 for c in first if c.confirmed)
        lines = [
            f"candidates: {len(first)}, confirmed: {confirmed}, not confirmed: "
            f"{len(first) - confirmed}; statistical tests: {result.statistical_tests} of "
            f"{result.alarm.max_tests} allowed"
        ]
        lines += [f"[dim]note: {shown(note)}[/]" for note in result.notes[:3]]
        if result.interrupted:
            lines.append(
                f"[yellow]Interrupted by {result.interrupted}[/] after {searched} (exit {code})"
            )
            return lines
        flaky = result.flaky()
        for failure in result.failures:
            found = failure.found
            lines.append(
                failure_line(
                    found.check, size_text(found.scenario), found.shrink_steps, found.found_after
                )
            )
            if failure.reproduced(result.audit) is False:
                lines.append(
                    f"[yellow]not reproduced[/]: {escape(failure.name)} passed when audited "
                    f"again for the report, after failing {escape(found.check)} in the search "
                    f"and in {plural_reruns(found.confirmations)}: flaky (the engine gives "
                    "the same scenario another verdict on another serve)"
                )
        if result.failures:
            bundle = self.outputs.bundle
            if bundle is not None:
                lines.append(
                    f"bundle: {shown(str(bundle))} (specseed report {shown(str(bundle))} > "
                    "issue.md)" + ("; its traces are of the audit that passed" if flaky else "")
                )
            else:
                lines.append("[dim]give --bundle DIR to keep the traces for a bug report[/]")
            checks = ", ".join(f.found.check for f in result.failures)
            label = " (flaky, not reproduced for the report)" if result.outcome() == "flaky" else ""
            lines.append(f"[red]FAIL[/]{label}: {escape(checks)} after {searched} (exit {code})")
        elif not result.scenarios_run:
            lines.append(
                f"[yellow]NOTHING CHECKED[/]: no scenario was judged within "
                f"{duration(self.budget)} ({result.refused} refused by the engine) (exit {code})"
            )
        else:
            lines.append(
                f"[green]PASS[/]: no failure in {searched} (budget {duration(self.budget)}) "
                f"(family-wise false-alarm rate <= {result.alarm.bound:.1e}) (exit {code})"
            )
        return lines


def shown(text: str) -> str:
    """Text specseed did not write (a path, an engine's or Hypothesis's message) as Rich
    markup that prints it as it is, with nothing that can drive the terminal."""
    return escape(for_terminal(text))


def plural_cases(count: int) -> str:
    return f"{count} scenario{'s' * (count != 1)}"


def plural_reruns(count: int) -> str:
    return f"{count} rerun{'s' * (count != 1)}"


def search_json(result: SearchResult, search: Search, exit_code: int) -> str:
    """The search's JSON document."""
    from specseed.checks.attribution import root_causes
    from specseed.core.version import __version__
    from specseed.reporting.json_report import finding_dict

    engine = search.resolved.engine
    failures = []
    for failure in result.failures:
        found = failure.found
        reproduced = failure.reproduced(result.audit)
        # The report's findings where its audit failed the check again; else those the
        # search saw on the same scenario (a flaky failure keeps its evidence).
        report = failure.report_findings(result.audit) if reproduced else None
        findings = report if report is not None else found.findings
        failing = [f for f in findings if f.status in FAILING]
        failures.append(
            {
                "check": found.check,
                "scenario": failure.name,
                "scenario_yaml": failure.yaml,
                "flaky": reproduced is False,
                "findings_from": "report" if report is not None else "search",
                "root_causes": [cause.to_json() for cause in root_causes(failing)],
                "findings": [finding_dict(f) for f in failing],
                "size": size_text(found.scenario),
                "original_size": size_text(found.original),
                "statistical": found.statistical,
                "confirmations": found.confirmations,
                "found_after_seconds": round(found.found_after, 3),
                "scenarios_before": found.cases_before,
                "shrink_steps": found.shrink_steps,
                "shrink_scenarios": found.shrink_cases,
                "failed_again_in_report": reproduced is True,
            }
        )
    first = [c for c in result.candidates if not c.during_shrink]
    alarm = result.alarm
    document = {
        "specseed_version": __version__,
        "command": search.outputs.command,
        "engine": engine.name,
        "contract": engine.contract,
        "seed": result.seed,
        "budget_seconds": result.budget,
        "seconds": round(result.seconds, 3),
        "workers": result.workers,
        "scenarios_run": result.scenarios_run,
        "runs_served": result.runs_served,
        "refused": result.refused,
        "candidates": [
            {"check": c.check, "statistical": c.statistical, "confirmed": c.confirmed}
            for c in first
        ],
        "false_alarms": {
            "method": "Bonferroni over at most max_statistical_tests tests, each candidate "
            "confirmed by fresh independent reruns at the same alpha; exact checks confirmed "
            "by serving the case again",
            "max_statistical_tests": alarm.max_tests,
            "statistical_tests_run": result.statistical_tests,
            "alpha": alarm.alpha,
            "confirmations": alarm.confirmations,
            "family_wise_bound": alarm.bound,
            "target": alarm.target,
        },
        "failures": failures,
        "coverage": result.coverage.to_json(),
        "unexplored_fields": list(result.unexplored),
        "notes": result.notes,
        "database": result.database,
        "bundle": str(search.outputs.bundle) if search.outputs.bundle else None,
        "interrupted": result.interrupted,
        "outcome": result.outcome(),
        "exit_code": exit_code,
    }
    return json.dumps(for_json(document), indent=2) + "\n"


__all__ = [
    "ReportedFailure",
    "Search",
    "SearchOutcome",
    "SearchResult",
    "parse_duration",
    "search_json",
]
