"""An engine from another package, installed through entry points, audited on the built-in
library: token-level checks give verdicts, every RNG check skips with its reason, and nothing
passes on evidence the engine did not expose.

The engine (tests/data/plugins/specseed_tokens_only) only returns tokens. The test writes a
distribution's metadata (``*.dist-info`` with ``entry_points.txt``) beside a copy of it and
puts that folder on ``sys.path``: the same discovery ``pip install`` would set up.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from specseed.checks import CHECKS
from specseed.cli.app import app
from specseed.engine_adapters.contracts import all_contracts
from specseed.engine_adapters.registry import engines

PLUGIN = Path(__file__).parent.parent / "data" / "plugins" / "specseed_tokens_only"
RNG_CHECKS = {"rng-contract", "draw-ranges-disjoint", "distinct-seeds", "unseeded-independence"}


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    site = tmp_path / "site"
    shutil.copytree(PLUGIN, site / "specseed_tokens_only")
    info = site / "specseed_tokens_only-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: specseed-tokens-only\nVersion: 0.1\n"
    )
    (info / "entry_points.txt").write_text(
        "[specseed.engines]\ntokens-only = specseed_tokens_only:ENGINE\n\n"
        "[specseed.contracts]\ntokens-only-layout = specseed_tokens_only:CONTRACT\n\n"
        "[specseed.checks]\nnonempty = specseed_tokens_only.checks\n"
    )
    monkeypatch.syspath_prepend(str(site))
    engines.cache_clear()
    all_contracts.cache_clear()
    yield tmp_path
    engines.cache_clear()
    all_contracts.cache_clear()


def _audit(folder: Path, engine_yaml: str, *extra: str) -> tuple[int, dict]:  # type: ignore[type-arg]
    import json

    model = folder / "model.yaml"
    model.write_text(engine_yaml + "scenarios: [builtin]\n")
    report = folder / "report.json"
    result = CliRunner().invoke(
        app, ["audit", str(model), "--json", str(report), "--no-progress", *extra]
    )
    assert "Traceback" not in result.output, result.output
    return result.exit_code, json.loads(report.read_text())


def test_the_plugin_is_listed_with_what_it_observes(installed: Path) -> None:
    result = CliRunner().invoke(app, ["engines"], env={"COLUMNS": "120"})
    assert result.exit_code == 0, result.output
    assert "tokens-only" in result.output and "specseed-tokens-only 0.1" in result.output
    assert "tokens-only-layout" in all_contracts()


def test_token_checks_give_verdicts_and_every_rng_check_skips_with_its_reason(
    installed: Path,
) -> None:
    code, report = _audit(
        installed, "engine:\n  name: tokens-only\n  contract: tokens-only-layout\n"
    )
    assert code == 0, report["summary"]
    findings = report["findings"]
    rng = [f for f in findings if f["check"] in RNG_CHECKS]
    assert rng and all(f["status"] == "skip" for f in rng)
    assert {f["check"] for f in rng} == RNG_CHECKS
    # knobs, and losslessness (its copies ask logprobs): the engine refuses every request
    # with a knob, in its own words.
    refusing = ("knobs", "losslessness")
    refused = [f for f in rng if f["scenario"] in refusing]
    assert {f["scenario"] for f in refused} == set(refusing)
    assert all("tokens-only takes temperature" in f["message"] for f in refused)
    rng = [f for f in rng if f["scenario"] not in refusing]
    assert all("engine tokens-only does not expose" in f["message"] for f in rng)
    assert any(
        f["message"] == "rng-contract: engine tokens-only does not expose batch rows and "
        "engine steps or RNG state"
        for f in rng
    )
    passed = {f["check"] for f in findings if f["status"] == "pass"}
    token_checks = {c for c, spec in CHECKS.items() if spec.needs == ("tokens",)}
    # Every token-level check ran on the library and held, but the distribution check, which
    # needs a checkpoint specseed can load (this engine names none) and says so, and the
    # losslessness check: its scenario's copies ask logprobs, which this engine refuses, and
    # it says so instead of passing.
    # The knob checks have nothing to judge: the engine refuses every knob and reports no
    # finish reason or log-probability (stop-boundaries passes only on a stop it saw).
    knob_checks = {"stop-boundaries", "logprobs-sane", "children-distinct", "knobs-honoured",
                   "knob-equivalence"}  # fmt: skip
    assert passed == token_checks - {"distribution", "losslessness"} - knob_checks
    dist = [
        f["message"]
        for f in findings
        if f["check"] == "distribution" and f["scenario"] not in refusing
    ]
    assert dist and all("names no checkpoint specseed can load" in m for m in dist), dist
    lossless = [f for f in findings if f["check"] == "losslessness"]
    assert lossless and all(
        f["status"] == "skip" and "tokens-only takes temperature" in f["message"] for f in lossless
    ), lossless
    # Nothing that needs what the engine hides passed.
    assert not any(f["status"] == "pass" for f in rng)


def test_the_same_plugin_with_its_seed_ignored_fails_the_token_checks(installed: Path) -> None:
    code, report = _audit(
        installed, "engine:\n  name: tokens-only\n  options:\n    ignore_seed: true\n"
    )
    assert code == 1
    failed = {f["check"] for f in report["findings"] if f["status"] == "fail"}
    assert {"uptime-invariance", "batch-invariance"} <= failed
    assert not failed & RNG_CHECKS


def test_plugin_options_are_validated_with_file_and_line(installed: Path) -> None:
    model = installed / "model.yaml"
    model.write_text("engine:\n  name: tokens-only\n  options:\n    ignore_sed: true\n")
    result = CliRunner().invoke(app, ["audit", str(model)])
    assert result.exit_code == 2
    assert f"{model}:4: engine.options.ignore_sed: unknown key 'ignore_sed'" in result.output
    assert "Did you mean 'ignore_seed'?" in result.output


def test_a_check_from_another_package_runs_in_the_audit(installed: Path) -> None:
    from specseed.checks.registry import load_plugin_checks

    assert load_plugin_checks() == []
    try:
        code, report = _audit(installed, "engine:\n  name: tokens-only\n")
        assert code == 0
        mine = [f for f in report["findings"] if f["check"] == "plugin-outputs-nonempty"]
        # knobs and losslessness (logprobs): the engine refuses the knobs, so those
        # scenarios' runs are skips.
        assert mine and all(
            f["status"] == "pass" for f in mine if f["scenario"] not in ("knobs", "losslessness")
        )
    finally:
        CHECKS.pop("plugin-outputs-nonempty", None)


def test_the_adapter_takes_its_name_and_observability_from_its_engine_info(
    installed: Path,
) -> None:
    from specseed.engine_adapters.registry import load_adapter_class

    adapter = load_adapter_class("tokens-only")
    info = engines()["tokens-only"]
    assert (adapter.name, adapter.observability) == (info.name, info.observability)
    source = (PLUGIN / "__init__.py").read_text()
    assert 'name = "tokens-only"' not in source  # given once, in ENGINE, never repeated


def test_doctor_lists_the_plugins_package_and_where_it_runs(installed: Path) -> None:
    import json

    result = CliRunner().invoke(app, ["doctor", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    package = next(p for p in data["packages"] if p["name"] == "specseed_tokens_only")
    assert package["found"] and package["version"] == "0.1"
    (row,) = [r for r in data["runnable"] if r["engine"] == "tokens-only"]
    assert (row["device"], row["sampling_backend"], row["ok"]) == (
        "cpu",
        "a hash of the seed",
        True,
    )
    assert row["reason"] == "pure Python, no torch"


def test_a_bundle_and_its_report_record_the_plugins_version_and_variables(
    installed: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    monkeypatch.setenv("TOKENS_ONLY_MODE", "test")
    bundle = installed / "bundle"
    code, _ = _audit(installed, "engine:\n  name: tokens-only\n", "--bundle", str(bundle))
    assert code == 0
    environment = json.loads((bundle / "environment.json").read_text())
    assert environment["specseed-tokens-only"] == "0.1"
    assert environment["env.TOKENS_ONLY_MODE"] == "test"
    result = CliRunner().invoke(app, ["report", str(bundle)])
    assert result.exit_code == 0, result.output
    assert "| tokens-only engine | 0.1 |" in result.output


def test_a_stray_option_points_at_the_plugin_that_owns_it(installed: Path) -> None:
    model = installed / "model.yaml"
    model.write_text("engine:\n  name: tokens-only\n  ignore_seed: true\n")
    result = CliRunner().invoke(app, ["audit", str(model)])
    assert result.exit_code == 2
    assert (
        "unknown key 'ignore_seed': it is an option of the tokens-only engine. Write it under "
        "engine.options (ignore_seed: ...)." in " ".join(result.output.split())
    )
