"""A bundle never vouches for itself: each trace is held to the place it sits in.

A trace file ``<scenario>/<run>.jsonl`` must be that run's recording: its header names that
scenario and run, the engine settings the bundle's model.yaml and the run's overrides give
(a K = 0 baseline copied over a speculative run says K = 0), and the requests the scenario
serves in that run, in order, with their seeds, sampling parameters and prompts; its end
record's outputs are the tokens its steps emitted (where the engine exposed steps), for the
run's requests only, none longer than its ``max_tokens``. The manifest lists the runs the
scenario defines. What contradicts is listed (``contradictions``) and the reader refuses the
bundle: a bundle whose files disagree is damaged or crafted, and nothing in it is judged.

Only what the recording determines is compared; what a foreign machine legitimately changes
(paths, versions, the engine's own options, timings) is not.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from specseed.scenarios.schema import AuditConfig, RunSpec, Scenario
from specseed.traces.records import (
    REQUEST_SAMPLING,
    RequestInfo,
    RunTrace,
    child_id,
    child_seed,
)

SHARED_SETTINGS = (
    "name",
    "device",
    "max_num_requests",
    "max_draft_len",
    "verification",
    "overlap_scheduler",
)
"""Engine settings a trace header records that model.yaml and a run's overrides decide."""

MAX_LISTED = 5
"""Contradictions named in the refusal (the rest are counted)."""


def contradictions(
    config: AuditConfig,
    scenario: Scenario,
    folder: str,
    listed_runs: Sequence[str],
    traces: Mapping[str, RunTrace],
) -> list[str]:
    """What the scenario folder ``folder`` holds that contradicts its place: the manifest's
    runs (``listed_runs``, empty in bundles that did not list them) against the scenario's,
    and each trace (by run name) against its run."""
    found: list[str] = []
    if scenario.name != folder:
        found.append(f"{folder}/scenario.yaml names scenario {scenario.name!r}")
    defined = [run.name for run in scenario.runs]
    if listed_runs and sorted(listed_runs) != sorted(defined):
        found.append(
            f"{folder}: the manifest lists runs {', '.join(listed_runs)} but the scenario "
            f"defines {', '.join(defined)}"
        )
    specs = {run.name: run for run in scenario.runs}
    for name, trace in traces.items():
        where = f"{folder}/{name}.jsonl"
        spec = specs.get(name)
        if spec is None:
            found.append(f"{where}: the scenario defines no run {name!r}")
            continue
        found.extend(f"{where}: {problem}" for problem in _trace(config, scenario, spec, trace))
    return found


def _trace(config: AuditConfig, scenario: Scenario, run: RunSpec, trace: RunTrace) -> Iterator[str]:
    header = trace.header
    if (header.scenario, header.run) != (scenario.name, run.name):
        yield f"its header records run {header.run!r} of scenario {header.scenario!r}"
    expected = {
        **{key: getattr(config.engine, key) for key in SHARED_SETTINGS},
        **{k: v for k, v in run.engine.model_dump().items() if v is not None},
    }
    recorded = header.engine_config
    for key in SHARED_SETTINGS:
        if getattr(recorded, key) != expected[key]:
            yield (
                f"its header records {key} {getattr(recorded, key)!r}, the run is served "
                f"with {expected[key]!r}"
            )
    yield from _requests(scenario, run, header.requests, expected["max_num_requests"])
    warmup = tuple(run.warmup_sizes(expected["max_num_requests"]))
    if header.warmup_batches != warmup:
        yield f"its header records warmup batches {list(header.warmup_batches)}, the run has {list(warmup)}"
    if header.not_served is None:
        yield from _outputs(scenario, run, trace)


def _requests(
    scenario: Scenario, run: RunSpec, recorded: Sequence[RequestInfo], max_num_requests: int
) -> Iterator[str]:
    served = _with_children(scenario.served_requests(run))
    mine = [r for r in recorded if r.phase == "scenario"]
    names = [r.request_id for r in mine]
    wanted = [request_id for request_id, _, _, _ in served]
    if names != wanted:
        yield (f"its header records requests {_few(names)}, the run serves {_few(wanted)}")
        return
    for (_, named, spec, index), info in zip(served, mine, strict=True):
        for key in REQUEST_SAMPLING:
            value = getattr(spec, key)
            if key == "seed" and index > 0:  # child i of n: seed + i (request 0 as written)
                value = child_seed(value, index)
            if getattr(info, key) != value:
                yield (
                    f"request {info.request_id}: its header records {key} "
                    f"{getattr(info, key)!r}, the scenario gives {value!r}"
                )
        if info.arrival_step != run.arrivals.get(named, 0):
            yield f"request {info.request_id}: its header records arrival step {info.arrival_step}"
        if isinstance(spec.prompt, list) and list(info.prompt_ids) != spec.prompt:
            yield f"request {info.request_id}: its header records another prompt"
    prior = run.prior_traffic.requests if run.prior_traffic is not None else 0
    held = sum(1 for r in recorded if r.phase == "prior")
    if held != prior:
        yield f"its header records {held} prior requests, the run has {prior}"


def _outputs(scenario: Scenario, run: RunSpec, trace: RunTrace) -> Iterator[str]:
    limits = {
        request_id: spec.max_tokens
        for request_id, _, spec, _ in _with_children(scenario.served_requests(run))
    }
    outputs = trace.end.outputs
    for request, tokens in outputs.items():
        if request not in limits:
            yield f"its end record holds outputs of request {request!r}, which the run does not serve"
        elif len(tokens) > limits[request]:
            yield (
                f"request {request}: its end record holds {len(tokens)} tokens, more than its "
                f"max_tokens {limits[request]}"
            )
    failure = trace.end.failure
    if not trace.header.observability.steps or (
        failure is not None and failure.exception == "TraceTruncated"
    ):
        return
    emitted: dict[str, list[int]] = {}
    for step in trace.steps:
        for row in step.rows:
            if row.phase == "scenario" and not row.discarded:
                emitted.setdefault(row.request_id, []).extend(row.emitted)
    for request in sorted(set(emitted) | set(outputs)):
        if tuple(emitted.get(request, ())) != tuple(outputs.get(request, ())):
            yield f"request {request}: its end record's outputs are not the tokens its steps emitted"


def _with_children(served: Sequence[tuple[str, Any]]) -> list[tuple[str, str, Any, int]]:
    """(request id, scenario request name, resolved request, child index) for every request a
    run serves: a request with ``n`` > 1 is followed by its children ``child_id(name, i)``,
    as traces list them."""
    out: list[tuple[str, str, Any, int]] = []
    for named, spec in served:
        for index in range(getattr(spec, "n", None) or 1):
            out.append((child_id(spec.name, index), named, spec, index))
    return out


def _few(names: Sequence[str]) -> str:
    shown = ", ".join(names[:4])
    return f"[{shown}{', ...' if len(names) > 4 else ''}] ({len(names)})"


__all__ = ["MAX_LISTED", "SHARED_SETTINGS", "contradictions"]
