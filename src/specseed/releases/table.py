"""What a sweep makes of its releases: one outcome per release, the table of releases by
scenario by check, the changes between neighbouring releases, and where the verdict changed.

A release that could not be installed, or could not run the audit's settings, has an outcome
with no cells: it is reported as such and never counted as a verdict. A cell is the status of
one check on one scenario of one release, the worst of its findings (``fail`` before
``error`` before ``known-limitation`` before ``pass`` before ``skip``), with the message of
the finding that gave it: the evidence a change between two releases is shown with.

Plain Python (no torch): ``sweep.json`` is read back with it.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from packaging.version import Version

from specseed.releases.spec import Release

OutcomeStatus = Literal["ran", "not-installable", "cannot-run", "timed-out", "interrupted"]
"""``ran``: the audit ran and its bundle was read (its cells are verdicts); every other status
says why a release has no verdict."""

RANK = {"fail": 4, "error": 3, "known-limitation": 2, "pass": 1, "skip": 0}
"""Which status a cell shows when a check has several findings in one scenario."""
FAILING = frozenset({"fail", "error"})
"""The statuses that make an audit fail: a verdict changes when a cell enters or leaves them
(``pass`` to ``skip`` is a change in evidence, not in verdict)."""


def failing(cell: Cell | None) -> bool:
    return cell is not None and cell.status in FAILING


SWEEP_FORMAT = "1"


@dataclass(frozen=True)
class Cell:
    """One check on one scenario of one release."""

    status: str
    evidence: str = ""
    """The message of the finding the status comes from (first line, as recorded)."""


@dataclass(frozen=True)
class Timings:
    """Seconds a release took, by phase (None: not measured)."""

    install: float | None = None
    """Getting the environment: the installation, or finding it in the cache."""
    cached: bool = False
    """The environment came from the cache (an earlier sweep installed it)."""
    start: float | None = None
    """In-process: from launching the child to its bundle's first file (interpreter,
    imports, model.yaml); over HTTP: the servers' start until they answer."""
    audit: float | None = None
    """The audit as its bundle's manifest states it (engine starts included in-process)."""
    engine_starts: int | None = None
    """In-process: how often the engine started during the audit (where it says so)."""
    engine_start: float | None = None
    """In-process: the seconds those starts took, part of ``audit``."""

    @property
    def starting(self) -> float | None:
        """Everything before the engine served: the process and the engine's starts."""
        if self.start is None and self.engine_start is None:
            return None
        return (self.start or 0.0) + (self.engine_start or 0.0)

    @property
    def serving(self) -> float | None:
        """The audit without the engine's starts."""
        if self.audit is None:
            return None
        return self.audit - (self.engine_start or 0.0)


@dataclass(frozen=True)
class ReleaseOutcome:
    """What a sweep got from one release."""

    package: str
    version: str
    status: OutcomeStatus
    reason: str = ""
    """Why there is no verdict (uv's reason, the child's error), or notes on the verdict."""
    exit_code: int | None = None
    """The audit's exit code (in the child, or the HTTP audit)."""
    verdict: str | None = None
    """``pass`` or ``fail`` as the release's bundle states it."""
    cells: dict[str, dict[str, Cell]] = field(default_factory=dict)
    """scenario -> check id -> cell."""
    via: str = "in-process"
    """``in-process`` (specseed inside the release's environment) or ``http`` (the release's
    server on loopback, audited from here)."""
    observed: str = ""
    """What the engine exposed, as the traces' headers say (the adapter's notes)."""
    engine: dict[str, str] = field(default_factory=dict)
    """Package versions the release's bundle recorded (what really ran)."""
    timings: Timings = field(default_factory=Timings)
    bundle: str | None = None
    """The release's bundle, relative to the sweep folder."""

    @property
    def release(self) -> Release:
        return Release(self.package, self.version)

    @property
    def judged(self) -> bool:
        return self.status == "ran" and bool(self.cells)

    def cell(self, scenario: str, check: str) -> Cell | None:
        return self.cells.get(scenario, {}).get(check)

    def failing(self) -> set[tuple[str, str]]:
        return {
            (s, c)
            for s, checks in self.cells.items()
            for c, cell in checks.items()
            if cell.status in ("fail", "error")
        }


def cells_from_findings(findings: Iterable[Any]) -> dict[str, dict[str, Cell]]:
    """The cells of one release from its findings (anything with ``scenario``, ``check``,
    ``status`` and ``message``)."""
    cells: dict[str, dict[str, Cell]] = {}
    for finding in findings:
        row = cells.setdefault(str(finding.scenario), {})
        check = str(finding.check)
        status = str(finding.status)
        here = row.get(check)
        if here is None or RANK.get(status, 0) > RANK.get(here.status, 0):
            message = str(finding.message).splitlines()[0] if finding.message else ""
            row[check] = Cell(status, message)
    return cells


# -- changes between releases -------------------------------------------------------------------


@dataclass(frozen=True)
class CellChange:
    """One cell that differs between two neighbouring releases that both ran."""

    scenario: str
    check: str
    before: Cell | None
    after: Cell | None


@dataclass(frozen=True)
class Change:
    """Two neighbouring judged releases (in the sweep's order, releases without a verdict
    skipped) whose cells differ, and how many releases between them were not run."""

    older: str
    newer: str
    cells: tuple[CellChange, ...]
    untested_between: tuple[str, ...] = ()
    """Releases between the two that the sweep did not judge (bisection skipped them, or
    they could not be installed or run): the change happened in one of them or in ``newer``."""


def ordered(outcomes: Iterable[ReleaseOutcome]) -> list[ReleaseOutcome]:
    return sorted(outcomes, key=lambda o: Version(o.version))


def changes(
    outcomes: Sequence[ReleaseOutcome],
    releases: Sequence[Release] | None = None,
    *,
    verdicts_only: bool = False,
) -> list[Change]:
    """Every change between neighbouring judged releases, oldest first. ``releases``: every
    release the sweep covered (to name the ones between two neighbours it did not judge).
    ``verdicts_only``: only cells that enter or leave a failing status."""
    judged = [o for o in ordered(outcomes) if o.judged]
    every = sorted({r.version for r in releases or ()} | {o.version for o in outcomes}, key=Version)
    found = []
    for older, newer in itertools.pairwise(judged):
        diff = []
        for scenario in sorted(set(older.cells) | set(newer.cells)):
            for check in sorted(
                set(older.cells.get(scenario, {})) | set(newer.cells.get(scenario, {}))
            ):
                a, b = older.cell(scenario, check), newer.cell(scenario, check)
                moved = (
                    failing(a) != failing(b)
                    if verdicts_only
                    else ((a.status if a else None) != (b.status if b else None))
                )
                if moved:
                    diff.append(CellChange(scenario, check, a, b))
        if diff:
            lo, hi = Version(older.version), Version(newer.version)
            between = tuple(v for v in every if lo < Version(v) < hi)
            found.append(Change(older.version, newer.version, tuple(diff), between))
    return found


@dataclass(frozen=True)
class Transition:
    """Where the verdict changed: the last release judged like the oldest and the first
    judged like the newest (``kind``: ``regression`` when the newest fails what the oldest
    passed, ``fix`` the other way round)."""

    kind: Literal["regression", "fix", "change"]
    last_before: str
    first_after: str
    cells: tuple[CellChange, ...]
    untested_between: tuple[str, ...]


def transition(
    outcomes: Sequence[ReleaseOutcome], releases: Sequence[Release] | None = None
) -> Transition | None:
    """The first verdict change between neighbouring judged releases that matches the
    difference between the oldest and the newest judged release (None: their verdicts agree
    on every cell, or fewer than two releases were judged)."""
    judged = [o for o in ordered(outcomes) if o.judged]
    if len(judged) < 2:
        return None
    target = target_cells(judged[0], judged[-1])
    if not target:
        return None
    for change in changes(outcomes, releases, verdicts_only=True):
        moved = tuple(c for c in change.cells if (c.scenario, c.check) in target)
        if moved:
            return Transition(
                _kind(moved), change.older, change.newer, moved, change.untested_between
            )
    return None


def target_cells(old: ReleaseOutcome, new: ReleaseOutcome) -> set[tuple[str, str]]:
    """The cells whose verdict (failing or not) differs between two releases, where both
    have one."""
    keys = {(s, c) for s, row in old.cells.items() for c in row} & {
        (s, c) for s, row in new.cells.items() for c in row
    }
    return {
        k
        for k in keys
        if (cell_old := old.cell(*k)) is not None
        and (cell_new := new.cell(*k)) is not None
        and failing(cell_old) != failing(cell_new)
    }


def _kind(cells: Sequence[CellChange]) -> Literal["regression", "fix", "change"]:
    worse = sum(failing(c.after) and not failing(c.before) for c in cells)
    if worse == len(cells):
        return "regression"
    if worse == 0:
        return "fix"
    return "change"


# -- sweep.json ----------------------------------------------------------------------------


def outcome_to_dict(outcome: ReleaseOutcome) -> dict[str, Any]:
    return {
        "package": outcome.package,
        "version": outcome.version,
        "status": outcome.status,
        "reason": outcome.reason,
        "exit_code": outcome.exit_code,
        "verdict": outcome.verdict,
        "via": outcome.via,
        "observed": outcome.observed,
        "engine": dict(outcome.engine),
        "timings": {
            "install": outcome.timings.install,
            "cached": outcome.timings.cached,
            "start": outcome.timings.start,
            "audit": outcome.timings.audit,
            "engine_starts": outcome.timings.engine_starts,
            "engine_start": outcome.timings.engine_start,
        },
        "bundle": outcome.bundle,
        "cells": {
            scenario: {
                c: {"status": cell.status, "evidence": cell.evidence} for c, cell in row.items()
            }
            for scenario, row in outcome.cells.items()
        },
    }


def outcome_from_dict(data: Mapping[str, Any]) -> ReleaseOutcome:
    timings = dict(data.get("timings") or {})
    cells = {
        str(scenario): {
            str(check): Cell(str(cell.get("status", "")), str(cell.get("evidence", "")))
            for check, cell in dict(row).items()
        }
        for scenario, row in dict(data.get("cells") or {}).items()
    }
    return ReleaseOutcome(
        package=str(data["package"]),
        version=str(data["version"]),
        status=data["status"],
        reason=str(data.get("reason", "")),
        exit_code=data.get("exit_code"),
        verdict=data.get("verdict"),
        cells=cells,
        via=str(data.get("via", "in-process")),
        observed=str(data.get("observed", "")),
        engine={str(k): str(v) for k, v in dict(data.get("engine") or {}).items()},
        timings=Timings(
            install=timings.get("install"),
            cached=bool(timings.get("cached", False)),
            start=timings.get("start"),
            audit=timings.get("audit"),
            engine_starts=timings.get("engine_starts"),
            engine_start=timings.get("engine_start"),
        ),
        bundle=data.get("bundle"),
    )


__all__ = [
    "RANK",
    "SWEEP_FORMAT",
    "Cell",
    "CellChange",
    "Change",
    "OutcomeStatus",
    "ReleaseOutcome",
    "Timings",
    "Transition",
    "cells_from_findings",
    "changes",
    "failing",
    "ordered",
    "outcome_from_dict",
    "outcome_to_dict",
    "target_cells",
    "transition",
]
