"""A sweep's result: the releases it covered, what each one gave, and its ``sweep.json``."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal

from specseed.releases.spec import Release
from specseed.releases.table import (
    SWEEP_FORMAT,
    ReleaseOutcome,
    changes,
    outcome_to_dict,
    transition,
)

Via = Literal["in-process", "http"]
"""How a release is audited: specseed inside its environment, or its server over HTTP."""


@dataclass(frozen=True)
class SweepResult:
    """A sweep's outcomes and what they add up to."""

    package: str
    selection: str
    source: str
    via: Via
    releases: tuple[Release, ...]
    """Every release the sweep covered, oldest first (a bisection runs some of them)."""
    outcomes: tuple[ReleaseOutcome, ...]
    """The releases run, oldest first."""
    bisected: bool
    seconds: float
    interrupted: str | None = None

    @property
    def judged(self) -> list[ReleaseOutcome]:
        return [o for o in self.outcomes if o.judged]

    def to_json(self) -> str:
        found = transition(self.outcomes, self.releases)
        data = {
            "sweep_format": SWEEP_FORMAT,
            "package": self.package,
            "selection": self.selection,
            "source": self.source,
            "via": self.via,
            "bisected": self.bisected,
            "seconds": round(self.seconds, 3),
            "interrupted": self.interrupted,
            "releases": [r.version for r in self.releases],
            "outcomes": [outcome_to_dict(o) for o in self.outcomes],
            "changes": [
                {
                    "older": c.older,
                    "newer": c.newer,
                    "untested_between": list(c.untested_between),
                    "cells": [
                        {
                            "scenario": cell.scenario,
                            "check": cell.check,
                            "before": cell.before.status if cell.before else None,
                            "after": cell.after.status if cell.after else None,
                            "evidence_before": cell.before.evidence if cell.before else "",
                            "evidence_after": cell.after.evidence if cell.after else "",
                        }
                        for cell in c.cells
                    ],
                }
                for c in changes(self.outcomes, self.releases)
            ],
            "transition": None
            if found is None
            else {
                "kind": found.kind,
                "last_before": found.last_before,
                "first_after": found.first_after,
                "untested_between": list(found.untested_between),
                "cells": [f"{c.scenario}/{c.check}" for c in found.cells],
            },
        }
        return json.dumps(data, indent=1) + "\n"


__all__ = ["SweepResult", "Via"]
