"""specseed's public Python API: run an audit from Python and read, render or keep its result.

Everything here is covered by semantic versioning (docs/python-api.md); anything imported
from another ``specseed`` module is internal and may change in any release.

    import specseed.api as specseed

    report = specseed.audit("model.yaml")               # a model.yaml
    report = specseed.audit({"engine": {"name": "reference"}, "scenarios": ["batch-position"]})
    report = specseed.audit(engine="http://127.0.0.1:8000")  # a running server (engine openai)
    report = specseed.audit(config, engine=adapter)     # an adapter object the caller built
    report.passed, report.exit_code, report.findings, report.root_causes
    print(report.console()); report.json(); report.junit(); report.issue()

:func:`audit` builds the same :class:`~specseed.workflows.audit.Audit` object ``specseed audit``
runs (on the input ``plan.resolve.resolve_audit`` reads once, then ``Audit.run``); there is no
second path. It imports no torch until the audit runs. Errors are the typed ones of
``specseed.core.errors``, re-exported here: ``ScenarioError`` (an invalid model.yaml, with
file:line problems), ``InputError`` (a bad selection or output path), ``EngineError`` (the
engine could not run).

A ``vllm.LLM`` built by the caller is refused with the reason: an audit needs engines it
constructs itself. Scenario runs change engine arguments (``max_num_requests``,
``max_draft_len``, async scheduling) and a run with unseeded requests needs a fresh global
generator, so the vLLM adapter builds each ``LLM`` from the settings and restarts it when they
change; vLLM does not say which arguments an existing ``LLM`` was built with, and only one live
``LLM`` per process is safe. Give a model.yaml with ``engine.name: vllm`` instead, or a
``VllmEngine`` adapter object (``specseed.engine_adapters.vllm.adapter``).
"""

from __future__ import annotations

import dataclasses
import io
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union

from specseed.core.errors import (
    ArgumentTypeError,
    ArgumentValueError,
    EngineError,
    InputError,
    ScenarioError,
    SpecseedError,
)
from specseed.workflows.outputs import AuditOutputs

if TYPE_CHECKING:
    from specseed.checks.findings import Finding
    from specseed.engine_adapters.base import EngineAdapter
    from specseed.plan.resolve import ResolvedAudit
    from specseed.reporting.causes import RootCause
    from specseed.run.results import AuditResult, ScenarioResult
    from specseed.scenarios.schema import AuditConfig

Source = Union[str, Path, "AuditConfig", Mapping[str, Any], None]
"""What :func:`audit` audits: a model.yaml path, an ``AuditConfig``, its dict form, or None
(the reference engine on the built-in library)."""

Engine = Union["EngineAdapter", str, None]
"""An engine the caller has: an adapter object, or the URL of a running OpenAI-compatible
server (``http://`` or ``https://``)."""


@dataclass(frozen=True)
class Report:
    """The result of one audit, with its renderings. ``result`` is None when nothing ran (a
    shard with no scenario)."""

    result: AuditResult | None
    exit_code: int
    """0 pass, 1 violation, 4 nothing checked, 5 an output or evidence missing
    (docs/exit-codes.md)."""
    bundle: Path | None = None
    """The bundle folder, when one was written."""

    @property
    def passed(self) -> bool:
        """Exit 0: every check that ran held, and something was checked."""
        return self.exit_code == 0

    @property
    def verdict(self) -> str:
        """``pass`` or ``fail`` (``fail`` when any finding fails or errors)."""
        return self.result.verdict if self.result is not None else "pass"

    @property
    def scenarios(self) -> tuple[ScenarioResult, ...]:
        return self.result.scenarios if self.result is not None else ()

    @property
    def findings(self) -> list[Finding]:
        """Every finding, in planned order."""
        return self.result.findings if self.result is not None else []

    @property
    def failures(self) -> list[Finding]:
        """The findings that fail or error."""
        return [f for f in self.findings if f.status in ("fail", "error")]

    @property
    def root_causes(self) -> list[RootCause]:
        """The failures grouped by the defect they point at (``reporting.causes``)."""
        from specseed.reporting.causes import root_causes

        return root_causes(self.failures)

    def scenario(self, name: str) -> Report:
        """This report narrowed to one scenario (``KeyError`` if the audit did not run it)."""
        if self.result is None:
            raise KeyError(name)
        chosen = tuple(s for s in self.result.scenarios if s.scenario.name == name)
        if not chosen:
            raise KeyError(name)
        narrowed = dataclasses.replace(self.result, scenarios=chosen)
        from specseed.workflows.audit import exit_code

        return Report(narrowed, exit_code(narrowed), self.bundle)

    def console(
        self, *, width: int | None = None, summary: bool = False, color: bool = False
    ) -> str:
        """The terminal report as text (``specseed audit``'s stdout), ``width`` columns wide:
        by default the terminal's (``COLUMNS``, else the terminal, else 80)."""
        import shutil

        from specseed.core.secrets import SafeConsole

        if width is None:
            width = shutil.get_terminal_size((80, 24)).columns

        from specseed.reporting.console import render_report

        if self.result is None:
            return "nothing ran\n"
        buffer = io.StringIO()
        # The terminal's console: secrets scrubbed, no padding at the lines' ends.
        console = SafeConsole(
            file=buffer, width=width, force_terminal=color, no_color=not color, highlight=False
        )
        render_report(self.result, console, self.exit_code, summary=summary)
        return buffer.getvalue()

    def json(self) -> str:
        """The JSON report (``--json``)."""
        from specseed.reporting.json_report import render_json

        return render_json(self._need_result(), self.exit_code)

    def junit(self) -> str:
        """The JUnit XML report (``--junit``)."""
        from specseed.reporting.junit import render_junit

        return render_junit(self._need_result())

    def issue(self) -> str:
        """The issue body in Markdown (``specseed report --format issue``); needs the bundle
        (``audit(..., bundle=DIR)``), whose traces and environment it cites."""
        if self.bundle is None:
            raise InputError(
                "the issue body is written from a bundle", hint="run audit(..., bundle=DIR)"
            )
        from specseed.bundle.format import read_bundle
        from specseed.reporting.issue import build_issue, render_markdown

        return render_markdown(build_issue(read_bundle(self.bundle)))

    def _need_result(self) -> AuditResult:
        if self.result is None:
            raise InputError("nothing ran: the audit has no result to render")
        return self.result


def load_config(source: Source = None) -> AuditConfig:
    """An ``AuditConfig`` from a model.yaml path, a dict or an ``AuditConfig`` (None: the
    default): the engine section, its options and the checks validated as an audit validates
    them (``plan.resolve.resolve_audit``; the scenarios it names are validated when it is
    audited). Raises ``ScenarioError`` with every problem found, each with its key and a
    did-you-mean."""
    from specseed.plan.resolve import resolve_audit
    from specseed.scenarios.schema import AuditConfig

    if source is None:
        return AuditConfig()
    if isinstance(source, AuditConfig):
        return source
    return resolve_audit(source, scenarios=False).config


def server_config(base_url: str, model: str | None = None, **options: Any) -> AuditConfig:
    """The ``AuditConfig`` of a running OpenAI-compatible server (engine ``openai``)."""
    from specseed.scenarios.schema import AuditConfig

    engine = {"name": "openai", "options": {"base_url": base_url, "model": model, **options}}
    return AuditConfig.model_validate({"engine": engine})


def _is_vllm_llm(engine: object) -> bool:
    module = type(engine).__module__ or ""
    return module.split(".")[0] == "vllm"


def _narrow(config: AuditConfig, checks: Sequence[str]) -> AuditConfig:
    """Only ``checks`` run: every other registered check is skipped (reported as skip)."""
    if not checks:
        return config
    from specseed.checks import CHECKS

    unknown = [c for c in checks if c not in CHECKS]
    if unknown:
        raise InputError(
            f"unknown check {', '.join(unknown)}", hint=f"known: {', '.join(sorted(CHECKS))}"
        )
    return config.model_copy(update={"checks": config.checks.only(checks, CHECKS)})


def _kind(value: object) -> str:
    return f"{type(value).__name__} {value!r}"[:80]


def _names(argument: str, value: object) -> tuple[str, ...]:
    """``scenarios=`` or ``checks=``: a list of names (a lone string is refused: it would
    be read one letter at a time)."""
    if isinstance(value, str):
        raise ArgumentTypeError(
            f"audit(): {argument} must be a list of names, not the string {value!r}",
            hint=f"{argument}=[{value!r}]",
        )
    if not isinstance(value, (Sequence, set, frozenset)):
        raise ArgumentTypeError(f"audit(): {argument} must be a list of names, not {_kind(value)}")
    bad = [(i, v) for i, v in enumerate(value) if not isinstance(v, str) or not v]
    if bad:
        index, item = bad[0]
        raise ArgumentTypeError(
            f"audit(): {argument}[{index}] must be a non-empty name (a str), not {_kind(item)}"
        )
    return tuple(value)


def _path(argument: str, value: object) -> Path | None:
    if value is None:
        return None
    if not isinstance(value, (str, os.PathLike)):
        raise ArgumentTypeError(
            f"audit(): {argument} must be a path (str or Path), not {_kind(value)}"
        )
    if str(value) == "" or "\x00" in str(value):
        raise ArgumentValueError(f"audit(): {argument} must name a path, not {value!r}")
    return Path(value)


def _check_arguments(
    source: object, engine: object, reports: object, terminal: object, on_event: object
) -> None:
    """The arguments :func:`audit` takes, checked at the boundary: a wrong one is an
    ``ArgumentTypeError`` (a ``TypeError``) naming it, before anything is read or run."""
    from specseed.plan.resolve import ResolvedAudit
    from specseed.scenarios.schema import AuditConfig

    if not (
        source is None
        or isinstance(source, (str, os.PathLike, Mapping, AuditConfig, ResolvedAudit))
    ):
        raise ArgumentTypeError(
            f"audit(): source must be a model.yaml path, a dict or an AuditConfig, not "
            f"{_kind(source)}"
        )
    if isinstance(source, (str, os.PathLike)):
        _path("source", source)
    if engine is not None and not isinstance(engine, str) and not _is_vllm_llm(engine):
        from specseed.engine_adapters.base import EngineAdapter as _Adapter

        if not isinstance(engine, _Adapter):
            raise ArgumentTypeError(
                f"audit(): engine: cannot audit a {type(engine).__name__}",
                hint="give an EngineAdapter, a server URL, or a model.yaml",
            )
    if reports is not None:
        if not isinstance(reports, Mapping):
            raise ArgumentTypeError(
                f"audit(): reports must map format names to paths, not {_kind(reports)}",
                hint='reports={"junit": "junit.xml"}',
            )
        for name, where in reports.items():
            if not isinstance(name, str):
                raise ArgumentTypeError(
                    f"audit(): reports: a format name must be a str, not {_kind(name)}"
                )
            _path(f"reports[{name!r}]", where)
    if not isinstance(terminal, bool):
        raise ArgumentTypeError(f"audit(): terminal must be True or False, not {_kind(terminal)}")
    if on_event is not None and not callable(on_event):
        raise ArgumentTypeError(
            f"audit(): on_event must be a function of one event, not {_kind(on_event)}"
        )


def audit(
    source: Source | ResolvedAudit = None,
    *,
    engine: Engine = None,
    scenarios: Sequence[str] = (),
    checks: Sequence[str] = (),
    bundle: str | Path | None = None,
    json: str | Path | None = None,
    junit: str | Path | None = None,
    reports: Mapping[str, str | Path] | None = None,
    terminal: bool = False,
    base_dir: str | Path | None = None,
    on_event: Any = None,
) -> Report:
    """Run one audit and return its :class:`Report`.

    ``source``: a model.yaml path, an ``AuditConfig`` or its dict, or None (reference engine,
    built-in library); or what ``plan.resolve.resolve_audit`` made of one (not read again).
    ``engine``: an adapter object to run on instead of loading the one the config names
    (each run's settings still come from the config's plans, which the adapter serves), or a
    server URL (the config's engine becomes ``openai`` at that URL). ``scenarios``: only
    these, by name. ``checks``: only these check ids (the others are reported as skip).
    ``bundle``, ``json``, ``junit``: files to write, as the CLI's flags. ``reports``: more
    report files by format, as ``--report FORMAT=PATH`` (``{"junit": "junit.xml"}``;
    ``json=`` and ``junit=`` are the same as ``reports={"json": ...}`` and
    ``{"junit": ...}``). ``terminal``: print the Rich report. ``on_event``: called with every
    ``AuditEvent``, the last being ``AuditFinished``.

    A wrong argument (``scenarios="uptime"``, ``on_event=5``, a path that is not one) is an
    ``ArgumentTypeError`` or ``ArgumentValueError`` naming it: a ``TypeError`` or
    ``ValueError``, and an ``InputError``, raised before anything is read or run.
    """
    from specseed.plan.resolve import ResolvedAudit, resolve_audit
    from specseed.workflows.audit import Audit

    _check_arguments(source, engine, reports, terminal, on_event)
    scenarios = _names("scenarios", scenarios)
    checks = _names("checks", checks)
    bundle = _path("bundle", bundle)
    json = _path("json", json)
    junit = _path("junit", junit)
    base_dir = _path("base_dir", base_dir)

    if engine is not None and _is_vllm_llm(engine):
        raise InputError(
            "an existing vllm.LLM cannot be audited: the audit builds and restarts its engines "
            "from the settings each run asks for",
            hint="give a model.yaml with engine.name: vllm, or a VllmEngine adapter",
        )
    if isinstance(source, ResolvedAudit):  # read already (the pytest plugin's collection)
        resolved = source
        path = resolved.model_yaml or (Path(resolved.source) if resolved.scenario_file else None)
    else:
        path = Path(source) if isinstance(source, (str, Path)) else None
        where = Path(base_dir) if base_dir is not None else None
        resolved = resolve_audit(source, base_dir=where)
    adapter: EngineAdapter | None = None
    if isinstance(engine, str):
        base = resolved.config
        opts = (
            {**base.engine.options, "base_url": engine}
            if base.engine.name == "openai"
            else {"base_url": engine}
        )
        engine_section = {**base.engine.model_dump(mode="json"), "name": "openai", "options": opts}
        with_server = {**base.model_dump(mode="json"), "engine": engine_section}
        config = resolve_audit(with_server, base_dir=resolved.base_dir).config
    else:
        config = resolved.config
        if engine is not None:
            from specseed.engine_adapters.base import EngineAdapter as _Adapter

            if not isinstance(engine, _Adapter):
                raise InputError(
                    f"cannot audit a {type(engine).__name__}",
                    hint="give an EngineAdapter, a server URL, or a model.yaml",
                )
            adapter = engine
    narrowed = _narrow(config, checks)
    if narrowed is not resolved.config:
        # A new engine or fewer checks: the changed config resolved again (no file is read);
        # what was read stays the audit's source and its inputs.
        again = resolve_audit(narrowed, base_dir=resolved.base_dir)
        resolved = dataclasses.replace(
            again,
            source=resolved.source,
            inputs=resolved.inputs,
            model_yaml=resolved.model_yaml,
            scenario_file=resolved.scenario_file,
        )
    outputs = AuditOutputs(
        json=Path(json) if json is not None else None,
        junit=Path(junit) if junit is not None else None,
        reports=tuple((name, Path(path)) for name, path in (reports or {}).items()),
        bundle=Path(bundle) if bundle is not None else None,
        terminal=terminal,
        progress=False,
        scenarios=tuple(scenarios),
        argv=("audit", str(path)) if path is not None else ("audit",),
    )
    runner = Audit(resolved, outputs, adapter=adapter, on_event=on_event)
    outcome = runner.run()
    return Report(outcome.result, outcome.exit_code, outputs.bundle)


__all__ = [
    "ArgumentTypeError",
    "ArgumentValueError",
    "AuditOutputs",
    "Engine",
    "EngineError",
    "InputError",
    "Report",
    "ScenarioError",
    "Source",
    "SpecseedError",
    "audit",
    "load_config",
    "server_config",
]
