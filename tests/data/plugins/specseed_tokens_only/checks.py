"""A run check from another package (registered on import, through ``specseed.checks``)."""

from __future__ import annotations

from collections.abc import Iterator

from specseed.checks.context import CheckContext
from specseed.checks.findings import Finding
from specseed.checks.registry import run_check
from specseed.traces.records import RunTrace


@run_check(
    "plugin-outputs-nonempty",
    short="nonempty",
    title="Every scenario request produced tokens",
    description="A scenario request that finished produced at least one token.",
    targets=(),
    needs=("tokens",),
)
def outputs_nonempty(ctx: CheckContext, trace: RunTrace) -> Iterator[Finding]:
    empty = sorted(r for r, tokens in trace.end.outputs.items() if not tokens)
    status = "fail" if empty else "pass"
    yield Finding(status=status, message=f"{trace.name}: empty outputs: {empty or 'none'}")
