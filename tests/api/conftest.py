"""Shared files of the API and pytest-plugin tests: a small scenario and model.yamls around it."""

from __future__ import annotations

from pathlib import Path

SMALL_SCENARIO = """\
name: small-position
description: A seeded request alone and behind another request keeps its tokens.
covers: [row-subsequence]
defaults: {max_tokens: 4, temperature: 1.0}
requests:
  probe: {prompt: [50, 51, 52, 53], seed: 99}
  filler: {prompt: [70, 2], seed: 1}
runs:
  - name: alone
    requests: [probe]
  - name: row-1
    requests: [filler, probe]
expect:
  - check: position-invariance
    runs: [alone, row-1]
    requests: [probe]
"""

SMALL_RERUN = """\
name: small-rerun
description: The same seeded request twice gives the same tokens.
covers: []
defaults: {max_tokens: 4, temperature: 1.0}
requests:
  one: {prompt: [12, 40, 7], seed: 5}
runs:
  - name: first
    requests: [one]
  - name: again
    requests: [one]
expect:
  - check: run-to-run
    runs: [first, again]
"""


def write_model(folder: Path, defects: list[str] | None = None, name: str = "model.yaml") -> Path:
    """model.yaml on the reference engine over the two small scenarios; ``defects`` injected
    (``row0-seed`` breaks small-position and leaves small-rerun passing)."""
    (folder / "small-position.yaml").write_text(SMALL_SCENARIO)
    (folder / "small-rerun.yaml").write_text(SMALL_RERUN)
    path = folder / name
    path.write_text(
        "engine:\n"
        "  name: reference\n"
        f"  options: {{defects: {defects or []}}}\n"
        "scenarios: [small-position.yaml, small-rerun.yaml]\n"
    )
    return path
