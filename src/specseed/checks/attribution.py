"""Root causes: the fewest hypotheses that explain every failing finding of an audit.

Each failing finding names the defect classes that fit what it saw (its suspects). A root
cause is a hypothesis that explains failing findings and is not contradicted by any: the
causes are a smallest set of defect classes such that every finding with suspects names one
of them (a hitting set; the catalogue is small, so it is searched exactly). Where two
smallest sets fit equally, the cause reads "one of A or B" with the checks that would
separate them, never a single guessed name.

Consequences are listed under their cause, not as causes:

- a server that stopped serving (every run from one on failed with the server's own errors:
  no answer, or an error answer to everything) is one cause, first: "the server stopped
  answering at run R; N later runs not judged". Everything those runs could not show hangs
  under it, and no defect class is blamed (a warmup batch it died on is no evidence of
  buffers sized too small, and specseed's HTTP client, which reported it, did not crash);
- a crashed run is its own cause (the exception and the innermost frame of the engine's code
  its traceback shows; when that frame is specseed's own code rather than the engine's, the
  cause says so and asks for a report), and the comparisons and run checks that could not
  run because of it hang under it;
- a biased output distribution on a run whose streams share random numbers (a failing
  ``distinct-seeds``, ``unseeded-independence`` or ``draw-ranges-disjoint`` on the same run) is
  that sharing's consequence;
- a finding with no suspect joins the cause of a finding with one on the same runs.

What is left is a failure the catalogue does not explain: it gets no catalogue name and is
named by its evidence (the check and what its first diff showed). Pure functions of findings.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from specseed.checks.findings import ATTRIBUTION_TEXT, FAILING, Finding
from specseed.checks.near_ties import NEAR_TIE, near_tie_text
from specseed.checks.runs import NOT_SERVED, SERVER_DID_NOT_ANSWER
from specseed.core.wording import plural
from specseed.engine_adapters.openai.info import SERVER_FAILURES

SHARING_CHECKS = frozenset({"distinct-seeds", "unseeded-independence", "draw-ranges-disjoint"})
"""Checks whose failure means streams share random numbers (a distribution's explanation)."""
DISTRIBUTION_CHECKS = frozenset({"distribution", "losslessness"})
"""Checks that judge an output distribution: copies that share random numbers bias it too."""
SAMPLER_CHECK = "sampler-params"
"""A sampler seen applying other parameters than asked: a cause of its own (no catalogue
defect), under which the same runs' biased distribution and same-state-different-token
divergences hang."""
CRASH_CHECK = "runs-complete"
MAX_CAUSES = 4
"""Largest hitting set searched (beyond it the rest are named by their evidence)."""


@dataclass(frozen=True)
class RootCause:
    """One cause: a defect class (or a crash, or evidence the catalogue does not explain)
    with the findings it explains and the consequences hanging under it."""

    defect: str | None
    """The defect id; None for a crash or an unexplained failure."""
    check: str
    """The check whose findings name it (the first), for a cause without a defect."""
    findings: tuple[Finding, ...]
    """Every finding this cause explains, consequences included."""
    alternatives: tuple[str, ...] = ()
    """Other defects that explain the same findings equally well ("one of A or B")."""
    separated_by: tuple[str, ...] = ()
    """Checks that target one of the alternatives and not the other: what would separate."""
    crash: str | None = None
    """The exception and innermost engine frame of a crash cause."""
    evidence: str | None = None
    """What an unexplained failure showed, for a cause the catalogue does not name."""
    consequences: tuple[Finding, ...] = field(default=())
    """The findings that follow from this cause rather than point at it."""
    server: str | None = None
    """For a cause that is the server's (it stopped serving, or failed runs it was sent):
    what it did and what was not judged because of it."""
    numerics: bool = False
    """Greedy divergences all at near-ties inside the stated numeric envelope
    (``checks/near_ties.py``): the engine's rounding, not a defect class."""
    own_code: bool = False
    """A crash whose innermost frame is specseed's own code, not the engine's: a bug in
    specseed, said as such."""

    @property
    def kind(self) -> str:
        if self.server is not None:
            return "server"
        if self.own_code:
            return "specseed-bug"
        if self.numerics:
            return "numerics"
        if self.crash is not None:
            return "crash"
        if self.defect is None:
            return "unexplained"
        return "ambiguous" if self.alternatives else "defect"

    @property
    def label(self) -> str:
        if self.server is not None:
            return self.server
        if self.own_code:
            return f"specseed bug: {self.crash} (please report it with the bundle)"
        if self.crash is not None:
            return f"crash: {self.crash}"
        if self.numerics and self.evidence:
            return self.evidence
        if self.defect is None:
            return f"{self.check}: {self.evidence}" if self.evidence else self.check
        if self.alternatives:
            names = [self.defect, *self.alternatives]
            return "one of " + ", ".join(names[:-1]) + " or " + names[-1]
        return self.defect

    @property
    def defects(self) -> tuple[str, ...]:
        return () if self.defect is None else (self.defect, *self.alternatives)

    @property
    def scenarios(self) -> list[str]:
        return sorted({f.scenario for f in self.findings})

    @property
    def requests(self) -> set[tuple[str, str]]:
        return {(f.scenario, r) for f in self.findings for r in f.requests}

    @property
    def checks(self) -> list[str]:
        return list(dict.fromkeys(f.check for f in self.findings))

    def evidence_for(self, defect: str) -> str | None:
        """The first line of evidence a finding of this cause gives for ``defect``."""
        for finding in self.findings:
            for suspect in finding.suspects:
                if suspect.defect == defect:
                    return suspect.why
        return None

    @property
    def why(self) -> str:
        """The evidence for the cause; for "one of A or B", for each of them in turn (a
        reader must not see only A's side of a case the evidence leaves open)."""
        shown = [(d, self.evidence_for(d)) for d in self.defects]
        found = [(d, text) for d, text in shown if text is not None]
        if not found:
            return self.lead.message
        if len(self.defects) < 2:
            return found[0][1]
        text = "; ".join(f"{defect}: {evidence}" for defect, evidence in found)
        if self.separated_by:
            text += f" (to tell them apart: {', '.join(self.separated_by)})"
        return text

    @property
    def lead(self) -> Finding:
        """The clearest finding: one that names the suspect itself and fails (rather than
        errs), with a token diff blamed on the RNG state at the earliest divergence, then
        any diff, then an offset table, then the rest."""
        consequences = {id(f) for f in self.consequences}

        def rank(finding: Finding) -> tuple[int, int, int, int, int, int]:
            result = 1 if id(finding) in consequences else 0
            own = 0 if self.defect is None or self.defect in _named(finding) else 1
            failed = 0 if finding.status == "fail" else 1
            if finding.diffs:
                best = min(finding.diffs, key=lambda d: d.position)
                return (
                    result,
                    own,
                    failed,
                    0 if best.attribution == "rng-state" else 1,
                    best.position,
                    0,
                )
            return (result, own, failed, 2 if finding.offsets else 3, 0, len(finding.details))

        return min(self.findings, key=rank)

    def to_json(self) -> dict[str, object]:
        """The cause as a JSON report and a bundle carry it: what it names and what it rests
        on (each finding by check, scenario and runs)."""

        def ref(f: Finding) -> dict[str, object]:
            return {
                "check": f.check,
                "scenario": f.scenario,
                "runs": list(f.runs),
                "status": f.status,
                "message": f.message,
            }

        consequences = {id(f) for f in self.consequences}
        return {
            "label": self.label,
            "kind": self.kind,
            "defect": self.defect,
            "alternatives": list(self.alternatives),
            "separated_by": list(self.separated_by),
            "crash": self.crash,
            "server": self.server,
            "evidence": [ref(f) for f in self.findings if id(f) not in consequences],
            "consequences": [ref(f) for f in self.consequences],
            "why": self.why,
            "evidence_by_defect": {d: self.evidence_for(d) for d in self.defects},
        }


def _named(finding: Finding) -> set[str]:
    return {s.defect for s in finding.suspects}


_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')
_NOT_CODE = ("/torch/",)
_ENGINE_IN_SPECSEED = (
    "/specseed/engine_adapters/reference/",
    "/specseed/models/",
    "/specseed/sampling/",
    "/specseed/rng/",
)
"""specseed's own modules that are the engine under test when the reference engine runs
(its decode loop, models, samplers and Philox): a crash there is the engine's."""


def _code_frame(path: str) -> bool:
    """Whether a traceback frame is code that can be at fault: not Python's own library,
    not torch (whose frames only carry out what the caller asked)."""
    stdlib = "/lib/python3" in path and "site-packages" not in path
    return not stdlib and not path.startswith("<") and not any(p in path for p in _NOT_CODE)


def specseed_own(path: str) -> bool:
    """Whether a frame is specseed's own code (its runner, adapters, client, taps), not the
    engine under test."""
    return "/specseed/" in path and not any(p in path for p in _ENGINE_IN_SPECSEED)


def _innermost(finding: Finding) -> tuple[str, str, str] | None:
    frames = [
        m for text in finding.details[1:] for m in _FRAME.finditer(text) if _code_frame(m.group(1))
    ]
    return frames[-1].groups() if frames else None  # type: ignore[return-value]


def crash_site(finding: Finding) -> str:
    """The exception and, where a traceback was kept, its innermost frame outside Python's
    own library and torch: the code that failed (the engine's, or specseed's own)."""
    exception = _exception(finding)
    frame = _innermost(finding)
    if frame is None:
        return exception
    path, line, func = frame
    short = path.split("site-packages/")[-1] if "site-packages/" in path else path
    if "/src/" in short:
        short = short.split("/src/")[-1]
    return f"{exception} in {func} ({short}:{line})"


def _exception(finding: Finding) -> str:
    return (finding.details[0] if finding.details else finding.message).split(":")[0]


def _own_code(finding: Finding) -> bool:
    frame = _innermost(finding)
    return frame is not None and specseed_own(frame[0])


def _server_failed(finding: Finding) -> bool:
    """A run the server did not serve (the openai adapter's typed errors)."""
    return (
        finding.check == CRASH_CHECK
        and finding.status == "fail"
        and _exception(finding) in SERVER_FAILURES
    )


def _error_shape(finding: Finding) -> str:
    """A failure's error with its numbers blanked: two runs failed alike whatever their
    sizes and counts."""
    return re.sub(r"\d+", "#", finding.details[0]) if finding.details else ""


def _is_crash(finding: Finding) -> bool:
    return finding.check == CRASH_CHECK and finding.status == "fail" and not finding.suspects


@dataclass(frozen=True)
class _ServerGone:
    first: Finding
    """The first run of the stretch the server served none of."""
    runs: frozenset[tuple[str, str]]
    """Every (scenario, run) from it on: not judged."""
    text: str


def _server_gone(findings: Sequence[Finding]) -> _ServerGone | None:
    """Where the server stopped serving: the first run of the longest last stretch of runs
    that all failed with the server's own errors, when the stretch shows it stopped (more
    than one run, or no answer at all) rather than failing one request."""
    completion = [f for f in findings if f.check == CRASH_CHECK and f.status in ("pass", "fail")]
    stretch: list[Finding] = []
    for finding in reversed(completion):
        if not _server_failed(finding):
            break
        stretch.insert(0, finding)
    if not stretch:
        return None
    first = stretch[0]
    said = NOT_SERVED.search(first.message)
    silent = said is not None and said.group(1) == SERVER_DID_NOT_ANSWER
    if len(stretch) < 2 and not silent:
        return None
    where = said.group(2) if said is not None else ""
    run = f"{first.scenario}/{first.runs[0]}" if first.runs else first.scenario
    later = len(stretch) - 1
    if first is completion[0] and not silent:
        text = (
            f"the server served none of the {plural(len(stretch), 'run')}: it answered every "
            f"request with an error ({_exception(first)}); nothing was judged"
        )
    else:
        what = "answering" if silent else "serving (it answered every request with an error)"
        text = (
            f"the server stopped {what} at run {run}"
            + (f", {where}" if where else "")
            + (f"; {plural(later, 'later run')} not judged" if later else "; no run came after it")
        )
    return _ServerGone(first, frozenset((f.scenario, r) for f in stretch for r in f.runs), text)


def _touches(finding: Finding, runs: frozenset[tuple[str, str]]) -> bool:
    return any((finding.scenario, r) in runs for r in finding.runs)


def _overlaps(a: Finding, b: Finding) -> bool:
    return a.scenario == b.scenario and bool(set(a.runs) & set(b.runs))


def root_causes(findings: Sequence[Finding]) -> list[RootCause]:
    """The audit's root causes: crashes, then the smallest set of defect classes that explains
    every failing finding with suspects, then failures the catalogue does not explain."""
    failing = [f for f in findings if f.status in FAILING]
    # A server that stopped serving: one cause, first, with everything its silence left
    # unjudged under it (a defect class is blamed for none of it).
    gone = _server_gone(findings)
    first_causes: list[RootCause] = []
    if gone is not None:
        under = [f for f in failing if f is not gone.first and _touches(f, gone.runs)]
        taken = {id(f) for f in (gone.first, *under)}
        failing = [f for f in failing if id(f) not in taken]
        # Its runs' own suspects (a burst above max_num_requests it failed) blame nothing:
        # the server stopped, whatever it was sent.
        under = [replace(f, suspects=()) if _server_failed(f) else f for f in under]
        first_causes.append(
            RootCause(
                None,
                CRASH_CHECK,
                (replace(gone.first, suspects=()), *under),
                server=gone.text,
                consequences=tuple(under),
            )
        )
    # A burst above max_num_requests that failed as a run within it did (the same error,
    # numbers aside, in any scenario) was not failed for its size: its warmup-overflow
    # suspect is dropped, and it joins that run's cause below.
    unsized = {
        _error_shape(f)
        for f in failing
        if f.check == CRASH_CHECK and f.status == "fail" and not f.suspects
    }
    failing = [
        replace(f, suspects=())
        if f.check == CRASH_CHECK and f.suspects and _error_shape(f) in unsized
        else f
        for f in failing
    ]
    # Runs the server failed while it served the others: the server's, not code's.
    refused = [f for f in failing if _server_failed(f) and not f.suspects]
    if refused:
        hung = [
            f
            for f in failing
            if not f.suspects and not _server_failed(f) and any(_overlaps(r, f) for r in refused)
        ]
        first_causes.append(
            RootCause(
                None,
                CRASH_CHECK,
                (*refused, *hung),
                server=(
                    f"the server failed {plural(len(refused), 'run')} it was sent and served "
                    f"the others: {refused[0].details[0] if refused[0].details else ''}"
                ),
                consequences=tuple(hung),
            )
        )
        taken = {id(f) for f in (*refused, *hung)}
        failing = [f for f in failing if id(f) not in taken]
    crashes = [f for f in failing if _is_crash(f)]
    rest = [f for f in failing if not _is_crash(f)]

    # Crashes: one cause per site; what could not run because of one hangs under it.
    crash_groups: dict[str, list[Finding]] = {}
    under_crash: dict[str, list[Finding]] = {}
    for crash in crashes:
        crash_groups.setdefault(crash_site(crash), []).append(crash)
    remaining = []
    for finding in rest:
        site = next(
            (crash_site(c) for c in crashes if not finding.suspects and _overlaps(c, finding)),
            None,
        )
        if site is not None:
            under_crash.setdefault(site, []).append(finding)
        else:
            remaining.append(finding)

    # A sampler applying other parameters than asked explains, on its runs, a biased
    # distribution, a token that differs under the same state and logits, and what has no
    # suspect; its findings are named by what the sampler applied.
    applied = [f for f in remaining if f.check == SAMPLER_CHECK and not f.suspects]
    under_sampler: list[Finding] = []
    if applied:
        kept = []
        for finding in remaining:
            if finding.check == SAMPLER_CHECK and not finding.suspects:
                continue
            follows = (
                not finding.suspects
                or finding.check in DISTRIBUTION_CHECKS
                or any(d.attribution == "sampler" for d in finding.diffs)
                or _tokens_only(finding)
            )
            if follows and any(_overlaps(a, finding) for a in applied):
                under_sampler.append(finding)
            else:
                kept.append(finding)
        remaining = kept
        # A crash inside the very call the sampler was seen receiving wrong parameters in
        # is that corruption's doing (its site stays in the consequence's traceback).
        calls = {_applied_call(a) for a in applied} - {""}
        for site in list(crash_groups):
            group = crash_groups[site]
            if calls and all(any(f"in {call}" in _trace(c) for call in calls) for c in group):
                under_sampler.extend([*group, *under_crash.pop(site, [])])
                del crash_groups[site]

    # Consequences: a biased distribution on a run whose streams share random numbers.
    sharing = [f for f in remaining if f.check in SHARING_CHECKS and f.suspects]
    consequence_of: dict[int, Finding] = {}
    for finding in remaining:
        if finding.check in DISTRIBUTION_CHECKS:
            cause = next((s for s in sharing if _overlaps(s, finding)), None)
            if cause is not None:
                consequence_of[id(finding)] = cause
    evidence = [f for f in remaining if f.suspects and id(f) not in consequence_of]
    covers = _smallest_covers(
        [set(g) for f in evidence for g in (f.suspect_groups or (tuple(_named(f)),))]
    )
    chosen = covers[0] if covers else []

    causes: list[RootCause] = list(first_causes)
    for site, group in crash_groups.items():
        hung = under_crash.get(site, [])
        causes.append(
            RootCause(
                None,
                CRASH_CHECK,
                (*group, *hung),
                crash=site,
                consequences=tuple(hung),
                own_code=_own_code(group[0]),
            )
        )

    if applied:
        causes.append(
            RootCause(
                None,
                SAMPLER_CHECK,
                (*applied, *under_sampler),
                evidence=_evidence_of(applied[0]),
                consequences=tuple(under_sampler),
            )
        )

    assigned: dict[str, list[Finding]] = {d: [] for d in chosen}
    for finding in evidence:
        named = [s.defect for s in finding.suspects if s.defect in assigned]
        assigned[named[0]].append(finding)
    alternatives = _alternatives(covers, chosen)
    orphans: list[Finding] = []
    for finding in remaining:
        if finding.suspects and id(finding) not in consequence_of:
            continue
        host = consequence_of.get(id(finding))
        if host is None:
            host = next((e for e in evidence if _overlaps(e, finding)), None)
        if host is None:
            orphans.append(finding)
            continue
        defect = next(s.defect for s in host.suspects if s.defect in assigned)
        assigned[defect].append(finding)
    defect_causes = []
    for defect, group in assigned.items():
        if not group:
            continue
        alts = alternatives.get(defect, ())
        defect_causes.append(
            RootCause(
                defect,
                group[0].check,
                tuple(group),
                alternatives=alts,
                separated_by=_separating_checks((defect, *alts)),
                consequences=tuple(f for f in group if id(f) in consequence_of or not f.suspects),
            )
        )
    defect_causes.sort(key=lambda c: -len(c.findings))
    causes.extend(defect_causes)

    # What the catalogue does not explain: named by its evidence, one cause per kind of it.
    unexplained: dict[tuple[str, str], list[Finding]] = {}
    numerics: list[Finding] = []
    for finding in orphans:
        text = _evidence_of(finding)
        if text.startswith(NEAR_TIE):  # numerics the stated envelope allows: no defect
            numerics.append(finding)
            continue
        unexplained.setdefault((finding.check, text), []).append(finding)
    if numerics:
        margins = [d.margin for f in numerics for d in f.diffs if d.margin is not None]
        text = near_tie_text(margins)
        causes.append(
            RootCause(None, numerics[0].check, tuple(numerics), evidence=text, numerics=True)
        )
    for (check, text), group in unexplained.items():
        causes.append(RootCause(None, check, tuple(group), evidence=text))
    return causes


def _tokens_only(finding: Finding) -> bool:
    """A stream-sharing finding seen in tokens only (identical outputs under different
    recorded states): what a sampler applying other parameters also produces."""
    from specseed.checks.request_streams import IDENTICAL_DESPITE_STATES

    return (
        finding.check in SHARING_CHECKS
        and bool(finding.details)
        and all(IDENTICAL_DESPITE_STATES in line for line in finding.details)
    )


def _applied_call(finding: Finding) -> str:
    """The engine call a sampler-params finding saw receiving the parameters."""
    text = finding.details[0] if finding.details else ""
    return text.rsplit(", ", 1)[-1].rstrip(")") if text.endswith(")") else ""


def _trace(finding: Finding) -> str:
    return "\n".join(finding.details[1:])


def _evidence_of(finding: Finding) -> str:
    """What an unexplained finding saw, in words a maintainer can act on."""
    margins = [d.margin for d in finding.diffs if d.margin is not None and d.margin.near_tie]
    if margins and len(margins) == len(finding.diffs):
        return near_tie_text(margins)
    for diff in sorted(finding.diffs, key=lambda d: d.position):
        text = ATTRIBUTION_TEXT.get(diff.attribution, diff.attribution)
        if diff.attribution == "sampler":
            text = "same RNG state and logits, different token"
            return f"sampler: {text}"
        return text
    if finding.check == SAMPLER_CHECK and finding.details:
        return finding.details[0].split(": ", 1)[-1]
    if finding.offsets:
        fields = sorted({m for row in finding.offsets for m in row.mismatch})
        return f"recorded {', '.join(fields) or 'state'} differ from the contract"
    return "no catalogued defect fits"


def _smallest_covers(sets: list[set[str]]) -> list[list[str]]:
    """Every smallest set of defects that meets each of ``sets`` (empty when none needs
    covering), in a stable order: the defect named by most findings first."""
    sets = [s for s in sets if s]
    if not sets:
        return []
    counts: dict[str, int] = {}
    for s in sets:
        for d in s:
            counts[d] = counts.get(d, 0) + 1
    universe = sorted(counts, key=lambda d: (-counts[d], d))
    for size in range(1, min(MAX_CAUSES, len(universe)) + 1):
        found = [
            list(combo)
            for combo in itertools.combinations(universe, size)
            if all(s & set(combo) for s in sets)
        ]
        if found:
            return found
    # Too many independent causes to search: each finding's first suspect.
    return [sorted({next(iter(sorted(s))) for s in sets})]


def _alternatives(covers: list[list[str]], chosen: list[str]) -> dict[str, tuple[str, ...]]:
    """For each chosen defect, the defects that replace it in another smallest cover."""
    out: dict[str, tuple[str, ...]] = {}
    for defect in chosen:
        others = [d for d in chosen if d != defect]
        alts = sorted(
            {
                d
                for cover in covers
                if set(others) <= set(cover)
                for d in set(cover) - set(others)
                if d != defect
            }
        )
        if alts:
            out[defect] = tuple(alts)
    return out


def _separating_checks(defects: Sequence[str]) -> tuple[str, ...]:
    """Checks that target some of ``defects`` but not all: a scenario exercising one of them
    tells the alternatives apart."""
    if len(defects) < 2:
        return ()
    from specseed.checks.registry import CHECKS

    wanted = set(defects)
    return tuple(
        sorted(
            spec.id
            for spec in CHECKS.values()
            if set(spec.targets) & wanted and not wanted <= set(spec.targets)
        )
    )
