"""Plugins that end the process: a check plugin, an engine and an output format whose module
raises ``SystemExit(0)`` on import, and a check that calls ``sys.exit(0)`` when it runs. Each
is contained as a broken plugin, recorded and reported; a failing audit still exits 1, never
the 0 the plugin asked for.

The plugins are installed as ``pip install`` would (a ``*.dist-info`` with
``entry_points.txt`` on the path) and the audit runs in a subprocess: the check plugins load
when ``specseed.checks`` is first imported, which this test process did long ago."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from specseed.core.errors import PluginError, plugin_code
from tests.bundle.common import SCENARIO

SRC = Path(__file__).resolve().parents[2] / "src"
AUDIT = (sys.executable, "-m", "specseed", "audit")

EXITS_ON_IMPORT = "raise SystemExit(0)\n"
EXITS_WHEN_RUN = """\
import sys

from specseed.checks.registry import run_check


@run_check("plugin-exits", short="exits", title="exits", description="d", targets=(),
           needs=("tokens",))
def exits(ctx, trace):
    sys.exit(0)
    yield
"""


def _install(site: Path) -> None:
    site.mkdir()
    (site / "exits_on_import.py").write_text(EXITS_ON_IMPORT)
    (site / "exits_when_run.py").write_text(EXITS_WHEN_RUN)
    info = site / "hostile_plugins-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: hostile-plugins\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[specseed.checks]\nexits-on-import = exits_on_import\nexits-when-run = exits_when_run\n\n"
        "[specseed.engines]\nexits = exits_on_import:ENGINE\n\n"
        "[specseed.formats]\nexits = exits_on_import:FORMAT\n"
    )


def test_a_plugin_that_exits_cannot_turn_a_failing_audit_into_exit_0(tmp_path: Path) -> None:
    site = tmp_path / "site"
    _install(site)
    (tmp_path / "mine.yaml").write_text(SCENARIO)
    model = tmp_path / "model.yaml"
    model.write_text("engine: {options: {defects: [row0-seed]}}\nscenarios: [mine.yaml]\n")
    report = tmp_path / "report.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), str(site)]), "COLUMNS": "200"}
    audit = subprocess.run(
        [*AUDIT, str(model), "--json", str(report), "--no-progress", "--jobs", "1"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert audit.returncode == 1, (audit.stdout, audit.stderr)
    assert "Traceback" not in audit.stderr
    data = json.loads(report.read_text())
    broken = (
        "check plugin exits-on-import: PluginError: its module exits_on_import raised "
        "SystemExit(0) (its checks do not run)"
    )
    assert data["plugin_problems"] == [broken]
    assert f"Warning: {broken}" in audit.stderr
    exits = [f for f in data["findings"] if f["check"] == "plugin-exits"]
    assert exits and all(f["status"] == "error" for f in exits)
    assert (
        "the check itself failed: PluginError: check plugin-exits raised SystemExit(0)"
        in (exits[0]["message"])
    )
    assert any(f["check"] == "batch-invariance" and f["status"] == "fail" for f in data["findings"])
    listed = subprocess.run(
        [sys.executable, "-m", "specseed", "formats"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert listed.returncode == 0, listed.stderr
    assert "raised SystemExit(0)" in listed.stdout


def test_plugin_code_contains_what_would_end_the_process_but_not_an_interrupt() -> None:
    for ending in (SystemExit(0), SystemExit("bye"), GeneratorExit()):
        try:
            with plugin_code("the plugin"):
                raise ending
        except PluginError as exc:
            assert exc.message.startswith(f"the plugin raised {type(ending).__name__}(")
        else:
            raise AssertionError("not contained")
    for passing in (KeyboardInterrupt(), ValueError("x")):
        try:
            with plugin_code("the plugin"):
                raise passing
        except (KeyboardInterrupt, ValueError) as exc:
            assert exc is passing
