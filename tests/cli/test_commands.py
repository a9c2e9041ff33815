"""CLI commands other than audit, through Typer's CliRunner."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml
from typer.testing import CliRunner

from specseed import __version__
from specseed.cli.app import app
from specseed.scenarios.loader import library_names, parse_audit_config

runner = CliRunner()


def _ok(result, code: int = 0) -> None:  # type: ignore[no-untyped-def]
    assert result.exit_code == code, result.output


def test_version() -> None:
    result = runner.invoke(app, ["--version"])
    _ok(result)
    assert result.output.strip() == f"specseed {__version__}"


def test_help_lists_commands_with_examples() -> None:
    result = runner.invoke(app, ["audit", "--help"])
    _ok(result)
    assert "specseed audit model.yaml --json report.json" in result.output
    assert "Exit codes" in result.output


def test_help_and_validation_do_not_import_torch(tmp_path: Path) -> None:
    scenario = tmp_path / "s.yaml"
    scenario.write_text(
        "name: s\ndescription: d\nrequests: {a: {prompt: [1]}}\nruns: [{name: r, requests: [a]}]\n"
    )
    code = (
        "import sys\n"
        "from specseed.cli.app import app\n"
        "from typer.testing import CliRunner\n"
        "r = CliRunner()\n"
        "assert r.invoke(app, ['--help']).exit_code == 0\n"
        f"assert r.invoke(app, ['scenarios', 'validate', {str(scenario)!r}]).exit_code == 0\n"
        "assert r.invoke(app, ['schema']).exit_code == 0\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_scenarios_list_names_every_builtin() -> None:
    result = runner.invoke(app, ["scenarios", "list"], env={"COLUMNS": "200"})
    _ok(result)
    for name in library_names():
        assert name in result.output


def test_scenarios_show_prints_yaml_that_parses() -> None:
    result = runner.invoke(app, ["scenarios", "show", "uptime"])
    _ok(result)
    assert yaml.safe_load(result.output)["name"] == "uptime"


def test_scenarios_show_unknown_name_suggests() -> None:
    result = runner.invoke(app, ["scenarios", "show", "uptme"])
    _ok(result, 2)
    assert "Did you mean 'uptime'?" in result.output


def test_scenarios_validate_reports_each_problem(tmp_path: Path) -> None:
    good = tmp_path / "good.yaml"
    good.write_text(
        "name: good\ndescription: d\nrequests: {a: {prompt: [1]}}\n"
        "runs: [{name: r, requests: [a]}]\n"
    )
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\ndescription: d\nrequests: {a: {prompt: [1], sed: 3}}\nruns: []\n")
    result = runner.invoke(app, ["scenarios", "validate", str(good), str(bad)])
    _ok(result, 2)
    assert "good.yaml: scenario good (1 run)" in result.output
    assert "unknown key 'sed'. Did you mean 'seed'?" in result.output
    assert "runs: List should have at least 1 item" in result.output


def test_scenarios_validate_model_yaml_checks_its_scenarios(tmp_path: Path) -> None:
    model = tmp_path / "model.yaml"
    model.write_text("scenarios: [uptime, nope.yaml]\n")
    result = runner.invoke(app, ["scenarios", "validate", str(model)])
    _ok(result, 2)
    assert "nope.yaml: no such file" in result.output


def test_schema_is_generated_and_valid_json() -> None:
    result = runner.invoke(app, ["schema", "--kind", "model"])
    _ok(result)
    schema = json.loads(result.output)
    assert schema["title"] == "AuditConfig"
    assert "max_draft_len" in json.dumps(schema)


def test_init_writes_the_default_config_and_refuses_to_overwrite(tmp_path: Path) -> None:
    target = tmp_path / "model.yaml"
    _ok(runner.invoke(app, ["init", str(target)]))
    config = parse_audit_config(target.read_text(), str(target))
    assert config.engine.name == "reference" and config.scenarios == ["builtin"]
    assert "# " in target.read_text()
    result = runner.invoke(app, ["init", str(target)])
    _ok(result, 2)
    assert "--force" in result.output
    _ok(runner.invoke(app, ["init", str(target), "--force"]))


def test_checks_lists_every_registered_id() -> None:
    from specseed.checks import CHECKS

    result = runner.invoke(app, ["checks"], env={"COLUMNS": "250"})
    _ok(result)
    for check_id in CHECKS:
        assert check_id in result.output


def test_contracts_lists_each_with_its_upstream_commits_and_tests() -> None:
    from specseed.engine_adapters.contracts import CONTRACTS

    result = runner.invoke(app, ["contracts"], env={"COLUMNS": "400"})
    _ok(result)
    for contract in CONTRACTS.values():
        assert contract.name in result.output
        for commit in contract.upstream_commits:
            assert commit in result.output
    assert "aliases: trtllm-8de196e3" in result.output
    assert "at 740c856b" in result.output


def test_schema_holds_each_engines_options_model() -> None:
    result = runner.invoke(app, ["schema", "--kind", "model"])
    _ok(result)
    schema = json.loads(result.output)
    rules = schema["$defs"]["EngineConfig"]["allOf"]
    reference = next(r for r in rules if r["if"]["properties"]["name"]["const"] == "reference")
    assert reference["then"]["properties"]["options"]["$ref"] == "#/$defs/ReferenceOptions"
    options = schema["$defs"]["ReferenceOptions"]
    assert set(options["properties"]) == {
        "model_seed",
        "rng_profile",
        "defects",
        "sampling_backend",
        "ignore_eos",
    }
    assert options["additionalProperties"] is False


def test_init_writes_the_engines_options_with_their_defaults(tmp_path: Path) -> None:
    target = tmp_path / "model.yaml"
    _ok(runner.invoke(app, ["init", str(target)]))
    text = target.read_text()
    assert "  options:" in text and "    defects: []" in text and "    model_seed: 0" in text
    _ok(runner.invoke(app, ["init", str(target), "--engine", "nope", "--force"]), 2)


def test_engines_lists_what_each_observes_and_whether_it_can_run() -> None:
    result = runner.invoke(app, ["engines"], env={"COLUMNS": "120"})
    _ok(result)
    assert "reference" in result.output and "ready" in result.output
    assert "tokens, steps, rng-state, drafts, logits" in result.output
    assert "trtllm" in result.output and "missing tensorrt_llm" in result.output


def test_schema_of_traces_and_bundles() -> None:
    trace = json.loads(runner.invoke(app, ["schema", "--kind", "trace"]).output)
    kinds = {
        trace["$defs"][ref["$ref"].rsplit("/", 1)[1]]["properties"]["record"]["const"]
        for ref in trace["oneOf"]
    }
    assert kinds == {"header", "step", "end"}
    header = trace["$defs"]["RunHeader"]
    assert header["properties"]["engine_config"]["$ref"] == "#/$defs/EngineConfigRecord"
    bundle = json.loads(runner.invoke(app, ["schema", "--kind", "bundle"]).output)
    assert set(bundle) == {
        "manifest.json",
        "environment.json",
        "<scenario>/findings.json",
        "<scenario>/<run>.jsonl",
        "<scenario>/<run>.distribution.json",
    }
    evidence = bundle["<scenario>/<run>.distribution.json"]
    assert evidence["additionalProperties"] is False
    assert {"logits_dtype", "groups"} <= set(evidence["properties"])
    everything = json.loads(runner.invoke(app, ["schema"]).output)
    assert set(everything) == {"model.yaml", "scenario", "trace", "bundle"}
