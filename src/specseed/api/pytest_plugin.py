"""The pytest plugin (entry point ``pytest11: specseed``): an audit's scenarios as test items.

``pytest --specseed model.yaml`` (or ``specseed_model = model.yaml`` in the ini file) adds one
test item per scenario of the audit, ``specseed::<scenario>``. The audit runs once, on the
first item that runs, over the items still selected (``-k`` works), on one engine; each item
then passes or fails with that scenario's console report. ``--specseed-scenario NAME`` and
``--specseed-check ID`` narrow the audit (repeatable); ``--specseed-bundle DIR`` keeps the
bug-report bundle in DIR when a scenario fails.

Tests that build their own engine take the ``specseed_audit`` fixture: a callable that runs
``specseed.api.audit`` with the ``@pytest.mark.specseed(scenarios=[...], checks=[...])``
marker's selection and ``--specseed-bundle``, and fails the test with the console report.

This module is imported at every pytest start where specseed is installed: it imports only
pytest and the standard library at the top; the audit (and torch) load when a specseed item
or the fixture runs.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from specseed.api import Report
    from specseed.plan.resolve import ResolvedAudit

_STATE = pytest.StashKey["_Session"]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("specseed", "specseed reproducibility audit")
    group.addoption(
        "--specseed",
        metavar="MODEL_YAML",
        default=None,
        help="audit this model.yaml: one test item per scenario (specseed::<scenario>)",
    )
    group.addoption(
        "--specseed-scenario",
        metavar="NAME",
        action="append",
        default=[],
        help="only this scenario (repeatable)",
    )
    group.addoption(
        "--specseed-check",
        metavar="ID",
        action="append",
        default=[],
        help="only this check id; the others are reported as skip (repeatable)",
    )
    group.addoption(
        "--specseed-bundle",
        metavar="DIR",
        default=None,
        help="write the bug-report bundle to DIR when a scenario fails",
    )
    parser.addini("specseed_model", "model.yaml to audit (as --specseed)", default="")


def pytest_configure(config: pytest.Config) -> None:
    _bundle_dir(config)  # a file or a missing parent is a usage error before anything runs
    config.addinivalue_line(
        "markers",
        "specseed(scenarios=None, checks=None): the scenarios and checks the specseed_audit "
        "fixture runs",
    )
    _bundle_dir(config)  # a bad --specseed-bundle stops pytest here, not after the audit


_MARKER_ARGUMENTS = ("scenarios", "checks")


def _model_yaml(config: pytest.Config) -> Path | None:
    given = config.getoption("--specseed") or config.getini("specseed_model")
    if not given:
        return None
    path = Path(given)
    return path if path.is_absolute() else Path(config.invocation_params.dir) / path


def _bundle_dir(config: pytest.Config) -> Path | None:
    """``--specseed-bundle DIR`` as a path: a folder, or a new one in an existing folder
    (``pytest.UsageError`` for a file or a missing parent)."""
    given = config.getoption("--specseed-bundle")
    if not given:
        return None
    path = Path(given)
    path = path if path.is_absolute() else Path(config.invocation_params.dir) / path
    if os.path.lexists(path) and not path.is_dir():
        raise pytest.UsageError(
            f"--specseed-bundle {given}: not a folder (a file is there); give a folder to keep "
            "failing audits' bundles in"
        )
    if not path.parent.is_dir():
        raise pytest.UsageError(
            f"--specseed-bundle {given}: the folder {path.parent} does not exist; create it first"
        )
    return path


def _marker_names(marker: pytest.Mark | None, argument: str) -> list[str]:
    """``@pytest.mark.specseed(scenarios=[...])``'s names, checked: a lone string or a
    non-string name is a ``TypeError`` naming the marker's argument."""
    value = marker.kwargs.get(argument) if marker is not None else None
    if value is None:
        return []
    if isinstance(value, str) or not isinstance(value, (list, tuple, set, frozenset)):
        raise TypeError(
            f"@pytest.mark.specseed({argument}=...) must be a list of names, not "
            f"{type(value).__name__} {value!r}"
        )
    bad = [v for v in value if not isinstance(v, str) or not v]
    if bad:
        raise TypeError(
            f"@pytest.mark.specseed({argument}=...): {bad[0]!r} is not a name (a non-empty str)"
        )
    return list(value)


@contextmanager
def _torch_quiet() -> Iterator[None]:
    """torch warns "Failed to initialize NumPy" when it is first imported without numpy,
    which specseed does not need; pytest shows every warning a test raises, so the audit
    that imports torch hides that one (``specseed/__init__.py`` does the same outside
    pytest, whose per-test filters replace it)."""
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message="Failed to initialize NumPy", category=UserWarning
        )
        yield


def keep_bundle(report: Report, target: Path | None) -> Path | None:
    """Copy a failed audit's bundle (written to a temporary folder) to ``target``: into it
    when it is new or empty, else into a new folder of its own inside it
    (``specseed-<name>``, ``-2``, ...): nothing there is written over or written through."""
    if target is None or report.bundle is None or report.passed:
        return None
    if os.path.lexists(target) and not (target.is_dir() and not any(target.iterdir())):
        base = target / f"specseed-{Path(report.bundle).name}"
        target, n = base, 1
        while os.path.lexists(target):
            n += 1
            target = base.with_name(f"{base.name}-{n}")
    shutil.copytree(report.bundle, target, dirs_exist_ok=target.is_dir())
    return target


class _Session:
    """The audit of ``--specseed``: planned at collection, run once for the selected items."""

    def __init__(self, config: pytest.Config, model_yaml: Path) -> None:
        self.config = config
        self.model_yaml = model_yaml
        self.scenarios: list[str] = list(config.getoption("--specseed-scenario"))
        self.checks: list[str] = list(config.getoption("--specseed-check"))
        self.selected: list[str] = []
        """The scenarios whose items are still selected when the first of them runs."""
        self.report: Report | None = None
        self.bundle: Path | None = None
        self.error: BaseException | None = None
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self.resolved: ResolvedAudit | None = None
        """The audit as read at collection (``names``), run without reading it again."""

    def names(self) -> list[str]:
        """The scenario names of the audit (after ``--specseed-scenario``), torch-free."""
        from specseed.plan.resolve import resolve_audit

        self.resolved = resolve_audit(self.model_yaml)
        names = [p.scenario.name for p in self.resolved.planned]
        unknown = [n for n in self.scenarios if n not in names]
        if unknown:
            from specseed.workflows.audit import unknown_scenarios

            raise unknown_scenarios(unknown, self.resolved, "--specseed-scenario")
        return [n for n in names if not self.scenarios or n in self.scenarios]

    def run(self, session: pytest.Session) -> Report:
        """The audit of the items still selected, run on the first of them."""
        if self.error is not None:
            raise self.error
        if self.report is not None:
            return self.report
        from specseed.api import audit

        self.selected = [i.name for i in session.items if isinstance(i, ScenarioItem)]
        target = _bundle_dir(self.config)
        bundle = None
        if target is not None:
            self._tmp = tempfile.TemporaryDirectory(prefix="specseed-bundle-")
            bundle = Path(self._tmp.name) / "bundle"
        try:
            with _torch_quiet():
                self.report = audit(
                    self.resolved or self.model_yaml,
                    scenarios=self.selected,
                    checks=self.checks,
                    bundle=bundle,
                )
        except BaseException as exc:  # every item reports the same cause, the audit runs once
            self.error = exc
            raise
        self.bundle = keep_bundle(self.report, target)
        return self.report

    def close(self) -> None:
        if self._tmp is not None:
            self._tmp.cleanup()


class SpecseedScenarioFailed(Exception):
    """A scenario's checks failed; the message is its console report."""


class SpecseedCollector(pytest.Collector):
    """The audit of ``--specseed``: its scenarios as items."""

    def collect(self) -> list[pytest.Item]:
        state = self.config.stash[_STATE]
        return [ScenarioItem.from_parent(self, name=name) for name in state.names()]


class ScenarioItem(pytest.Item):
    """One scenario of the audit; fails with the scenario's console report."""

    def runtest(self) -> None:
        state = self.config.stash[_STATE]
        report = state.run(self.session).scenario(self.name)
        if not report.passed:
            text = report.console()
            if state.bundle is not None:
                text += f"\nbundle: {state.bundle}\n"
            raise SpecseedScenarioFailed(text)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if isinstance(excinfo.value, SpecseedScenarioFailed):
            return str(excinfo.value)
        from specseed.core.errors import SpecseedError

        if isinstance(excinfo.value, SpecseedError):
            return _describe(excinfo.value)
        return str(super().repr_failure(excinfo))

    def reportinfo(self) -> tuple[Path, int | None, str]:
        state = self.config.stash[_STATE]
        return state.model_yaml, None, f"specseed::{self.name}"


@pytest.hookimpl(tryfirst=True)  # before -k and -m deselect: they apply to these items too
def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    model_yaml = _model_yaml(config)
    if model_yaml is None:
        return
    state = _Session(config, model_yaml)
    config.stash[_STATE] = state
    collector = SpecseedCollector.from_parent(session, name="specseed", nodeid="specseed")
    from specseed.core.errors import SpecseedError

    try:
        items.extend(collector.collect())
    except SpecseedError as exc:  # an invalid model.yaml: its problems, not a traceback
        raise pytest.UsageError(_describe(exc)) from None


def _describe(exc: BaseException) -> str:
    from specseed.core.errors import ScenarioError, SpecseedError

    if not isinstance(exc, SpecseedError):
        return str(exc)
    problems = exc.problems if isinstance(exc, ScenarioError) else []
    hint = [f"hint: {exc.hint}"] if exc.hint else []
    return "\n".join([f"specseed: {exc.message}", *problems, *hint])


def pytest_unconfigure(config: pytest.Config) -> None:
    state = config.stash.get(_STATE, None)
    if state is not None:
        state.close()


class SpecseedAudit:
    """The ``specseed_audit`` fixture: ``specseed_audit(source, engine=...)`` runs an audit
    with the test's ``specseed`` marker and fails the test with the console report."""

    def __init__(
        self, scenarios: Sequence[str], checks: Sequence[str], bundle: Path | None, tmp: Path
    ) -> None:
        self.scenarios = list(scenarios)
        self.checks = list(checks)
        self.bundle_target = bundle
        self._tmp = tmp
        self.report: Report | None = None
        self.bundle: Path | None = None

    def __call__(
        self, source: Any = None, *, engine: Any = None, check: bool = True, **kwargs: Any
    ) -> Report:
        """Run the audit (``specseed.api.audit``'s arguments); with ``check``, fail the test
        unless it passes."""
        from specseed.api import audit

        kwargs.setdefault("scenarios", self.scenarios)
        kwargs.setdefault("checks", self.checks)
        if self.bundle_target is not None:
            kwargs.setdefault("bundle", self._tmp / "specseed-bundle")
        with _torch_quiet():
            report = audit(source, engine=engine, **kwargs)
        self.report = report
        self.bundle = keep_bundle(report, self.bundle_target)
        if check and not report.passed:
            where = f"\nbundle: {self.bundle}\n" if self.bundle is not None else ""
            pytest.fail(report.console() + where, pytrace=False)
        return report


@pytest.fixture
def specseed_audit(request: pytest.FixtureRequest, tmp_path: Path) -> SpecseedAudit:
    """Run specseed on an engine the test built; ``@pytest.mark.specseed(scenarios=[...],
    checks=[...])`` picks what runs."""
    marker = request.node.get_closest_marker("specseed")
    if marker is not None:
        unknown = sorted(set(marker.kwargs) - set(_MARKER_ARGUMENTS)) + (
            ["positional arguments"] if marker.args else []
        )
        if unknown:
            raise TypeError(
                f"@pytest.mark.specseed takes scenarios= and checks= only, not {', '.join(unknown)}"
            )
    scenarios = _marker_names(marker, "scenarios")
    checks = _marker_names(marker, "checks")
    scenarios = scenarios or list(request.config.getoption("--specseed-scenario"))
    checks = checks or list(request.config.getoption("--specseed-check"))
    return SpecseedAudit(scenarios, checks, _bundle_dir(request.config), tmp_path)
