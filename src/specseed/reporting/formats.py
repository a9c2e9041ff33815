"""The registry of output formats: what ``specseed audit --report FORMAT=PATH`` can write.

A format is data, described without importing its renderer: a name, a one-line summary, the
file suffix it is usually written with, and its reporter as a lazy ``"module:attr"`` string,
so that listing formats and parsing ``--report`` import nothing heavy. The attribute is either
a :class:`~specseed.reporting.base.DocumentReporter` subclass (built with the sink its text
goes to; it sees every audit event) or a plain function ``render(result, exit_code) -> str``.

The built-in formats are ``json``, ``junit`` (``--json`` and ``--junit`` are their aliases)
and ``html`` (``reporting.html``: a page with figures, also written into every bundle).
Other packages add formats with an entry point in the ``specseed.formats`` group whose object
is an :class:`OutputFormat` of the same name::

    [project.entry-points."specseed.formats"]
    sarif = "mypackage.sarif:FORMAT"

    # mypackage/sarif.py: the whole plugin
    FORMAT = OutputFormat("sarif", "SARIF for code scanning", ".sarif", "mypackage.sarif:render")

    def render(result: AuditResult, exit_code: int) -> str: ...

A name registered twice (by two packages, or by a package and specseed) is an error, and so is
a plugin that cannot be loaded: ``specseed formats`` lists the problem, and asking for that
format says what it is, without a traceback. Listing imports each plugin's entry point module
(where its ``OutputFormat`` lives); a renderer is imported only when its format is asked for.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cache
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import TYPE_CHECKING

from specseed.core.errors import InputError, OutputError, plugin_code
from specseed.core.wording import did_you_mean

if TYPE_CHECKING:
    from specseed.reporting.base import Reporter, Sink

ENTRY_POINT_GROUP = "specseed.formats"
_NAME = re.compile(r"[a-z0-9][a-z0-9._-]*")


@dataclass(frozen=True)
class OutputFormat:
    """One output format, described without importing its renderer."""

    name: str
    """What ``--report NAME=PATH`` calls it: lowercase, no ``=``."""
    summary: str
    """One line: what the document is and who reads it."""
    suffix: str
    """The file suffix it is usually written with (``.json``), for listings and examples."""
    reporter: str
    """``"module:attr"`` of a ``DocumentReporter`` subclass or of a function
    ``render(result: AuditResult, exit_code: int) -> str``."""
    title: str = ""
    """How messages name the document (default: "NAME report")."""
    states_exit_code: bool = False
    """The document states the audit's exit code: it is written after every document that
    does not, so that the code it states counts a failed write of those."""
    source: str = "specseed"
    """Where it comes from: ``specseed`` or the distribution that registered it."""
    problem: str = ""
    """Why it cannot be used (a broken or duplicate plugin); empty when it can."""

    def __post_init__(self) -> None:
        if not _NAME.fullmatch(self.name):
            raise ValueError(
                f"output format name {self.name!r}: use lowercase letters, digits, '.', '-', '_'"
            )

    @property
    def what(self) -> str:
        """The document's name in messages ("JSON report")."""
        return self.title or f"{self.name} report"

    def load(self) -> Callable[[Sink], Reporter]:
        """What builds its reporter from the sink its text goes to. Imports the renderer: a
        format that cannot be used, or whose renderer is neither a ``DocumentReporter``
        class nor a function, is an ``InputError`` naming it and where it comes from.
        Another package's reporter is guarded: a failure while it renders is an
        ``OutputError`` (exit 5), not a traceback."""
        from specseed.reporting.base import DocumentReporter, FunctionReporter, GuardedReporter

        if self.problem:
            raise InputError(f"output format {self.name}: {self.problem}", hint=_fix(self))
        try:
            with plugin_code(f"importing {self.reporter}"):
                target = _import_object(self.reporter)
        except Exception as exc:
            raise InputError(
                f"output format {self.name}: cannot load {self.reporter}: "
                f"{type(exc).__name__}: {exc}",
                hint=_fix(self),
            ) from None
        make: Callable[[Sink], DocumentReporter]
        if isinstance(target, type) and issubclass(target, DocumentReporter):
            make = target
        elif callable(target) and not isinstance(target, type):
            render = target

            def make(sink: Sink) -> DocumentReporter:
                return FunctionReporter(sink, render)

        else:
            raise InputError(
                f"output format {self.name}: {self.reporter} is neither a DocumentReporter "
                "class nor a function (result, exit_code) -> str",
                hint=_fix(self),
            )
        if self.source == "specseed":
            return make
        return lambda sink: GuardedReporter(make(sink), self._render_failed)

    def build(self, sink: Sink) -> Reporter:
        """Its reporter, writing its text to ``sink`` (:meth:`load`, then built)."""
        return self.load()(sink)

    def _render_failed(self, exc: Exception) -> OutputError:
        return OutputError(
            f"cannot write the {self.what}: its renderer {self.reporter} failed: "
            f"{type(exc).__name__}: {exc}",
            hint=_fix(self),
        )


def _fix(fmt: OutputFormat) -> str:
    if fmt.source == "specseed":
        return "this is a bug in specseed; please report it"
    return f"it comes from {fmt.source}: reinstall or remove that package"


def _import_object(target: str) -> object:
    module_name, colon, attr = target.partition(":")
    if not colon or not attr:
        raise ValueError(f"{target!r} is not 'module:attr'")
    obj: object = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


BUILTIN_FORMATS: tuple[OutputFormat, ...] = (
    OutputFormat(
        "json",
        "the machine-readable report: verdict, exit code, findings, root causes, environment",
        ".json",
        "specseed.reporting.json_report:JsonReporter",
        title="JSON report",
        states_exit_code=True,
    ),
    OutputFormat(
        "junit",
        "JUnit XML for CI: one testsuite per scenario, one testcase per finding",
        ".xml",
        "specseed.reporting.junit:JunitReporter",
        title="JUnit report",
    ),
    OutputFormat(
        "html",
        "one self-contained page with figures: verdict, root causes, the evidence drawn "
        "(every bundle holds one)",
        ".html",
        "specseed.reporting.html:render",
        title="HTML report",
        states_exit_code=True,
    ),
)
"""The built-in formats (``--json`` and ``--junit`` write them too)."""


@cache
def formats() -> dict[str, OutputFormat]:
    """Every output format by name: built-in first, then entry points (sorted by name). A
    plugin that cannot be loaded, names a different format, or takes a name already taken
    is kept with its ``problem`` (the name is then unusable until it is fixed)."""
    known: dict[str, OutputFormat] = {}
    for fmt in BUILTIN_FORMATS:
        if fmt.name in known:
            raise ValueError(f"duplicate output format {fmt.name!r}")
        known[fmt.name] = fmt
    for point in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda p: p.name):
        fmt = _from_entry_point(point)
        taken = known.get(fmt.name)
        if taken is not None:
            fmt = replace(
                taken,
                problem=f"registered twice, by {taken.source} and by {fmt.source}",
                source=f"{taken.source}, {fmt.source}",
            )
        known[fmt.name] = fmt
    return known


def _from_entry_point(point: EntryPoint) -> OutputFormat:
    source = _distribution(point)
    try:
        with plugin_code(f"its entry point {point.value}"):
            found = point.load()
    except Exception as exc:  # a broken plugin must not break specseed
        return _broken(point, source, f"cannot load its entry point: {type(exc).__name__}: {exc}")
    if not isinstance(found, OutputFormat):
        return _broken(
            point, source, f"its entry point names a {type(found).__name__}, not an OutputFormat"
        )
    if found.name != point.name:
        return _broken(
            point, source, f"its entry point {point.name} names the format {found.name!r}"
        )
    return replace(found, source=source, problem="")


def _broken(point: EntryPoint, source: str, problem: str) -> OutputFormat:
    return OutputFormat(point.name, "(unusable)", "", point.value, source=source, problem=problem)


def _distribution(point: EntryPoint) -> str:
    dist = getattr(point, "dist", None)
    return f"{dist.name} {dist.version}" if dist is not None else "an entry point"


def format_names() -> tuple[str, ...]:
    return tuple(formats())


def get_format(name: str) -> OutputFormat:
    """The format registered under ``name``; ``InputError`` naming the known ones (and the
    closest) if none, or saying why it cannot be used."""
    known = formats()
    fmt = known.get(name)
    if fmt is None:
        listed = f"formats: {', '.join(known)} (specseed formats lists them)"
        close = did_you_mean(name, known, "")
        raise InputError(
            f"unknown output format {name!r}",
            hint=f"{close} Known {listed}" if close else f"known {listed}",
        )
    if fmt.problem:
        raise InputError(f"output format {name}: {fmt.problem}", hint=_fix(fmt))
    return fmt


def parse_report(text: str) -> tuple[str, Path]:
    """``--report FORMAT=PATH`` as (format, path); ``InputError`` for a missing ``=`` or
    path, or a format nobody registered."""
    name, equals, path = text.partition("=")
    name = name.strip()
    if not equals or not name or not path:
        raise InputError(
            f"--report {text}: expected FORMAT=PATH",
            hint=f"for example --report junit=junit.xml; formats: {', '.join(formats())}",
        )
    try:
        get_format(name)
    except InputError as exc:
        raise InputError(f"--report {text}: {exc.message}", hint=exc.hint) from None
    return name, Path(path)
