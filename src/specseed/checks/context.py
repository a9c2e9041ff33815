"""What every check receives: the scenario, its recorded runs, and the contract held to."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from specseed.core.contracts import RngContract
from specseed.scenarios.schema import Scenario
from specseed.traces.records import RunTrace


@dataclass(frozen=True)
class CheckContext:
    """Input of every check: pure data, no engine."""

    scenario: Scenario
    traces: Mapping[str, RunTrace]
    """Recorded runs by run name."""
    contract: RngContract
    """The RNG layout the audit holds the engine to."""
    distribution_evidence: dict[str, Any] = field(default_factory=dict)
    """Run name to the ``distribution`` check's evidence
    (``distribution.evidence.DistributionEvidence``): read when a bundle stored it (the
    check re-judges it, no oracle), written by the check when it asked the oracle (the
    bundle stores it). The one mutable part: the caller owns the dict."""
    load_checkpoints: bool = True
    """Whether the ``distribution`` check's oracle may load a checkpoint a trace names
    (False when a bundle from elsewhere is re-judged without the user's consent: the path
    is the bundle's, not the user's)."""

    def max_draft_len(self, trace: RunTrace) -> int:
        return trace.header.engine_config.max_draft_len

    def max_num_requests(self, trace: RunTrace) -> int:
        return trace.header.engine_config.max_num_requests
