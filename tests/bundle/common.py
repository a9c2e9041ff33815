"""What the hostile bundle and output tests share: a small scenario and the CLI at 80 columns."""

from __future__ import annotations

from typer.testing import CliRunner

from specseed.cli.app import app

SCENARIO = """\
name: mine
description: A seeded probe must not change with its neighbour's seed.
requests:
  probe: {prompt: [17, 29, 111, 5], seed: 2024, max_tokens: 4}
  other: {prompt: [8, 1, 64], seed: 5, max_tokens: 4}
runs:
  - {name: alone, requests: [probe]}
  - {name: neighbour, requests: [other, probe]}
expect:
  - {check: batch-invariance, runs: [alone, neighbour], requests: [probe]}
"""


def invoke(*args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "80"})
