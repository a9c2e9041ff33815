"""The HTML report's figures, drawn by matplotlib as inline SVG.

Imported only when a report draws a figure (``reporting.html``), so an audit that writes no
HTML report, or one whose findings all pass, never imports matplotlib. Each function takes a
record of ``reporting.html_evidence`` and returns one ``<svg>`` element as text.

Why SVG from matplotlib: the page must work offline and stay small enough to attach to an
issue. An SVG is part of the page (no script, no font or file fetched, it scales with the
window, and its text is searchable) and a figure stays small
(benchmarks/bench_html_report.py prints the pages' sizes). A JavaScript plotting library
would have to inline its bundle (plotly's is about 3.5 MB) in every report.

Text is kept as ``<text>`` (``svg.fonttype: none``): smaller than glyph outlines, and the
browser's sans-serif renders it. Every figure gets its own ``svg.hashsalt``, so the ids of
clip paths and markers never clash between the figures of one page, and no date is written,
so the same bundle gives the same page. Outside text (request and run names) reaches
matplotlib with mathtext off (``text.parse_math``: a ``$`` in a request name is text) and is
escaped by its SVG writer.
"""

from __future__ import annotations

import io
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import matplotlib
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter

from specseed.reporting.html_evidence import OffsetWindows, PitHistogram, TokenFrequencies

if TYPE_CHECKING:
    from matplotlib.axes import Axes

VERSION = matplotlib.__version__

_RC: dict[Any, Any] = {
    "svg.fonttype": "none",
    "text.parse_math": False,
    "font.family": "sans-serif",
    "font.size": 9.0,
    "axes.titlesize": 10.0,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.color": "#e3e3e3",
    "grid.linewidth": 0.6,
    "legend.fontsize": 8.0,
    "legend.frameon": False,
}
BAR = "#5b7aa8"
BAD = "#c62828"
BAND = "#9e9e9e"
EXACT = "#212121"
ARMS = ("#d1661f", "#3b6fb6")
"""With speculation, without (K = 0)."""
REQUESTS = ("#1f77b4", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf")
KIND_MARKER = {"target": "o", "accept": "s", "draft": "^"}
MAX_LABEL = 28
"""Outside names are cut to this many characters inside a figure (the tables hold them whole)."""


def _short(text: str) -> str:
    return text if len(text) <= MAX_LABEL else text[: MAX_LABEL - 1] + "…"


@contextmanager
def _figure(
    width: float,
    height: float,
    salt: str,
    *,
    right: float = 0.25,
    hspace: float = 0.2,
) -> Iterator[tuple[Figure, list[str]]]:
    """A figure under the report's settings; the SVG text lands in the yielded list.

    Margins are fixed in inches (``right``: room for a legend outside the axes; ``hspace``:
    between rows of panels), which the report's fixed font sizes allow: a layout engine
    (constrained, tight) draws every figure two or three times over, and made a page's
    figures three times slower to render."""
    out: list[str] = []
    with matplotlib.rc_context({**_RC, "svg.hashsalt": salt}):
        fig = Figure(figsize=(width, height))
        fig.subplots_adjust(
            left=0.95 / width,
            right=1.0 - right / width,
            bottom=0.55 / height,
            top=1.0 - 0.35 / height,
            wspace=0.25,
            hspace=hspace,
        )
        yield fig, out
        buffer = io.StringIO()
        fig.savefig(buffer, format="svg", metadata={"Date": None})
    text = buffer.getvalue()
    out.append(text[text.index("<svg") :].strip())


def pit_figure(histograms: Sequence[PitHistogram], salt: str) -> str:
    """One panel per histogram, two per row: the bars against the uniform expectation, the
    per-bin and the simultaneous 95% bands shaded, bins outside the latter in red."""
    rows = (len(histograms) + 1) // 2
    with _figure(9.0, 2.7 * rows, salt, hspace=0.6) as (fig, out):
        axes = fig.subplots(rows, 2, squeeze=False)
        for ax, hist in zip(axes.flat, histograms, strict=False):
            _pit_panel(ax, hist)
        for ax in list(axes.flat)[len(histograms) :]:
            ax.set_visible(False)
    return out[0]


def _pit_panel(ax: Axes, hist: PitHistogram) -> None:
    width = 1.0 / hist.bins
    lefts = [i * width for i in range(hist.bins)]
    outside = set(hist.outside)
    ax.axhspan(*hist.simultaneous, color=BAND, alpha=0.18, lw=0, label="95%, all bins at once")
    ax.axhspan(*hist.band, color=BAND, alpha=0.3, lw=0, label="95% per bin")
    colours = [BAD if i in outside else BAR for i in range(hist.bins)]
    ax.bar(lefts, hist.counts, width=width * 0.92, align="edge", color=colours, zorder=2)
    ax.axhline(hist.expected, color=EXACT, lw=1.0, ls="--", label="uniform", zorder=3)
    ax.set_xlim(0.0, 1.0)
    ax.set_ylim(0, max(max(hist.counts), hist.simultaneous[1]) * 1.12 + 1)
    zero = "most probable tokens" if hist.order == "probability" else "lowest token ids"
    ax.set_xlabel(f"PIT value (0 = {zero})")
    ax.set_ylabel("tokens")
    verdict = f"{len(outside)} of {hist.bins} bins outside" if outside else "within the band"
    ax.set_title(f"{_short(hist.group)}, by {hist.order}: {verdict}", loc="left")
    ax.legend(loc="upper left", ncols=3)


def frequency_figure(freq: TokenFrequencies, salt: str) -> str:
    """Each cell's share in each arm with its Wilson 95% interval, and the target's exact
    probability as a black tick where the evidence gives it."""
    cells = len(freq.cells)
    arms = len(freq.arms)
    with _figure(9.0, 3.0, salt) as (fig, out):
        ax = fig.subplots()
        width = 0.8 / max(arms, 1)
        for a, arm in enumerate(freq.arms):
            xs = [i - 0.4 + width * (a + 0.5) for i in range(cells)]
            shares = [arm.share(i) for i in range(cells)]
            spans = [arm.interval(i) for i in range(cells)]
            # Rounding can put an interval's end a hair inside its share: never below zero.
            errors = [
                [max(0.0, s - lo) for s, (lo, _) in zip(shares, spans, strict=True)],
                [max(0.0, hi - s) for s, (_, hi) in zip(shares, spans, strict=True)],
            ]
            ax.bar(
                xs,
                shares,
                width=width * 0.9,
                color=ARMS[a % len(ARMS)],
                label=f"{arm.name} (n = {arm.total})",
                zorder=2,
            )
            ax.errorbar(xs, shares, yerr=errors, fmt="none", ecolor="#424242", lw=0.8, zorder=3)
        if freq.exact is not None:
            ax.scatter(
                range(cells),
                freq.exact,
                marker="_",
                s=700,
                linewidths=2.0,
                color=EXACT,
                label="target probability (exact)",
                zorder=4,
            )
        ax.set_xticks(range(cells), freq.cells)
        ax.set_xlabel("token id")
        ax.set_ylabel("share of sequences")
        ax.set_title(
            f"{_short(freq.group)}: tokens at {freq.where} (p = {freq.p_value:.2g}, "
            "unadjusted); bars: 95% intervals",
            loc="left",
        )
        ax.legend(loc="upper right")
    return out[0]


def _offset_axis(windows: OffsetWindows) -> tuple[int, int | None]:
    """Where the offset axis starts (the smallest offset drawn) and, when the offsets span
    far more than the draws read (adjacent draws of one iteration beside windows thousands
    apart), the width of its linear part before it turns logarithmic (None: linear)."""
    points = [d.offset for d in windows.draws]
    points += [d.offset + max(d.draws - 1, 0) for d in windows.draws]
    points += [d.expected_offset for d in windows.draws if d.expected_offset is not None]
    base = min(points, default=0)
    widest = max((d.draws for d in windows.draws), default=1)
    linthresh = max(8, 4 * widest)
    span = max(points, default=0) - base
    return base, (linthresh if span > 64 * linthresh else None)


def offsets_figure(windows: OffsetWindows, salt: str) -> str:
    """Draw ranges per decoding iteration: x the Philox offset, one lane per request in each
    iteration; marker shape the event kind; red rings on draws another event reads too; a
    grey hollow marker at the contract's offset where the event is elsewhere."""
    requests = list(windows.requests)
    iterations = sorted({d.decoding_iter for d in windows.draws})
    row = {it: i for i, it in enumerate(iterations)}
    lanes = max(len(requests), 1)
    spread = 0.8 / lanes
    height = 1.4 + 0.28 * len(iterations) * (1 + 0.3 * (lanes - 1))
    base, linthresh = _offset_axis(windows)
    with _figure(9.0, min(height, 11.0), salt, right=2.2) as (fig, out):
        ax = fig.subplots()
        # One artist per kind of mark (not per event): a figure of hundreds of events draws
        # in a fraction of a second.
        bars: list[tuple[float, float, float, str]] = []
        links: list[tuple[float, float, float]] = []
        marks: dict[tuple[str, bool], list[tuple[float, float, str]]] = {}
        contract: dict[str, list[tuple[float, float]]] = {}
        rings: list[tuple[float, float]] = []
        for d in windows.draws:
            lane = requests.index(d.request) if d.request in requests else 0
            y = row[d.decoding_iter] + (lane - (lanes - 1) / 2) * spread
            colour = REQUESTS[lane % len(REQUESTS)]
            marker = KIND_MARKER.get(d.kind, "o")
            x = d.offset - base
            if d.draws > 1:
                bars.append((y, x, x + d.draws - 1, colour))
            if d.expected_offset is not None and d.expected_offset != d.offset:
                links.append((y, d.expected_offset - base, x))
                contract.setdefault(marker, []).append((d.expected_offset - base, y))
            marks.setdefault((marker, bool(d.mismatch)), []).append((x, y, colour))
            if d.overlaps:
                rings.append((x, y))
        if links:
            ys, starts, ends = zip(*links, strict=True)
            ax.hlines(ys, starts, ends, colors=BAND, lw=0.8, linestyles=":", zorder=1)
        if bars:
            ys, starts, ends, colours = zip(*bars, strict=True)
            ax.hlines(ys, starts, ends, colors=colours, lw=3, zorder=2)
        for marker, spots in contract.items():
            xs, ys = zip(*spots, strict=True)
            ax.scatter(
                xs,
                ys,
                marker=marker,
                s=34,
                facecolors="none",
                edgecolors=BAND,
                linewidths=1.0,
                zorder=2,
            )
        for (marker, differs), points in marks.items():
            xs, ys, colours = zip(*points, strict=True)
            ax.scatter(
                xs,
                ys,
                marker=marker,
                s=34,
                c=colours,
                zorder=3,
                edgecolors=EXACT if differs else colours,
                linewidths=1.2 if differs else 0.5,
            )
        if rings:
            xs, ys = zip(*rings, strict=True)
            ax.scatter(
                xs,
                ys,
                marker="o",
                s=170,
                facecolors="none",
                edgecolors=BAD,
                linewidths=1.6,
                zorder=4,
            )
        ax.set_yticks(range(len(iterations)), [f"iteration {it}" for it in iterations])
        ax.set_ylim(len(iterations) - 0.5, -0.5)
        label = "Philox offset of the first draw" + (f" minus {base:,}" if base else "")
        if linthresh is not None:
            ax.set_xscale("symlog", linthresh=linthresh, linscale=1.5)
            ax.set_xlim(left=-0.5)
            # Plain numbers: mathtext, which the default log labels use, is off.
            ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:,.0f}"))
            label += f" (linear to {linthresh}, then logarithmic)"
        else:
            ax.ticklabel_format(axis="x", style="plain", useOffset=False)
        ax.set_xlabel(label + "; bars: the draws read")
        overlap = (
            f"{windows.overlapping_pairs} pairs of events read the same draws"
            if windows.overlapping_pairs
            else "no overlapping draws"
        )
        ax.set_title(
            f"run {_short(windows.run)}: draws per decoding iteration; {overlap}", loc="left"
        )
        handles: list[Any] = [
            Patch(color=REQUESTS[i % len(REQUESTS)], label=_short(r))
            for i, r in enumerate(requests)
        ]
        kinds = sorted({d.kind for d in windows.draws}, key=list(KIND_MARKER).index)
        handles += [
            Line2D([], [], ls="", marker=KIND_MARKER[k], color="#616161", label=k) for k in kinds
        ]
        if any(d.mismatch for d in windows.draws):
            handles.append(
                Line2D(
                    [],
                    [],
                    ls="",
                    marker="o",
                    markerfacecolor="#bdbdbd",
                    markeredgecolor=EXACT,
                    label="differs from the contract",
                )
            )
        if any(d.expected_offset not in (None, d.offset) for d in windows.draws):
            handles.append(
                Line2D(
                    [],
                    [],
                    ls="",
                    marker="o",
                    markerfacecolor="none",
                    markeredgecolor=BAND,
                    label="contract's offset",
                )
            )
        if rings:
            handles.append(
                Line2D(
                    [],
                    [],
                    ls="",
                    marker="o",
                    markersize=11,
                    markerfacecolor="none",
                    markeredgecolor=BAD,
                    label="reads draws another event reads",
                )
            )
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return out[0]
