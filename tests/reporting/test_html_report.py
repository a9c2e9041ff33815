"""The HTML report (``reporting.html``): written into every bundle, by ``--report
html=PATH`` and by ``specseed report BUNDLE -f html``; its figures' content from recorded data
(``reporting.html_evidence``), its tables without matplotlib, its outside text escaped, and
the page in a real headless browser: no console error, nothing fetched, the figures drawn, a
screenshot kept.

Two failing bundles of the reference engine, recorded once for the module:

- ``combo``: ``row0-seed`` and ``draw-overlap`` injected into a two-request scenario: a
  divergence (the probe's tokens change with its neighbour's seed) and RNG findings (draws
  of one request read the same random numbers);
- ``dist``: ``biased-acceptance`` in a small distribution scenario with a K = 0 baseline run:
  the ``distribution`` and ``losslessness`` findings.

The browser test skips, saying why, where Chromium is not installed (``.ci/run`` installs
Debian's). Its screenshots go to ``$SPECSEED_ARTIFACTS/html-report/`` when that is set, else
to the test's temporary folder; the path is printed and recorded as a test property.
"""

from __future__ import annotations

import importlib.abc
import json
import os
import re
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from scipy import stats

from specseed.bundle.format import REPORT_HTML, read_bundle
from specseed.checks.findings import Finding, OffsetRow
from specseed.reporting import html_evidence as ev
from specseed.reporting.html import INSTALL_HINT, render_html
from tests.bundle.common import invoke
from tests.extras import require_extra
from tests.reporting.browser import Browser, find_chromium

require_extra("report")  # the figures (the page without them: a test below hides matplotlib)

COMBO = """\
name: mine
description: A seeded probe must not change with its neighbour's seed.
requests:
  probe: {prompt: [17, 29, 111, 5], seed: 2024, max_tokens: 8}
  other: {prompt: [8, 1, 64], seed: 5, max_tokens: 8}
runs:
  - {name: alone, requests: [probe]}
  - {name: neighbour, requests: [other, probe]}
expect:
  - {check: batch-invariance, runs: [alone, neighbour], requests: [probe]}
"""

DIST = """\
name: dist
description: Seeded copies of one sampled request, with speculation and without.
defaults: {max_tokens: 5}
requests:
  hot: {prompt: [31, 7, 88, 14], seed: 1, temperature: 1.0}
runs:
  - name: speculative
    requests: [hot]
    engine: {max_num_requests: 128, verification: rejection, max_draft_len: 3}
  - name: baseline
    requests: [hot]
    baseline_of: speculative
    engine: {max_num_requests: 128}
expect:
  - {check: losslessness, runs: [speculative, baseline]}
distribution: {samples: 80}
"""

MAX_BYTES = 1 << 20
"""Small enough to attach to an issue."""


def _record(root: Path, scenario: str, defects: list[str]) -> Path:
    root.mkdir()
    (root / "scenario.yaml").write_text(scenario)
    (root / "model.yaml").write_text(
        f"engine:\n  options: {{defects: {json.dumps(defects)}}}\nscenarios: [scenario.yaml]\n"
    )
    bundle = root / "bundle"
    result = invoke(
        "audit",
        str(root / "model.yaml"),
        "--bundle",
        str(bundle),
        "--jobs",
        "1",
        "--no-progress",
        "--summary",
    )
    assert result.exit_code == 1, result.output
    return bundle


@pytest.fixture(scope="module")
def combo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _record(tmp_path_factory.mktemp("combo") / "audit", COMBO, ["row0-seed", "draw-overlap"])


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _record(tmp_path_factory.mktemp("dist") / "audit", DIST, ["biased-acceptance"])


def _page(bundle: Path) -> str:
    return (bundle / REPORT_HTML).read_text(encoding="utf-8")


def _headings(page: str) -> list[str]:
    return re.findall(r"<h[1-4][^>]*>(.*?)</h[1-4]>", page)


# -- the page in a bundle --------------------------------------------------------------------


def test_every_bundle_holds_a_self_contained_page_of_its_failure(combo: Path, dist: Path) -> None:
    for bundle, causes in ((combo, ["draw-overlap", "row0-seed"]), (dist, ["biased-acceptance"])):
        page = _page(bundle)
        assert len(page.encode()) < MAX_BYTES
        top = page[: page.index('id="failing"')]
        assert "<h1>FAIL</h1>" in top
        for cause in causes:
            assert f"<strong>{cause}</strong>" in top  # the verdict and root causes first
        # Nothing to fetch, nothing to run: no script, no external reference, a policy that
        # forbids loading anything.
        assert "<script" not in page.lower()
        assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", page)
        assert "@import" not in page and not re.search(r"url\((?!#)", page)  # own ids only
        assert "default-src 'none'" in page
        assert "could not be drawn" not in page


def test_the_combo_page_draws_the_rng_windows_and_shows_the_divergence(combo: Path) -> None:
    page = _page(combo)
    headings = _headings(page)
    assert any(h.startswith("Run neighbour: draw ranges per decoding iteration") for h in headings)
    # The divergence: both streams side by side, the first different token marked, the RNG
    # state behind it.
    section = page[page.index("<code>batch-invariance</code>") :]
    assert "first diverges at token" in section
    assert 'class="streams"' in section and '<td class="first">' in section
    assert "RNG state behind the first different token" in section
    # One figure per run: a second finding on the same requests links to it.
    assert page.count("<svg") == 2
    assert page.count("drawn above</a>") == 2


def test_the_dist_page_draws_pit_and_frequencies_with_and_without_speculation(dist: Path) -> None:
    page = _page(dist)
    headings = _headings(page)
    assert "Run speculative: PIT histogram against uniform" in headings
    frequencies = [h for h in headings if h.startswith("Token frequencies with and without")]
    # The distribution finding: against the baseline and the exact probabilities; the
    # losslessness finding: the two arms.
    assert any("and the target's exact probabilities" in h for h in frequencies)
    assert any(h.endswith("run speculative against run baseline (K = 0)") for h in frequencies)
    assert page.count("<svg") == 3  # the PIT once: the losslessness finding links to it


def test_report_writes_the_bundles_page_from_its_recorded_data(combo: Path, tmp_path: Path) -> None:
    out = tmp_path / "again.html"
    result = invoke("report", str(combo), "-f", "html", "--no-minimize", "-o", str(out))
    assert result.exit_code == 0, result.output
    again = out.read_text(encoding="utf-8")
    assert _headings(again) == _headings(_page(combo))
    assert again.count("<svg") == _page(combo).count("<svg")


def test_report_option_writes_it_without_a_bundle(combo: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    result = invoke(
        "audit",
        str(combo / "model.yaml"),
        "--report",
        f"html={out}",
        "--jobs",
        "1",
        "--no-progress",
        "--summary",
    )
    assert result.exit_code == 1, result.output
    page = out.read_text(encoding="utf-8")
    assert "<h1>FAIL</h1>" in page
    # No trace files: the draws come from the findings' RNG state tables, and the page says so.
    assert "RNG state tables of run neighbour" in page
    assert page.count("<svg") == 2


# -- what the figures show -------------------------------------------------------------------


def test_pit_histograms_are_the_checks_values_and_show_the_bulge(dist: Path) -> None:
    bundle = read_bundle(dist)
    (scenario,) = bundle.scenarios
    biased = ev.pit_histograms(scenario.distribution_evidence["speculative"], "dist/speculative")
    clean = ev.pit_histograms(scenario.distribution_evidence["baseline"], "dist/baseline")
    by_probability = biased[0]
    assert (by_probability.order, by_probability.n) == ("probability", 80 * 5)
    # Biased acceptance emits improbable tokens too often: the last bin, far above the band.
    assert by_probability.bins - 1 in by_probability.outside
    assert by_probability.counts[-1] > 2 * by_probability.simultaneous[1]
    assert all(not h.outside for h in clean)
    # The finding's details state the same bin count (the check's noise, the check's bins).
    finding = next(f for f in scenario.findings or () if f.check == "distribution")
    stated = next(d for d in finding.details if "rejected" in d and " pit:" in d)
    assert f"holds {by_probability.counts[-1]} tokens" in stated


def test_token_frequencies_with_and_without_speculation(dist: Path) -> None:
    bundle = read_bundle(dist)
    (scenario,) = bundle.scenarios
    spec, base = scenario.traces["speculative"], scenario.traces["baseline"]
    seqs = [tuple(v) for k, v in spec.end.outputs.items()]
    base_seqs = [tuple(v) for k, v in base.end.outputs.items()]
    freq = ev.arm_frequencies("hot", seqs, base_seqs, 4)
    assert freq is not None and freq.prefix is None
    arms = {a.name: a for a in freq.arms}
    assert [a.total for a in freq.arms] == [80, 80]
    # Some token's share differs between the arms beyond both 95% intervals.
    with_, without = arms["with speculation"], arms["without speculation (K = 0)"]
    assert any(
        with_.interval(i)[0] > without.interval(i)[1]
        or without.interval(i)[0] > with_.interval(i)[1]
        for i in range(len(freq.cells))
    )
    # Against the oracle: the exact probabilities of the cells, summing to one.
    evidence = scenario.distribution_evidence["speculative"]
    (exact,) = ev.evidence_frequencies(evidence, {})
    assert exact.exact is not None and abs(sum(exact.exact) - 1.0) < 1e-6
    assert [a.name for a in exact.arms] == ["with speculation"]


def test_binomial_band_and_wilson_interval_match_scipy() -> None:
    for n, bins in ((400, 16), (25, 2), (4800, 20), (3, 2)):
        for level in (0.95, 1 - 0.05 / bins):
            tail = (1 - level) / 2
            # The smallest counts whose cumulative probability passes each tail.
            expected = stats.binom.ppf([tail, 1 - tail], n, 1 / bins)
            assert ev.binomial_interval(n, 1 / bins, level) == tuple(int(v) for v in expected)
    for k, n in ((0, 10), (3, 10), (50, 80), (80, 80)):
        z = stats.norm.ppf(0.975)
        p = k / n
        centre = (p + z * z / (2 * n)) / (1 + z * z / n)
        half = z * (p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5 / (1 + z * z / n)
        low, high = ev.wilson(k, n, 0.95)
        assert low == pytest.approx(max(0.0, centre - half), abs=1e-9)
        assert high == pytest.approx(min(1.0, centre + half), abs=1e-9)


def _row(
    request: str,
    it: int,
    event: str,
    offset: int,
    draws: int,
    *,
    expected: int | None = None,
    seed: int = 7,
    mismatch: tuple[str, ...] = (),
) -> OffsetRow:
    return OffsetRow(
        request=request,
        run="r",
        step=it,
        decoding_iter=it,
        event=event,
        expected_seed=7,
        expected_subsequence=0,
        expected_offset=offset if expected is None else expected,
        seed=seed,
        subsequence=0,
        offset=offset,
        draws=draws,
        mismatch=mismatch,
    )


def test_overlapping_draws_are_marked_and_counted() -> None:
    rows = (
        _row("a", 0, "target[0]", 0, 1),
        _row("a", 0, "draft[0]", 1, 1),
        _row("a", 1, "accept", 10, 5, expected=2048, mismatch=("offset",)),
        _row("a", 1, "draft[0]", 12, 1, expected=3072, mismatch=("offset",)),  # inside 10..14
        _row("b", 1, "draft[0]", 14, 1, seed=8),  # same offsets, another seed: no overlap
    )
    finding = Finding(status="fail", message="m", runs=("r",), requests=("a", "b"), offsets=rows)
    (windows,) = ev.offset_windows(finding, {})
    marked = {(d.request, d.event, d.decoding_iter): d.overlaps for d in windows.draws}
    assert windows.overlapping_pairs == 1
    assert marked == {
        ("a", "target[0]", 0): False,
        ("a", "draft[0]", 0): False,
        ("a", "accept", 1): True,
        ("a", "draft[0]", 1): True,
        ("b", "draft[0]", 1): False,
    }
    accept = next(d for d in windows.draws if d.event == "accept")
    assert (accept.expected_offset, accept.mismatch) == (2048, ("offset",))


def test_overlaps_are_counted_without_comparing_every_pair() -> None:
    # A crafted trace: every event of a request reads the same draws.
    n = 20_000
    same = [ev.Draw("a", i, i, "draft[0]", 7, 0, 100, 4) for i in range(n)]
    marked, pairs = ev.mark_overlaps(same)
    assert pairs == n * (n - 1) // 2 and all(d.overlaps for d in marked)
    apart = [ev.Draw("a", i, i, "draft[0]", 7, 0, 10 * i, 4) for i in range(n)]
    marked, pairs = ev.mark_overlaps(apart)
    assert pairs == 0 and not any(d.overlaps for d in marked)


def test_draws_come_from_the_trace_where_it_has_its_steps(combo: Path) -> None:
    bundle = read_bundle(combo)
    (scenario,) = bundle.scenarios
    findings = scenario.findings or ()
    draws = next(f for f in findings if f.check == "draw-ranges-disjoint" and f.runs == ("alone",))
    assert not draws.offsets  # this finding carries no table of its own
    tables = [r for f in findings for r in f.offsets]
    (from_trace,) = ev.offset_windows(draws, scenario.traces, tables)
    (from_tables,) = ev.offset_windows(draws, {}, tables)
    assert from_trace.source == "trace of run alone"
    assert from_trace.overlapping_pairs > 0
    # rng-contract lists every event of a request that breaks the contract: the same draws.
    assert [(d.step, d.event, d.offset) for d in from_tables.draws] == [
        (d.step, d.event, d.offset) for d in from_trace.draws
    ]


# -- without matplotlib, and hostile text ------------------------------------------------------


def test_without_matplotlib_the_page_has_tables_and_says_how_to_get_figures(
    dist: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "specseed.reporting.html_plots", None)
    bundle = read_bundle(dist)
    page = render_html(bundle.as_result(), 1)
    assert "<svg" not in page
    assert INSTALL_HINT.replace("'", "&#x27;") in page
    assert '<details class="numbers" open>' in page  # the numbers take the figures' place
    assert "Run speculative: PIT histogram against uniform" in page


def test_outside_text_is_escaped_and_scrubbed(combo: Path) -> None:
    bundle = read_bundle(combo)
    result = bundle.as_result()
    hostile = (
        '<script>alert(1)</script> "><img src=x onerror=alert(2)> $\\frac{1}{0}$ \x1b[2J \u202e'
    )
    secret = "Bearer sk-abcdefghijklmnopqrstuvwx"
    (scenario,) = result.scenarios
    findings = tuple(
        replace(
            f,
            message=f"{hostile} {secret}",
            requests=tuple(f"{r}{hostile}" for r in f.requests),
            details=(hostile,),
            offsets=tuple(
                replace(r, request=f"{r.request}{hostile}", event=f"{r.event}{hostile}")
                for r in f.offsets
            ),
        )
        if f.status == "fail"
        else f
        for f in scenario.findings
    )
    result = replace(
        result,
        scenarios=(
            replace(
                scenario,
                findings=findings,
                scenario=scenario.scenario.model_copy(update={"description": hostile}),
            ),
        ),
        environment={**result.environment, "model": hostile, "api": secret},
    )
    page = render_html(result, 1)
    for raw in ("<script", "<img", "\x1b", "\u202e", "sk-abcdefghijklmnopqrstuvwx"):
        assert raw not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "&lt;removed&gt;" in page and "\\x1b[2J" in page and "\\u202e" in page
    assert "could not be drawn" not in page  # a '$' in a request name is text to matplotlib


class _NoMatplotlib(importlib.abc.MetaPathFinder):
    """Refuses, and remembers, every import of matplotlib."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name.split(".")[0] == "matplotlib" or name == "specseed.reporting.html_plots":
            self.asked.append(name)
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)


def test_a_passing_page_needs_no_figures_and_the_audit_imports_no_matplotlib(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in [m for m in sys.modules if m.split(".")[0] == "matplotlib"]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.delitem(sys.modules, "specseed.reporting.html_plots", raising=False)
    guard = _NoMatplotlib()
    monkeypatch.setattr(sys, "meta_path", [guard, *sys.meta_path])
    json_only = invoke(
        "audit",
        "-s",
        "distinct-seeds",
        "--no-progress",
        "--summary",
        "--json",
        str(tmp_path / "r.json"),
    )
    assert json_only.exit_code == 0, json_only.output
    assert guard.asked == []  # the main job: no bundle, no HTML report
    page, bundle = tmp_path / "p.html", tmp_path / "b"
    both = invoke(
        "audit",
        "-s",
        "distinct-seeds",
        "--no-progress",
        "--summary",
        "--bundle",
        str(bundle),
        "--report",
        f"html={page}",
    )
    assert both.exit_code == 0, both.output
    assert guard.asked == []  # a passing page draws nothing, so it loads no matplotlib
    for text in (page.read_text(), (bundle / REPORT_HTML).read_text()):
        assert "<h1>PASS</h1>" in text and "no figures needed" in text


# -- in a real browser -------------------------------------------------------------------------


def _artifacts(tmp_path: Path) -> Path:
    given = os.environ.get("SPECSEED_ARTIFACTS")
    folder = Path(given) / "html-report" if given else tmp_path
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    """One headless Chromium for the module, with a fresh profile."""
    executable = find_chromium()
    if executable is None:
        pytest.skip("Chromium is not installed (apt-get install chromium; .ci/run does)")
    folder = tmp_path_factory.mktemp("chromium")
    with Browser(executable, folder / "profile", folder / "chromium.log") as started:
        yield started


@pytest.mark.parametrize("name", ["combo", "dist"])
def test_the_page_renders_in_a_headless_browser(
    name: str,
    browser: Browser,
    request: pytest.FixtureRequest,
    tmp_path: Path,
    record_property: pytest.RecordProperty,
) -> None:
    bundle: Path = request.getfixturevalue(name)
    page = bundle / REPORT_HTML
    loaded = browser.load(page)
    shot = _artifacts(tmp_path) / f"{name}.png"
    shot.write_bytes(loaded.screenshot)
    record_property("screenshot", str(shot))
    print(f"screenshot of the {name} report: {shot}")
    assert loaded.console == []
    assert loaded.requests == [page.resolve().as_uri()]  # the page itself, nothing else
    assert len(loaded.svgs) == page.read_text().count("<svg") >= 2
    assert all(w > 300 and h > 100 for w, h in loaded.svgs), loaded.svgs
    assert loaded.text.lstrip().startswith("FAIL")
    assert loaded.screenshot.startswith(b"\x89PNG")
