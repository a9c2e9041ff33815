"""The check registry: every check with its stable id, family, meaning, targets, the
evidence it needs and (comparisons) its token-suspect rule.

Run checks register with ``@run_check(...)`` and take one recorded run; comparison checks
register with ``@comparison_check(...)`` and take one of a scenario's expectations. A
duplicate id is an error at import time. Ids are the public names users see in reports, in
model.yaml's ``checks.skip`` and in scenarios' ``expect`` (whose schema takes the comparison
ids from here); they never change meaning. The runner stamps each finding with its check's id
(a check never writes it), and skips a check (with the reason) when a run does not expose the
evidence the check ``needs``.

Other packages add run checks with an entry point in the ``specseed.checks`` group naming a
module; importing it registers its checks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from specseed.checks.findings import Finding
from specseed.core.defects import DEFECT_IDS
from specseed.traces.records import EVIDENCE, Evidence, RunTrace

if TYPE_CHECKING:
    from specseed.checks.context import CheckContext
    from specseed.checks.token_suspects import TokenSuspectRule
    from specseed.scenarios.schema import Expectation

CheckKind = Literal["run", "comparison"]
ENTRY_POINT_GROUP = "specseed.checks"

RunCheck = Callable[["CheckContext", RunTrace], Iterator[Finding]]
"""A check of one recorded run."""
ComparisonCheck = Callable[["CheckContext", "Expectation"], Iterator[Finding]]
"""A check comparing the runs one expectation names."""


@dataclass(frozen=True)
class CheckSpec:
    """A registered check."""

    id: str
    short: str
    """Column label in the verdict table."""
    kind: CheckKind
    """``run``: applied to every run on its own; ``comparison``: named by scenarios' expect."""
    title: str
    description: str
    """What the invariant means, in one or two sentences."""
    targets: tuple[str, ...]
    """Defect ids this check is designed to catch."""
    needs: tuple[Evidence, ...]
    """Evidence the check reads; where a run lacks any, the check is skipped with the reason."""


@dataclass(frozen=True)
class RunCheckSpec(CheckSpec):
    func: RunCheck


@dataclass(frozen=True)
class ComparisonCheckSpec(CheckSpec):
    func: ComparisonCheck
    token_suspects: TokenSuspectRule | None = None
    """Its suspects for a divergence seen in tokens only (``checks/token_suspects.py``)."""


CHECKS: dict[str, CheckSpec] = {}


def _validate(check_id: str, targets: tuple[str, ...], needs: tuple[Evidence, ...]) -> None:
    if check_id in CHECKS:
        raise ValueError(f"duplicate check id {check_id!r}")
    unknown = [t for t in targets if t not in DEFECT_IDS]
    if unknown:
        raise ValueError(f"check {check_id}: unknown target defects {unknown}")
    bad = [n for n in needs if n not in EVIDENCE]
    if bad:
        raise ValueError(f"check {check_id}: unknown evidence {bad}")


def run_check(
    check_id: str,
    *,
    short: str,
    title: str,
    description: str,
    targets: tuple[str, ...],
    needs: tuple[Evidence, ...],
) -> Callable[[RunCheck], RunCheck]:
    """Decorator: register a check of one recorded run under a stable id."""

    def wrap(func: RunCheck) -> RunCheck:
        _validate(check_id, targets, needs)
        CHECKS[check_id] = RunCheckSpec(
            check_id, short, "run", title, description, targets, needs, func
        )
        return func

    return wrap


def comparison_check(
    check_id: str,
    *,
    short: str,
    title: str,
    description: str,
    targets: tuple[str, ...],
    needs: tuple[Evidence, ...] = ("tokens",),
    token_suspects: TokenSuspectRule | None = None,
) -> Callable[[ComparisonCheck], ComparisonCheck]:
    """Decorator: register a check that compares the runs of an expectation; scenarios name
    it under ``expect``. ``token_suspects``: the defect classes a divergence seen in tokens
    only fits, given what the compared runs vary."""

    def wrap(func: ComparisonCheck) -> ComparisonCheck:
        _validate(check_id, targets, needs)
        CHECKS[check_id] = ComparisonCheckSpec(
            check_id,
            short,
            "comparison",
            title,
            description,
            targets,
            needs,
            func,
            token_suspects,
        )
        return func

    return wrap


def get_check(check_id: str) -> CheckSpec:
    return CHECKS[check_id]


def checks_of_kind(kind: CheckKind) -> list[CheckSpec]:
    return [spec for spec in CHECKS.values() if spec.kind == kind]


def run_checks() -> list[RunCheckSpec]:
    """Run checks in registration order."""
    return [spec for spec in CHECKS.values() if isinstance(spec, RunCheckSpec)]


def comparison_checks() -> dict[str, ComparisonCheckSpec]:
    """Comparison checks by id."""
    return {i: s for i, s in CHECKS.items() if isinstance(s, ComparisonCheckSpec)}


def registered_comparison_ids() -> tuple[str, ...]:
    """Ids of every registered comparison check (plugins' included), for the scenarios'
    validation context (``scenarios.schema.COMPARISON_IDS_CONTEXT``) and JSON Schema. Import
    it from ``specseed.checks``, whose import registers them all."""
    return tuple(comparison_checks())


def load_plugin_checks() -> list[str]:
    """Import the modules other packages registered under ``specseed.checks``; return the
    problems met (a broken plugin must not break the audit)."""
    import importlib
    from importlib.metadata import entry_points

    from specseed.core.errors import plugin_code

    problems = []
    for point in entry_points(group=ENTRY_POINT_GROUP):
        try:
            with plugin_code(f"its module {point.value}"):
                importlib.import_module(point.value.partition(":")[0])
        except Exception as exc:  # SystemExit too: plugin_code made it a PluginError
            problems.append(
                f"check plugin {point.name}: {type(exc).__name__}: {exc} (its checks do not run)"
            )
    return problems
