"""A bundle folder is the writer's only as far as it made it: no write inside it follows a
symlink or reaches a hard link's other name, a dot-file that is a link makes the folder
hold something, every workflow that writes a bundle takes its lock, and no output path may
name a file inside a bundle being written or read. Each probe plants the trap a hostile
user would and checks that the file outside stays as it was."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from specseed.core.files import NotOwned, create_inside, write_inside
from specseed.plan.resolve import resolve_audit
from specseed.run.results import AuditEvent, RunStarted
from specseed.traces.folder import TraceDir
from specseed.workflows.audit import Audit
from specseed.workflows.engine_log import capture_engine_log
from specseed.workflows.outputs import AuditOutputs
from tests.bundle.common import SCENARIO, invoke

SECRET = "outside-text-9f31 token=hunter2-abcdef sk-abcdefghijklmnopqrstuvwx\n"


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """model.yaml (a failing scenario: row0-seed) and a bundle of it."""
    root = tmp_path_factory.mktemp("made")
    (root / "mine.yaml").write_text(SCENARIO)
    model = root / "model.yaml"
    model.write_text("engine: {options: {defects: [row0-seed]}}\nscenarios: [mine.yaml]\n")
    result = invoke("audit", str(model), "--no-progress", "--summary", "--bundle", str(root / "b"))
    assert result.exit_code == 1, result.output
    return root


@pytest.fixture
def bundle(made: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "bundle"
    shutil.copytree(made / "b", copy)
    return copy


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    path = tmp_path / "outside.txt"
    path.write_text(SECRET)
    return path


def _audit(made: Path, *args: str):  # type: ignore[no-untyped-def]
    return invoke("audit", str(made / "model.yaml"), "--no-progress", "--summary", *args)


def _refused(result, *says: str) -> None:  # type: ignore[no-untyped-def]
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.split())
    assert "Traceback" not in text
    for said in says:
        assert said in text, text


# -- the lock file ------------------------------------------------------------------------


def test_a_symlinked_lock_file_makes_the_folder_hold_something_and_is_never_written(
    made: Path, tmp_path: Path, outside: Path
) -> None:
    folder = tmp_path / "b"
    folder.mkdir()
    (folder / ".specseed.lock").symlink_to(outside)
    _refused(_audit(made, "--bundle", str(folder)), "not empty", ".specseed.lock")
    assert outside.read_text() == SECRET  # it was truncated to the audit's pid
    # Beside an earlier bundle, with --force: the lock refuses the link itself.
    (folder / ".specseed.lock").unlink()
    shutil.copytree(made / "b", folder, dirs_exist_ok=True)
    (folder / ".specseed.lock").unlink()
    (folder / ".specseed.lock").symlink_to(outside)
    _refused(_audit(made, "--bundle", str(folder), "--force"), ".specseed.lock is a symlink")
    assert outside.read_text() == SECRET


def test_a_hard_linked_lock_file_is_refused(made: Path, tmp_path: Path, outside: Path) -> None:
    folder = tmp_path / "b"
    folder.mkdir()
    os.link(outside, folder / ".specseed.lock")
    _refused(_audit(made, "--bundle", str(folder)), "other hard links")
    assert outside.read_text() == SECRET


def test_a_plain_dot_file_still_leaves_a_folder_empty(made: Path, tmp_path: Path) -> None:
    folder = tmp_path / "b"
    folder.mkdir()
    (folder / ".keep").write_text("")
    assert _audit(made, "--bundle", str(folder)).exit_code == 1


# -- the bundle's own files --------------------------------------------------------------


def test_force_never_writes_into_a_symlinked_scenario_folder(
    made: Path, bundle: Path, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.rmtree(bundle / "mine")
    (bundle / "mine").symlink_to(elsewhere)
    _refused(_audit(made, "--bundle", str(bundle), "--force"), "bundle/mine", "a symlink")
    assert list(elsewhere.iterdir()) == []  # it received the traces and findings


def test_force_removes_a_symlinked_engine_log_and_leaves_its_target(
    made: Path, bundle: Path, outside: Path
) -> None:
    (bundle / "engine.log").unlink()
    (bundle / "engine.log").symlink_to(outside)
    assert _audit(made, "--bundle", str(bundle), "--force").exit_code == 1
    assert outside.read_text() == SECRET  # the scrubber rewrote it
    assert not (bundle / "engine.log").is_symlink()


@pytest.mark.parametrize("link", ["symlink", "hardlink"])
def test_the_bundles_engine_log_is_never_written_through_a_link(
    tmp_path: Path, outside: Path, link: str
) -> None:
    log = tmp_path / "engine.log"
    (log.symlink_to if link == "symlink" else lambda p: os.link(p, log))(outside)
    with capture_engine_log(log, contained=True):
        os.write(2, b"engine says: Authorization: Bearer sk-abcdefghijklmnopqrstuvwx\n")
    assert outside.read_text() == SECRET


def test_writes_inside_refuse_links_and_special_files_and_never_reach_a_hard_link(
    tmp_path: Path, outside: Path
) -> None:
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (root / "link.json").symlink_to(outside)
    os.mkfifo(root / "fifo.json")
    (root / "linkdir").symlink_to(tmp_path)
    for relative in ("link.json", "fifo.json", ("linkdir", "x.json"), "sub"):
        with pytest.raises(NotOwned):
            write_inside(root, relative, "{}")
        with pytest.raises(NotOwned):
            os.close(create_inside(root, relative))
    assert not (tmp_path / "x.json").exists()
    os.link(outside, root / "sub" / "hard.json")
    write_inside(root, ("sub", "hard.json"), "new")
    os.link(outside, root / "sub" / "trace.jsonl")
    os.close(create_inside(root, ("sub", "trace.jsonl")))
    assert outside.read_text() == SECRET
    assert (root / "sub" / "hard.json").read_text() == "new"
    assert (root / "sub" / "trace.jsonl").read_text() == ""


# -- outputs inside a bundle --------------------------------------------------------------


@pytest.mark.parametrize(
    "option, name",
    [
        ("--json", "manifest.json"),
        ("--junit", "model.yaml"),
        ("--report", "junit=mine/alone.jsonl"),
        ("--engine-log", "environment.json"),
    ],
)
def test_no_audit_output_may_name_a_file_inside_its_bundle(
    made: Path, bundle: Path, option: str, name: str
) -> None:
    before = {p: p.read_bytes() for p in bundle.rglob("*") if p.is_file()}
    if option == "--report":
        fmt, _, file = name.partition("=")
        value = f"{fmt}={bundle / file}"
    else:
        value = str(bundle / name)
    result = _audit(made, "--bundle", str(bundle), "--force", option, value)
    _refused(result, "inside the bundle folder")
    assert {p: p.read_bytes() for p in bundle.rglob("*") if p.is_file()} == before


def test_minimize_report_and_check_write_nothing_into_the_bundle_they_read(
    bundle: Path,
) -> None:
    before = {p: p.read_bytes() for p in bundle.rglob("*") if p.is_file()}
    _refused(invoke("minimize", str(bundle), "-o", str(bundle / "manifest.json")), "inside")
    _refused(invoke("report", str(bundle), "-o", str(bundle / "mine" / "alone.jsonl")), "inside")
    _refused(invoke("check", str(bundle), "--json", str(bundle / "model.yaml")), "inside")
    _refused(invoke("replay", str(bundle), "--bundle", str(bundle), "--force"), "an input")
    assert {p: p.read_bytes() for p in bundle.rglob("*") if p.is_file()} == before
    assert invoke("check", str(bundle)).exit_code == 1  # still the bundle it was


def test_minimize_writes_no_minimal_scenario_over_its_model_yaml(made: Path) -> None:
    model = made / "model.yaml"
    text = model.read_text()
    _refused(invoke("minimize", str(model), "-o", str(model)), "would overwrite an input")
    assert model.read_text() == text


# -- one lock for every workflow that writes a bundle ------------------------------------


def test_replay_force_and_minimize_stop_at_a_running_audits_lock(
    made: Path, bundle: Path, tmp_path: Path
) -> None:
    held = tmp_path / "held"
    seen: dict[str, object] = {}

    def meanwhile(event: AuditEvent) -> None:
        if isinstance(event, RunStarted) and not seen:
            seen["replay"] = invoke("replay", str(bundle), "--bundle", str(held), "--force")
            seen["manifest"] = json.loads((held / "manifest.json").read_text())

    resolved = resolve_audit(made / "model.yaml")
    outcome = Audit(resolved, AuditOutputs(bundle=held), on_event=meanwhile).run()
    assert outcome.exit_code == 1
    _refused(seen["replay"], "in use by another audit")
    assert seen["manifest"]["status"] == "running"  # type: ignore[index]
    assert json.loads((held / "manifest.json").read_text())["status"] == "complete"
    # minimize writes minimal.yaml into the bundle: it takes the same lock.
    with TraceDir(bundle):
        _refused(invoke("minimize", str(bundle)), "in use by another audit")
    assert not (bundle / "mine" / "minimal.yaml").exists()


# -- distinct work ------------------------------------------------------------------------


@pytest.mark.parametrize("times, says", [(3, "more than once"), (6000, "at most 1024")])
def test_a_manifest_listing_a_scenario_many_times_is_refused_at_once(
    bundle: Path, times: int, says: str
) -> None:
    manifest = json.loads((bundle / "manifest.json").read_text())
    manifest["scenarios"] = manifest["scenarios"] * times
    (bundle / "manifest.json").write_text(json.dumps(manifest))
    _refused(invoke("check", str(bundle)), says)


def test_a_manifest_listing_a_run_twice_is_refused(bundle: Path) -> None:
    manifest = json.loads((bundle / "manifest.json").read_text())
    manifest["scenarios"][0]["runs"] *= 2
    (bundle / "manifest.json").write_text(json.dumps(manifest))
    _refused(invoke("check", str(bundle)), "lists run alone twice")


def test_traces_past_the_bundles_budget_are_refused(
    bundle: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from specseed.bundle import format as bundle_format

    size = sum(p.stat().st_size for p in (bundle / "mine").glob("*.jsonl"))
    monkeypatch.setattr(bundle_format, "MAX_BUNDLE_TRACE_BYTES", size - 1)
    _refused(invoke("check", str(bundle)), "exceed")
