"""What every check receives: the scenario, its recorded runs, and the contract held to."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

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

    def max_draft_len(self, trace: RunTrace) -> int:
        return trace.header.engine_config.max_draft_len

    def max_num_requests(self, trace: RunTrace) -> int:
        return trace.header.engine_config.max_num_requests
