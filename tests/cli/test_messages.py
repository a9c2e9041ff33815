"""Messages that say what is true and how to go on (issue 39): a built-in scenario the
model.yaml does not list, the HTTP audit's header, checks narrowed by the Python API, a
bundle folder another audit is writing, a crash before the first step, the root cause that
names a value or a file:line at 80 columns, the interrupt screen, init's comments, and the
NumPy warning torch gives in pytest runs.

In-process through the CLI or the reporters; one pytest subprocess, where the warning
needs an interpreter that has not imported torch yet.
"""

from __future__ import annotations

import os
import re
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from rich.console import Console
from typer.testing import CliRunner

from specseed.checks.findings import Finding
from specseed.cli.app import app
from specseed.engine_adapters.registry import engine_names
from specseed.reporting.console import ConsoleReporter, render_report
from specseed.run.results import AuditFinished, AuditInterruptedEvent, AuditResult
from specseed.scenarios.loader import load_library_scenario
from specseed.scenarios.schema import AuditConfig
from specseed.scenarios.template import model_yaml_template
from specseed.traces.records import EngineFailure, load_trace

runner = CliRunner()
TRACE = Path(__file__).parents[1] / "data" / "traces" / "overlap-window-reuse" / "overlap-on.jsonl"


def _flat(text: str) -> str:
    return " ".join(text.split())


def _render(result: AuditResult, width: int = 80, exit_code: int = 1) -> str:
    console = Console(width=width, record=True, color_system=None, force_terminal=False)
    render_report(result, console, exit_code)
    return console.export_text()


def _result(
    config: AuditConfig, findings: tuple[Finding, ...] = (), **fields: object
) -> AuditResult:
    from specseed.run.results import ScenarioResult

    scenario = load_library_scenario("uptime").scenario
    scenarios = (ScenarioResult(scenario, "builtin:uptime", {}, findings, 0.0),) if findings else ()
    return AuditResult(config, "ideal", scenarios, {}, 0.0, **fields)  # type: ignore[arg-type]


# -- selection ----------------------------------------------------------------------------


def test_a_scenario_outside_the_default_audit_says_how_to_run_it() -> None:
    result = runner.invoke(app, ["audit", "-s", "slot-reuse"])
    assert result.exit_code == 2, result.output
    flat = _flat(result.output)
    assert "--scenario slot-reuse: the default audit leaves it out" in flat
    assert "specseed scenarios show slot-reuse > slot-reuse.yaml && specseed audit" in flat
    assert "not among this audit's scenarios" not in flat
    listing = _flat(runner.invoke(app, ["scenarios", "list"]).output)
    assert re.search(r"not in the default audit \(they run when named\):.* slot-reuse", listing)


def test_a_built_in_scenario_the_model_yaml_does_not_list_says_how_to_add_it(
    tmp_path: Path,
) -> None:
    model = tmp_path / "model.yaml"
    model.write_text("scenarios: [batch-composition]\n")
    result = runner.invoke(app, ["audit", str(model), "-s", "slot-reuse"])
    assert result.exit_code == 2, result.output
    flat = _flat(result.output)
    assert f"--scenario slot-reuse: {model} does not list this built-in scenario" in flat
    assert "scenarios: [batch-composition, slot-reuse]" in flat
    assert "not among this audit's scenarios" not in flat


def test_a_misspelt_scenario_gets_a_did_you_mean(tmp_path: Path) -> None:
    model = tmp_path / "model.yaml"
    model.write_text("scenarios: [batch-composition]\n")
    result = runner.invoke(app, ["audit", str(model), "-s", "slot-reus"])
    assert result.exit_code == 2, result.output
    assert "Did you mean 'slot-reuse'?" in _flat(result.output)


def test_checks_narrowed_by_the_api_skip_the_others_for_that_reason() -> None:
    from specseed.api import audit

    report = audit(scenarios=["distinct-seeds"], checks=["rng-contract"])
    skips = [f for f in report.result.findings if f.status == "skip"]
    assert skips and all(
        f.message == "not among the checks asked for (rng-contract)" for f in skips
    ), [f.message for f in skips]
    text = report.console(width=80)
    assert "model.yaml" not in text
    assert _flat(text).count("not among the checks asked for") == 1  # one line for them all


def test_model_yaml_checks_skip_still_says_so() -> None:
    from specseed.api import audit

    config = AuditConfig.model_validate(
        {"scenarios": ["distinct-seeds"], "checks": {"skip": ["distinct-seeds"]}}
    )
    [skip] = [f for f in audit(config).result.findings if f.status == "skip"]
    assert skip.message == "skipped by model.yaml checks.skip"


# -- the header ---------------------------------------------------------------------------


def test_the_http_audits_header_names_its_variants_without_a_python_repr() -> None:
    options = {
        "base_url": "http://127.0.0.1:9",
        "variants": [{"when": {"max_draft_len": 0}, "base_url": "http://127.0.0.1:10"}],
    }
    config = AuditConfig.model_validate({"engine": {"name": "openai", "options": options}})
    text = _flat(_render(_result(config), exit_code=4))
    assert "variants: {when: {max_draft_len: 0}, base_url: http://127.0.0.1:10}" in text
    assert "{'" not in text


# -- the bundle folder --------------------------------------------------------------------


def test_a_folder_another_audit_writes_is_said_to_be_in_use_first(tmp_path: Path) -> None:
    from specseed.traces.folder import TraceDir

    folder = tmp_path / "bundle"
    folder.mkdir()
    (folder / "manifest.json").write_text("{}\n")  # the other audit's bundle, as it starts
    with TraceDir(folder):
        result = runner.invoke(app, ["audit", "-s", "uptime", "--bundle", str(folder)])
    assert result.exit_code == 2, result.output
    flat = _flat(result.output)
    assert f"in use by another audit (pid {os.getpid()})" in flat
    assert "holds a bundle already" not in flat and "--force" not in flat


# -- crashes and causes at 80 columns -----------------------------------------------------


def test_a_crash_before_the_first_step_says_so() -> None:
    from specseed.checks.context import CheckContext
    from specseed.checks.runs import runs_complete
    from specseed.engine_adapters.contracts import get_contract
    from specseed.scenarios.schema import Scenario

    trace = load_trace(TRACE)
    failure = EngineFailure(-1, "prefill", 0, "RuntimeError", "no memory")
    trace = replace(trace, steps=(), end=replace(trace.end, failure=failure, outputs={}))
    ctx = CheckContext(
        Scenario.model_construct(name="s"), {trace.name: trace}, get_contract("ideal")
    )
    [finding] = runs_complete(ctx, trace)
    assert "crashed before the first step (prefill): RuntimeError: no memory" in finding.message
    assert "-1" not in finding.message and "batch of 0" not in finding.message


SAMPLER_DETAIL = (
    "probe: asked temperature 1, the sampler applied -3.34e+07 (step 1, draft position 0, "
    "rejection_sample)"
)
CRASH_TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "/w/src/specseed/engine_adapters/base.py", line 300, in run\n'
    '  File "/w/site-packages/vllm/v1/sample/rejection_sampler.py", line 412, in sample_recovered\n'
    "IndexError: index 8 is out of bounds\n"
)


@pytest.mark.parametrize("width", [80, 200])
@pytest.mark.parametrize(
    ("finding", "whole"),
    [
        (
            Finding("fail", "probe: ...", check="sampler-params", details=(SAMPLER_DETAIL,)),
            "the sampler applied -3.34e+07 (step 1, draft position 0, rejection_sample)",
        ),
        (
            Finding(
                "fail",
                "run crashed",
                check="runs-complete",
                details=("IndexError: index 8", CRASH_TRACEBACK),
            ),
            "vllm/v1/sample/rejection_sampler.py:412)",
        ),
    ],
    ids=["sampler-value", "crash-site"],
)
def test_a_root_cause_keeps_the_value_or_site_it_names(
    finding: Finding, whole: str, width: int
) -> None:
    finding = replace(finding, scenario="uptime", runs=("first",))
    text = _render(_result(AuditConfig(), (finding,)), width)
    assert whole in _flat(text)
    assert not re.search(r"\S…", text), text
    assert all(len(line) <= width for line in text.splitlines()), text


# -- the interrupt screen -----------------------------------------------------------------


def test_the_interrupt_screen_reads_at_80_columns() -> None:
    out = Console(width=80, record=True, color_system=None, force_terminal=True)
    err = Console(width=80, record=True, color_system=None, force_terminal=True)
    unfinished = ("batch-composition", "batch-position", "continuous-batching", "distribution")
    result = _result(AuditConfig(), interrupted="SIGINT", unfinished=unfinished)
    reporter = ConsoleReporter(out, err, progress=False)
    reporter.on_event(AuditInterruptedEvent("SIGINT", 0, unfinished, True))
    reporter.finish(result, 130)
    reporter.on_event(AuditFinished(result, 130))
    report, notes = out.export_text(), err.export_text()
    assert "Verdict: scenario by\n" not in report and "checks:" not in report
    assert "INTERRUPTED (SIGINT), no scenario finished (exit 130)" in report
    assert "  (exit" not in report
    lines = notes.splitlines()
    assert all(len(line) <= 80 for line in lines), notes
    # Broken only between words: every line's last and next line's first word are whole.
    words = _flat(notes).split()
    assert "batch-composition," in words and "continuous-batching," in words
    assert _flat(notes).startswith("Interrupted by SIGINT: 0 of 4 scenarios finished")


# -- init ---------------------------------------------------------------------------------


@pytest.mark.parametrize("engine", engine_names())
def test_init_writes_lines_that_fit_80_columns(engine: str) -> None:
    text = model_yaml_template(engine)
    long = [line for line in text.splitlines() if len(line) > 80]
    assert not long, long
    data = yaml.safe_load(text.replace("<base_url>", "http://h"))
    assert data["engine"]["name"] == engine


# -- the NumPy warning in pytest ----------------------------------------------------------


@pytest.mark.slow
def test_the_plugins_audit_shows_no_numpy_warning(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a host without numpy, torch warns when first imported; pytest shows every warning a
    test raises, so the plugin's audit must not raise it (numpy is hidden from the child)."""
    source = str(Path(__file__).parents[2] / "src")  # this checkout's specseed in the child
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([source, os.environ.get("PYTHONPATH", "")]))
    pytester.makeconftest("import sys\nsys.modules['numpy'] = None  # a host without numpy\n")
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.specseed(scenarios=["distinct-seeds"], checks=["distinct-seeds"])
        def test_audit(specseed_audit):
            specseed_audit()
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:xdist", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    assert "NumPy" not in result.stdout.str() + result.stderr.str()


def test_validation_problems_come_in_the_order_of_their_lines(tmp_path: Path) -> None:
    model = tmp_path / "model.yaml"
    model.write_text(
        "engine:\n"
        "  max_draft_len: 99\n"
        "  options: {bogus: 1, defects: [nope]}\n"
        "scenarios: [batch-composition]\n"
        "checks: {skip: [rng-contractt]}\n"
    )
    result = runner.invoke(app, ["audit", str(model)])
    assert result.exit_code == 2, result.output
    lines = [int(n) for n in re.findall(rf"{re.escape(str(model))}:(\d+):", result.output)]
    assert len(lines) == 4 and lines == sorted(lines), result.output
