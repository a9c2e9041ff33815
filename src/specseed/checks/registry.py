"""The check registry: every check with its stable id, family, meaning and targets.

Checks register with ``@register(...)``. A duplicate id is an error at import time. Ids are
the public names users see in reports, in model.yaml's ``checks.skip`` and in scenarios'
``expect``; they never change meaning.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Literal

from specseed.checks.findings import Finding
from specseed.defects import DEFECT_IDS

CheckKind = Literal["run", "comparison"]


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
    func: Callable[..., Iterator[Finding]]


CHECKS: dict[str, CheckSpec] = {}


def register(
    check_id: str,
    *,
    short: str,
    kind: CheckKind,
    title: str,
    description: str,
    targets: tuple[str, ...],
) -> Callable[[Callable[..., Iterator[Finding]]], Callable[..., Iterator[Finding]]]:
    """Decorator: add a check function to the registry under a stable id."""
    unknown = [t for t in targets if t not in DEFECT_IDS]
    if unknown:
        raise ValueError(f"check {check_id}: unknown target defects {unknown}")

    def wrap(func: Callable[..., Iterator[Finding]]) -> Callable[..., Iterator[Finding]]:
        if check_id in CHECKS:
            raise ValueError(f"duplicate check id {check_id!r}")
        CHECKS[check_id] = CheckSpec(check_id, short, kind, title, description, targets, func)
        return func

    return wrap


def get_check(check_id: str) -> CheckSpec:
    return CHECKS[check_id]


def checks_of_kind(kind: CheckKind) -> list[CheckSpec]:
    return [spec for spec in CHECKS.values() if spec.kind == kind]
