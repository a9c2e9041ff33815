"""A workflow of its own, on the shared parts: every scenario served once on one engine, the
token streams kept. ARCHITECTURE.md shows it as the worked example of a workflow;
tests/workflows/test_example_workflow.py runs it."""

from __future__ import annotations

from pathlib import Path

from specseed.plan.resolve import ResolvedAudit
from specseed.workflows.base import Interrupts, Workflow
from specseed.workflows.outputs import AuditOutputs

Streams = dict[tuple[str, str, str], tuple[int, ...]]
"""Tokens by (scenario, run, request)."""


class TokenStreams(Workflow):
    """Serve every planned scenario once and return what each request generated."""

    def __init__(self, resolved: ResolvedAudit, outputs: AuditOutputs | None = None) -> None:
        super().__init__(outputs)
        self.resolved = resolved

    def inputs(self) -> tuple[Path, ...]:  # no output may overwrite model.yaml or a scenario
        return self.resolved.inputs

    def run(self, *, interrupts: Interrupts | None = None) -> Streams:
        self.check_outputs()  # before the engine loads: a bad output path costs nothing
        resolved = self.resolved
        with self.guard(interrupts) as guard, self.session(resolved.engine, guard=guard) as s:
            result = s.run(resolved.config, resolved.planned, resolved.base_dir, on_event=self.emit)
        return {
            (scenario.scenario.name, run, request): tokens
            for scenario in result.scenarios
            for run, trace in scenario.traces.items()
            for request, tokens in trace.end.outputs.items()
        }
