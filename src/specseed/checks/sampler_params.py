"""The ``sampler-params`` check: the sampler applies the sampling parameters requests asked for.

Evidence it reads: the rows' ``applied`` record, the temperature, top-k and top-p the engine's
sampler received per token, where an adapter wraps the sampler call and sees them (the vLLM
adapter records what vLLM's rejection sampler applied to the target logits of draft
positions). Engines that do not expose it get no finding (nothing observed, nothing judged).

A temperature the sampler applied that is not the request's (greedy rows: 1, vLLM's
``replace_to``) fails, as does a top-k or top-p that differs where the request set one. No
defect of the catalogue names this: the finding names the parameters, which is what an
engine's maintainer needs ("asked temperature 1, the sampler applied 2.7e-36").
"""

from __future__ import annotations

import math
from collections.abc import Iterator

from specseed.checks.context import CheckContext
from specseed.checks.findings import Finding
from specseed.checks.registry import run_check
from specseed.core.wording import plural
from specseed.traces.records import RunTrace

REL_TOL = 1e-6
"""float32 copies of the asked values compare equal to within this."""


def _same(asked: float, applied: float) -> bool:
    return math.isfinite(applied) and math.isclose(asked, applied, rel_tol=REL_TOL, abs_tol=0.0)


@run_check(
    "sampler-params",
    short="par",
    title="Sampler applies the asked parameters",
    description="The temperature, top-k and top-p the engine's sampler received for each token "
    "are the request's (where the engine exposes what its sampler received).",
    targets=(),
    needs=("steps",),
)
def sampler_params(ctx: CheckContext, trace: RunTrace) -> Iterator[Finding]:
    observed = 0
    wrong: list[str] = []
    affected: set[str] = set()
    for step in trace.steps:
        for row in step.rows:
            applied = row.applied
            if applied is None or row.phase != "scenario":
                continue
            info = trace.request(row.request_id)
            asked_t = info.temperature if info.temperature > 0 else 1.0
            for j, value in enumerate(applied.temperature):
                observed += 1
                problems = []
                if not _same(asked_t, value):
                    problems.append(
                        f"asked temperature {asked_t:g}, the sampler applied {value:.3g}"
                    )
                if info.top_k > 0 and j < len(applied.top_k) and applied.top_k[j] != info.top_k:
                    problems.append(f"asked top_k {info.top_k}, applied {applied.top_k[j]}")
                if (
                    info.top_p < 1
                    and j < len(applied.top_p)
                    and not _same(info.top_p, applied.top_p[j])
                ):
                    problems.append(f"asked top_p {info.top_p:g}, applied {applied.top_p[j]:.3g}")
                if problems:
                    affected.add(row.request_id)
                    wrong.append(
                        f"{row.request_id}: {'; '.join(problems)} (step {step.step}, draft "
                        f"position {j}, {applied.function})"
                    )
    if not observed:
        return
    if not wrong:
        yield Finding(
            status="pass",
            message=f"{trace.name}: the sampler applied the asked parameters to all "
            f"{plural(observed, 'token')} it was seen receiving",
            runs=(trace.name,),
        )
        return
    yield Finding(
        status="fail",
        message=f"{trace.name}: {wrong[0]}"
        + (f" (+{len(wrong) - 1} more)" if len(wrong) > 1 else ""),
        runs=(trace.name,),
        requests=tuple(sorted(affected)),
        details=tuple(wrong[:12]),
    )
