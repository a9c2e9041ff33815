"""What a new user tripped over: piped scenario text, audits that check nothing, counted
nouns, one way to write a seed, torch's NumPy warning, and why the sampling bounds are where
they are."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from specseed.cli.app import app
from specseed.core.seeds import fmt_request_seed, fmt_seed
from specseed.core.wording import noun_for, plural
from specseed.engine_adapters.reference import sampler
from specseed.scenarios.loader import library_names, library_text, parse_scenario
from specseed.scenarios.schema import MIN_TEMPERATURE, MIN_TOP_P

runner = CliRunner()
CORPUS = Path(__file__).parent / "corpus"


@pytest.mark.parametrize("name", library_names())
def test_scenarios_show_piped_is_the_exact_file(name: str, tmp_path: Path) -> None:
    # CliRunner's stdout is not a terminal, as with `specseed scenarios show NAME > f.yaml`;
    # a narrow COLUMNS must not wrap anything.
    result = runner.invoke(app, ["scenarios", "show", name], env={"COLUMNS": "40"})
    assert result.exit_code == 0, result.output
    assert result.stdout == library_text(name)
    copy = tmp_path / "mine.yaml"
    copy.write_text(result.stdout)
    assert parse_scenario(copy.read_text(), str(copy)).name == name
    check = runner.invoke(app, ["scenarios", "validate", str(copy)])
    assert check.exit_code == 0, check.output


def test_validate_refuses_hostile_files_without_traceback() -> None:
    files = [str(CORPUS / "nested-600.model.yaml"), str(CORPUS / "not-utf8.scenario.yaml")]
    result = runner.invoke(app, ["scenarios", "validate", *files, "/dev/zero"])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "3 problems found" in result.output
    assert "nested more than 64 levels deep" in result.output
    assert "/dev/zero: not a regular file" in result.output


def test_an_audit_that_checked_nothing_says_so_and_exits_4(tmp_path: Path) -> None:
    # Every check batch-composition has findings for is skipped. unseeded-independence is
    # left on, so the refusal before running (which counts every run check) lets it through,
    # but it has nothing to say here: every finding is skip.
    model = tmp_path / "model.yaml"
    model.write_text(
        "engine:\n  options: {defects: [neighbor-unseeded]}\nscenarios: [batch-composition]\n"
        "checks:\n  skip: [runs-complete, rng-contract, draw-ranges-disjoint, distinct-seeds, "
        "batch-invariance, stop-boundaries]\n"
    )
    result = runner.invoke(app, ["audit", "--no-progress", str(model)], env={"COLUMNS": "80"})
    assert result.exit_code == 4, result.output
    assert "NOTHING CHECKED" in result.output and "PASS" not in result.output
    assert "(exit 4)" in result.output
    assert "1 scenario," in result.output and "1 scenarios" not in result.output


def test_plural() -> None:
    assert plural(1, "pair") == "1 pair"
    assert plural(0, "pair") == "0 pairs"
    assert plural(2, "pair shares", "pairs share") == "2 pairs share"
    assert noun_for(1, "request") == "request"
    assert noun_for(3, "request") == "requests"


def test_one_rule_for_seeds() -> None:
    assert fmt_seed(42) == "42"
    assert fmt_seed((1 << 32) - 1) == "4294967295"
    assert fmt_seed(1 << 32) == "0x100000000"
    assert fmt_seed(1 << 62) == "0x4000000000000000"
    assert fmt_seed(-1) == "-1"
    assert fmt_request_seed(1 << 62) == fmt_seed(1 << 62)
    assert fmt_request_seed(None) == "unique"


def test_torch_numpy_warning_is_silenced() -> None:
    # Hide numpy as if it were not installed; importing specseed first installs the filter.
    code = "import sys; sys.modules['numpy'] = None\nimport specseed, torch\ntorch.zeros(2)\n"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    shown = subprocess.run(
        [sys.executable, "-W", "default", "-c", code.replace("specseed, ", "")],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    assert "Failed to initialize NumPy" in shown.stderr  # the warning exists without specseed
    silenced = subprocess.run(
        [sys.executable, "-W", "default", "-c", code],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    assert "NumPy" not in silenced.stderr


def test_temperature_below_the_bound_overflows_float32_logits() -> None:
    logits = torch.tensor([[4.0, -3.0, 1.0]])
    assert torch.isnan(sampler.probs_from_logits(logits, [1e-38])).any()
    # At the bound, logits as large as 1e4 still give a finite, one-hot distribution.
    probs = sampler.probs_from_logits(logits * 2500, [MIN_TEMPERATURE])
    assert torch.isfinite(probs).all() and probs[0, 0] == 1.0


def test_top_p_below_the_bound_keeps_no_token() -> None:
    probs = torch.tensor([[0.5, 0.3, 0.2]])
    assert torch.isnan(sampler.filter_probs(probs, 0, 1e-300)).all()
    kept = sampler.filter_probs(probs, 0, MIN_TOP_P)
    assert kept.tolist() == [[1.0, 0.0, 0.0]]


@pytest.mark.parametrize("width", [80, 100])
def test_listings_keep_every_name_whole(width: int) -> None:
    from specseed.checks import CHECKS
    from specseed.core.defects import DEFECT_IDS

    checks = runner.invoke(app, ["checks"], env={"COLUMNS": str(width)}).output
    listing = runner.invoke(app, ["scenarios", "list"], env={"COLUMNS": str(width)}).output
    for text in (checks, listing):
        assert "…" not in text
        assert all(len(line) <= width for line in text.splitlines())
    flat = checks.replace("\n", " ")
    assert all(check in checks for check in CHECKS)
    assert all(
        defect in flat for defect in DEFECT_IDS if any(defect in s.targets for s in CHECKS.values())
    )
    assert all(name in listing for name in library_names())


def test_did_you_mean() -> None:
    from specseed.core.wording import did_you_mean

    assert did_you_mean("uptme", ["uptime", "spin"], "See the list.") == "Did you mean 'uptime'?"
    assert did_you_mean("zzz", ["uptime", "spin"], "See the list.") == "See the list."
