"""``--shard i/n`` and ``--jobs N``: every scenario in exactly one shard, deterministically;
worker processes give the findings of a serial audit."""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import random
import signal
import subprocess
import sys
import time
from importlib.metadata import entry_points
from pathlib import Path

import pytest
from typer.testing import CliRunner

from specseed.cli.app import app
from specseed.core.errors import InputError
from specseed.plan.planning import plan_audit
from specseed.run.parallel import parse_shard, shard
from specseed.scenarios.schema import AuditConfig

HAS_FORKSERVER = "forkserver" in multiprocessing.get_all_start_methods()
NEEDS_FORKSERVER = pytest.mark.skipif(
    not HAS_FORKSERVER, reason="no forkserver on this platform (workers are spawned)"
)

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def library() -> list:  # type: ignore[type-arg]
    return plan_audit(AuditConfig(), Path.cwd())


@pytest.mark.parametrize("count", range(1, 13))
def test_every_scenario_lands_in_exactly_one_shard(library: list, count: int) -> None:  # type: ignore[type-arg]
    shards = [[p.scenario.name for p in shard(library, i, count)] for i in range(1, count + 1)]
    names = [name for names in shards for name in names]
    assert sorted(names) == sorted(p.scenario.name for p in library)  # all, none twice
    sizes = [len(s) for s in shards]
    assert max(sizes) - min(sizes) <= 1


def test_shards_do_not_depend_on_the_listed_order(library: list) -> None:  # type: ignore[type-arg]
    shuffled = list(library)
    random.Random(7).shuffle(shuffled)
    for i in range(1, 4):
        assert {p.scenario.name for p in shard(library, i, 3)} == {
            p.scenario.name for p in shard(shuffled, i, 3)
        }
    # Within a shard, the planned order is kept.
    first = shard(library, 1, 3)
    assert first == [p for p in library if p in first]


@pytest.mark.parametrize("text", ["0/3", "4/3", "1/0", "a/b", "3", "1/2/3", "-1/2"])
def test_bad_shard_is_refused(text: str) -> None:
    with pytest.raises(InputError, match="expected i/n"):
        parse_shard(text)


def test_bad_shard_flag_exits_2() -> None:
    result = CliRunner().invoke(app, ["audit", "--shard", "3/2"])
    assert result.exit_code == 2, result.output
    assert "--shard 3/2: expected i/n with 1 <= i <= n" in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize("given", ["0", "-2", "many", "1.5"])
def test_jobs_that_are_no_count_exit_2(given: str) -> None:
    result = CliRunner().invoke(app, ["audit", "--jobs", given])
    assert result.exit_code == 2, result.output
    assert f"--jobs {given}" in result.output and "auto" in result.output
    assert "Traceback" not in result.output


def test_auto_jobs_are_one_per_cpu_for_the_built_in_reference_model_on_the_cpu_only(
    monkeypatch: pytest.MonkeyPatch,
    library: list,  # type: ignore[type-arg]
) -> None:
    from specseed.run import parallel
    from specseed.run.parallel import AUTO_MIN_TOKENS, parse_jobs, resolve_jobs, scenario_cost

    monkeypatch.setattr(parallel, "_cpu_count", lambda: 4)
    assert parse_jobs("auto") == parse_jobs(" AUTO ") == "auto" and parse_jobs("3") == 3
    reference = AuditConfig()
    assert resolve_jobs("auto", reference, library) == 4
    largest = sorted(library, key=scenario_cost)[-2:]
    assert sum(map(scenario_cost, largest)) >= AUTO_MIN_TOKENS
    assert resolve_jobs("auto", reference, largest) == 2  # never more workers than scenarios
    small = [p for p in library if p.scenario.name in ("distinct-seeds", "uptime")]
    assert sum(map(scenario_cost, small)) < AUTO_MIN_TOKENS
    assert resolve_jobs("auto", reference, small) == 1  # workers would cost more than they give
    assert resolve_jobs(3, reference, small) == 3  # a number is taken as given
    on_gpu = AuditConfig.model_validate({"engine": {"name": "reference", "device": "cuda"}})
    served = AuditConfig.model_validate(
        {"engine": {"name": "openai", "options": {"base_url": "http://127.0.0.1:9"}}}
    )
    own_model = AuditConfig.model_validate({"engine": {"checkpoint": str(Path.cwd())}})
    assert resolve_jobs("auto", on_gpu, library) == resolve_jobs("auto", served, library) == 1
    assert resolve_jobs("auto", own_model, library) == 1  # a checkpoint per worker: memory x N


def test_shard_flag_runs_its_share(tmp_path: Path) -> None:
    args = ["audit", "--no-progress", "-s", "distinct-seeds", "-s", "warmup", "-s", "uptime"]
    seen = []
    for i in (1, 2):
        report = tmp_path / f"{i}.json"
        result = CliRunner().invoke(app, [*args, "--shard", f"{i}/2", "--json", str(report)])
        assert result.exit_code in (0, 1), result.output
        seen.append(json.loads(report.read_text())["scenarios"])
    # sorted: distinct-seeds, uptime, warmup -> shard 1 gets positions 0 and 2
    assert seen == [["distinct-seeds", "warmup"], ["uptime"]]


def _findings(report: Path) -> list[dict[str, object]]:
    return json.loads(report.read_text())["findings"]


@pytest.mark.slow
def test_jobs_give_the_findings_of_a_serial_audit(tmp_path: Path) -> None:
    # warmup fails (its batch above max_num_requests crashes a run): failures must match too.
    (tmp_path / "model.yaml").write_text(
        "engine: {options: {defects: [warmup-overflow]}}\n"
        "scenarios: [distinct-seeds, warmup, uptime, batch-position]\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    reports = {}
    for jobs in (1, 3):
        reports[jobs] = tmp_path / f"jobs{jobs}.json"
        proc = subprocess.run(
            [sys.executable, "-m", "specseed", "audit", str(tmp_path / "model.yaml"),
             "--jobs", str(jobs), "--json", str(reports[jobs]), "--trace-dir",
             str(tmp_path / f"traces{jobs}")],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        assert proc.returncode == 1, proc.stderr
        assert "Traceback" not in proc.stderr
    assert _findings(reports[1]) == _findings(reports[3])
    assert json.loads(reports[3].read_text())["scenarios"] == [
        "distinct-seeds", "warmup", "uptime", "batch-position"
    ]  # fmt: skip
    serial = sorted(
        p.relative_to(tmp_path / "traces1") for p in (tmp_path / "traces1").rglob("*.jsonl")
    )
    parallel = sorted(
        p.relative_to(tmp_path / "traces3") for p in (tmp_path / "traces3").rglob("*.jsonl")
    )
    assert serial == parallel and serial


def test_an_empty_shard_says_so_and_runs_nothing() -> None:
    result = CliRunner().invoke(app, ["audit", "-s", "distinct-seeds", "--shard", "2/2"])
    assert result.exit_code == 0, result.output
    assert "shard 2/2: no scenarios fall in this shard; nothing to run." in result.output


def _children_states() -> dict[int, str]:
    """State letter (``Z`` = defunct) of each child process of this one, from /proc."""
    states = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        state, ppid = stat[stat.rindex(")") + 2 :].split()[:2]
        if int(ppid) == os.getpid():
            states[int(entry.name)] = state
    return states


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")
def test_jobs_leave_no_defunct_process(monkeypatch: pytest.MonkeyPatch) -> None:
    from specseed.run import parallel

    monkeypatch.setattr(parallel, "_cpu_count", lambda: 2)  # two workers even on one core
    config = AuditConfig()
    planned = [
        p for p in plan_audit(config, Path.cwd()) if p.scenario.name in ("distinct-seeds", "uptime")
    ]
    before = _children_states()
    result = parallel.run_audit_jobs(config, planned, Path.cwd(), jobs=2)
    assert [s.scenario.name for s in result.scenarios] == ["distinct-seeds", "uptime"]
    assert result.workers == 2  # the report's header says "on 2 workers"
    new = {pid: state for pid, state in _children_states().items() if pid not in before}
    assert "Z" not in new.values(), new


def test_jobs_are_capped_at_the_cpu_count(monkeypatch: pytest.MonkeyPatch) -> None:
    from specseed.run import parallel

    monkeypatch.setattr(parallel, "_cpu_count", lambda: 1)
    started = []
    monkeypatch.setattr(
        parallel.multiprocessing, "get_context", lambda *_a: started.append(1) or None
    )
    config = AuditConfig()
    planned = [
        p for p in plan_audit(config, Path.cwd()) if p.scenario.name in ("distinct-seeds", "uptime")
    ]
    result = parallel.run_audit_jobs(config, planned, Path.cwd(), jobs=4)
    assert not started  # one CPU: served serially, no pool
    assert [s.scenario.name for s in result.scenarios] == ["distinct-seeds", "uptime"]


KILL_WORKERS = """
import importlib.abc
import importlib.machinery
import os
import signal
import sys

# When specseed.run.parallel is imported, replace its _serve (which only --jobs workers call)
# by one that SIGKILLs the worker on its first scenario, as the OOM killer would. The
# replacement keeps the original's name, so the parent still pickles the task by reference.
class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name != "specseed.run.parallel":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        original = spec.loader.exec_module

        def exec_module(module):
            original(module)

            def _serve(task):
                os.kill(os.getpid(), signal.SIGKILL)

            _serve.__module__, _serve.__qualname__ = module.__name__, "_serve"
            module._serve = _serve

        spec.loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, _Finder())
"""


def _processes_with(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                environ = (entry / "environ").read_bytes()
            except OSError:
                continue
            # Whole entries only: the marker is the test's own temporary folder, unique to
            # this session (an earlier session's leftovers never match).
            if (b"\0" + environ).count(b"\0" + marker.encode() + b"\0"):
                found.append(int(entry.name))
    return found


def _hooked_audit(
    tmp_path: Path, sitecustomize: str, *args: str, script: list[str] | None = None, **env: str
) -> tuple[subprocess.CompletedProcess[str], dict[str, str]]:
    """``specseed audit --no-progress --jobs 2 ARGS`` in a fresh process whose every
    interpreter (the forkserver and workers too) first runs ``sitecustomize``; also returns
    the environment, for further processes under the same hook. ``script``: what the
    interpreter runs instead of ``-m specseed`` (a console script's file)."""
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(sitecustomize)
    environ = {**os.environ, "PYTHONPATH": f"{hook}{os.pathsep}{ROOT / 'src'}", **env}
    command = [sys.executable, *(script or ["-m", "specseed"])]
    done = subprocess.run(
        [*command, "audit", "--no-progress", "--jobs", "2", *args],
        capture_output=True, text=True, timeout=240, env=environ, cwd=tmp_path,
    )  # fmt: skip
    return done, environ


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs Linux /proc")
def test_a_killed_worker_is_exit_3_naming_the_scenario(tmp_path: Path) -> None:
    marker = f"SPECSEED_TEST_MARKER={tmp_path}"
    done, _ = _hooked_audit(
        tmp_path, KILL_WORKERS, "-s", "distinct-seeds", "-s", "uptime",
        SPECSEED_TEST_MARKER=str(tmp_path),
    )  # fmt: skip
    assert done.returncode == 3, done.stdout + done.stderr
    assert "a worker process died while serving" in done.stderr
    assert "distinct-seeds" in done.stderr or "uptime" in done.stderr
    assert "Traceback" not in done.stderr
    assert _processes_with(marker) == []  # no worker outlives the audit


def test_a_later_audit_in_another_folder_writes_its_traces_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Workers fork from a server the first pool started; a later audit from another working
    directory still gets its relative trace folder in that directory."""
    from specseed.run import parallel

    monkeypatch.setattr(parallel, "_cpu_count", lambda: 2)
    config = AuditConfig()
    planned = [
        p for p in plan_audit(config, Path.cwd()) if p.scenario.name in ("distinct-seeds", "uptime")
    ]
    for folder in ("first", "second"):
        (tmp_path / folder).mkdir()
        monkeypatch.chdir(tmp_path / folder)
        parallel.run_audit_jobs(config, planned, Path.cwd(), jobs=2, trace_dir=Path("traces"))
        written = sorted(p.name for p in (tmp_path / folder / "traces").rglob("*.jsonl*"))
        assert len(written) == sum(len(p.plans) for p in planned), written


def _report_worker_state(variable: str) -> tuple[str, str | None]:
    os.write(2, b"worker line on descriptor 2\n")
    return os.getcwd(), os.environ.get(variable)


def test_workers_take_the_cwd_environment_and_stderr_of_the_pool_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker start-up state of run_audit_jobs, through the real start method: each pool's
    workers see the directory, variables and descriptor 2 of the moment that pool started,
    not those of the forkserver the first pool started (an earlier audit's engine log)."""
    from concurrent.futures import ProcessPoolExecutor

    from specseed.run import parallel
    from specseed.workflows.engine_log import capture_engine_log

    for name in ("one", "two"):
        (tmp_path / name).mkdir()
        monkeypatch.chdir(tmp_path / name)
        monkeypatch.setenv("SPECSEED_TEST_POOL", name)
        with capture_engine_log(tmp_path / f"{name}.log"):
            lifeline = parallel._Lifeline()
            state = parallel._ParentState(dict(os.environ), lifeline.read)
            with ProcessPoolExecutor(
                1, mp_context=parallel._context(), initializer=state.apply
            ) as pool:
                cwd, value = pool.submit(_report_worker_state, "SPECSEED_TEST_POOL").result()
            lifeline.close()
        assert (cwd, value) == (str(tmp_path / name), name)
        assert "worker line on descriptor 2" in (tmp_path / f"{name}.log").read_text()


def test_workers_report_each_run_once_before_its_scenario_result(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Progress comes from the workers as runs start and end: one RunStarted and one
    RunFinished per run, all before the ScenarioChecked of their scenario."""
    from specseed.run import parallel
    from specseed.run.results import RunFinished, RunStarted, ScenarioChecked

    monkeypatch.setattr(parallel, "_cpu_count", lambda: 2)
    config = AuditConfig()
    names = ("distinct-seeds", "uptime", "warmup")
    planned = [p for p in plan_audit(config, Path.cwd()) if p.scenario.name in names]
    events: list[object] = []
    parallel.run_audit_jobs(config, planned, Path.cwd(), jobs=2, on_event=events.append)
    for item in planned:
        name = item.scenario.name
        checked = next(
            i
            for i, e in enumerate(events)
            if isinstance(e, ScenarioChecked) and e.result.scenario.name == name
        )
        for kind in (RunStarted, RunFinished):
            at = [i for i, e in enumerate(events) if isinstance(e, kind) and e.scenario == name]
            runs = sorted(e.run for e in events if isinstance(e, kind) and e.scenario == name)
            assert runs == sorted(p.run for p in item.plans), (kind, name)
            assert all(i < checked for i in at), (kind, name)


def test_a_workers_result_unpickles_without_torch(tmp_path: Path) -> None:
    """The parent of --jobs never imports torch: a worker's result (traces' headers with
    the engine's environment) must rebuild from plain Python types and specseed's own."""
    import pickle

    from specseed.engine_adapters.base import plain_environment
    from specseed.plan.planning import engine_settings
    from specseed.run.execute import create_adapter, serve_scenario

    config = AuditConfig()
    planned = [p for p in plan_audit(config, Path.cwd()) if p.scenario.name == "uptime"]
    engine = create_adapter(engine_settings(planned, config, Path.cwd()))
    try:
        result = serve_scenario(engine, planned[0], config, None, lambda _event: None)
        payload = (0, result, plain_environment(engine.environment()))
    finally:
        engine.close()
    (tmp_path / "result.pkl").write_bytes(pickle.dumps(payload))
    code = (
        "import pickle, sys; pickle.loads(open(sys.argv[1], 'rb').read()); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'torch')[:3])"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "result.pkl")],
        capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", done.stdout


MARK_EXITS = """
import atexit
import os
import sys
from pathlib import Path


def _mark(event):
    command = " ".join(sys.orig_argv)
    kind = "forkserver" if "from multiprocessing.forkserver import main" in command else (
        "tracker" if "resource_tracker" in command else "audit"
    )
    (Path(os.environ["SPECSEED_TEST_EXITS"]) / f"{kind}-{event}-{os.getpid()}").write_text("")


_mark("started")
atexit.register(_mark, "exit-handlers")
"""


@NEEDS_FORKSERVER
def test_the_forkserver_skips_the_interpreters_teardown_and_the_audit_keeps_its_exit_code(
    tmp_path: Path,
) -> None:
    # Every process runs this sitecustomize's exit handler on a normal exit. The forkserver
    # must end before it (its teardown with torch loaded was most of a second after the
    # audit's last line); the audit itself must run it and keep its exit status (1: a defect).
    exits = tmp_path / "exits"
    exits.mkdir()
    model = tmp_path / "model.yaml"
    model.write_text(
        "engine:\n  name: reference\n  options: {defects: [neighbor-unseeded]}\n"
        "scenarios: [batch-composition, distinct-seeds]\n"
    )
    done, env = _hooked_audit(tmp_path, MARK_EXITS, str(model), SPECSEED_TEST_EXITS=str(exits))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "on 2 workers" in done.stdout
    marks = sorted(path.name.rsplit("-", 1)[0] for path in exits.iterdir())
    assert "forkserver-started" in marks, marks  # the workers came from a forkserver
    assert "forkserver-exit-handlers" not in marks, marks
    assert "audit-exit-handlers" in marks, marks
    # Imported anywhere but a forkserver, the module changes nothing about an exit.
    plain = subprocess.run(
        [sys.executable, "-c", "import specseed.run.forkserver_exit, sys; sys.exit(3)"],
        capture_output=True, text=True, timeout=60, env=env,
    )  # fmt: skip
    assert plain.returncode == 3, plain.stderr
    marks = [path.name.rsplit("-", 1)[0] for path in exits.iterdir()]
    assert marks.count("audit-exit-handlers") == 2, marks


def test_workers_keep_torchs_numpy_warning_out_of_the_output(tmp_path: Path) -> None:
    # Where numpy is not installed (it is no dependency), importing torch warns "Failed to
    # initialize NumPy". The package filters that one warning before torch loads; the
    # forkserver must load it first as well, or every parallel audit prints it.
    done, env = _hooked_audit(
        tmp_path, "import sys\nsys.modules['numpy'] = None\n",
        "-s", "distinct-seeds", "-s", "uptime",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "on 2 workers" in done.stdout
    assert done.stderr == "", done.stderr
    probe = subprocess.run(
        [sys.executable, "-c", "import torch"], capture_output=True, text=True, timeout=120, env=env
    )
    assert "Failed to initialize NumPy" in probe.stderr  # the hook does hide numpy


MARK_PRELOADED = """
import os
import sys
from pathlib import Path

if "from multiprocessing.forkserver import main" in " ".join(sys.orig_argv):

    class _Preloaded:
        # Marks the moment the forkserver reaches the last module it preloads.
        def find_spec(self, name, path=None, target=None):
            if name == "specseed.run.forkserver_exit":
                (Path(os.environ["SPECSEED_TEST_EXITS"]) / "preloaded").write_text("")
            return None

    sys.meta_path.insert(0, _Preloaded())
"""


@pytest.mark.skipif(
    not HAS_FORKSERVER or not Path("/proc/self/environ").exists(),
    reason="needs a forkserver and Linux /proc",
)
def test_a_forkserver_started_early_that_no_pool_used_does_not_hold_up_the_exit(
    tmp_path: Path,
) -> None:
    # The default audit starts its workers' server before it reads its flags in full; a bad
    # flag then ends the audit with no pool, and the server (still importing torch) is
    # killed, not waited for, and outlives nothing.
    exits = tmp_path / "exits"
    exits.mkdir()
    marker = f"SPECSEED_TEST_MARKER={tmp_path}"
    done, _ = _hooked_audit(
        tmp_path, MARK_PRELOADED, "--jobs", "many",
        SPECSEED_TEST_EXITS=str(exits), SPECSEED_TEST_MARKER=str(tmp_path),
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert "--jobs many" in done.stderr
    assert not (exits / "preloaded").exists()  # killed mid-import: the exit did not wait
    assert _processes_with(marker) == []


MARK_APP_IMPORT = """
import os
import sys
from pathlib import Path

if "from multiprocessing.forkserver import main" in " ".join(sys.orig_argv):

    class _AppImport:
        # Installed in the forkserver, so in every worker it forks: marks the command-line
        # app (typer) being imported there.
        def find_spec(self, name, path=None, target=None):
            if name == "typer":
                (Path(os.environ["SPECSEED_TEST_EXITS"]) / f"typer-{os.getpid()}").write_text("")
            return None

    sys.meta_path.insert(0, _AppImport())
"""


@NEEDS_FORKSERVER
def test_workers_never_import_the_command_line_app(tmp_path: Path) -> None:
    # Every worker imports the main script again. The console script's file must not pull
    # in the command-line app (typer, rich and every command), which no worker runs.
    # (Python re-imports a main script, not a package's __main__: the console script is
    # the case that matters, written here as pip writes it from the installed entry point.)
    (entry,) = entry_points(group="console_scripts", name="specseed")
    script = tmp_path / "specseed"
    script.write_text(
        f"import re\nimport sys\nfrom {entry.module} import {entry.attr}\n"
        "if __name__ == '__main__':\n"
        "    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])\n"
        f"    sys.exit({entry.attr}())\n"
    )
    marks = tmp_path / "exits"
    marks.mkdir()
    done, _ = _hooked_audit(
        tmp_path, MARK_APP_IMPORT, "-s", "distinct-seeds", "-s", "uptime",
        script=[str(script)], SPECSEED_TEST_EXITS=str(marks),
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "on 2 workers" in done.stdout
    assert sorted(path.name for path in marks.iterdir()) == []


def test_matrix_workers_give_the_rows_of_one_process(monkeypatch: pytest.MonkeyPatch) -> None:
    from specseed.run import parallel
    from specseed.run.matrix import matrix_groups
    from specseed.workflows import matrix
    from specseed.workflows.matrix import run_matrix

    monkeypatch.setattr(parallel, "_cpu_count", lambda: 2)  # two workers even on one core
    defects = ["row0-seed", "engine-counter", "draw-overlap"]
    serial = run_matrix(AuditConfig(), Path.cwd(), defects=defects, scenario_filter=["uptime"])
    before = _children_states()
    heard: list[str | None] = []
    groups = matrix_groups([None, *defects], 2)
    assert groups == [[None, "row0-seed"], ["engine-counter", "draw-overlap"]]
    rows = matrix.run_matrix_jobs(
        AuditConfig(),
        Path.cwd(),
        groups,
        scenario_filter=["uptime"],
        jobs=2,
        on_row=lambda row: heard.append(row.defect),
    )
    assert rows == list(serial.rows)  # the same rows, in the same order
    assert sorted(heard, key=str) == sorted([None, *defects], key=str)  # each once, as done
    assert rows[0].verdict == "pass" and {"pass", "fail"} <= {r.verdict for r in rows[1:]}
    new = {pid: state for pid, state in _children_states().items() if pid not in before}
    assert "Z" not in new.values(), new
    with pytest.raises(ValueError, match="jobs=1"):
        run_matrix(AuditConfig(), Path.cwd(), defects=defects, jobs=2, on_defect=print)


KILL_MATRIX_WORKERS = KILL_WORKERS.replace('"_serve"', '"_engine_task"').replace(
    "module._serve = _serve", "module._engine_task = _serve"
)


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs Linux /proc")
def test_a_killed_matrix_worker_is_exit_3(tmp_path: Path) -> None:
    assert KILL_MATRIX_WORKERS != KILL_WORKERS
    marker = f"SPECSEED_TEST_MARKER={tmp_path}"
    done, _ = _hooked_audit(
        tmp_path, KILL_MATRIX_WORKERS, "--matrix", "-s", "distinct-seeds",
        SPECSEED_TEST_MARKER=str(tmp_path),
    )  # fmt: skip
    assert done.returncode == 3, done.stdout + done.stderr
    assert "a worker process died while auditing the matrix" in done.stderr
    assert "Traceback" not in done.stderr
    assert _processes_with(marker) == []  # no worker outlives the matrix


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs Linux /proc")
@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_signal_stops_the_matrix_and_every_worker(tmp_path: Path, jobs: str) -> None:
    # SIGTERM once the first audit is in: exit 143, the reason, and no worker left behind
    # (they would otherwise serve on, orphaned, holding the output open).
    marker = f"SPECSEED_TEST_MARKER={tmp_path}"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "SPECSEED_TEST_MARKER": str(tmp_path)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "specseed", "audit", "--matrix", "-s", "uptime", "--jobs", jobs],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path,
    )  # fmt: skip
    assert proc.stderr is not None
    first = proc.stderr.readline()
    assert "[1/" in first and "audited with defect" in first, first
    proc.send_signal(signal.SIGTERM)
    try:
        out, err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:  # hung: leave no process to a later test's marker
        for pid in [proc.pid, *_processes_with(marker)]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        raise
    assert proc.returncode == 143, out + err
    assert "interrupted by SIGTERM: the matrix is incomplete" in " ".join(err.split())
    assert "Traceback" not in err
    assert _processes_with(marker) == []


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs Linux /proc")
def test_workers_leave_when_the_audit_is_killed_without_a_word(tmp_path: Path) -> None:
    # SIGKILL (the out-of-memory killer, kill -9) leaves no time to stop the pool: the
    # workers must notice on their own, or they, the forkserver and the resource tracker
    # wait forever on queues no one writes to, holding engines and the output pipe.
    marker = f"SPECSEED_TEST_MARKER={tmp_path}"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "SPECSEED_TEST_MARKER": str(tmp_path)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "specseed", "audit", "--jobs", "2", "-s", "greedy-speculation",
         "-s", "losslessness", "-s", "uptime"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path,
    )  # fmt: skip
    assert proc.stderr is not None
    first = proc.stderr.readline()  # the audit has started: workers are serving
    assert "auditing engine reference" in first, first
    time.sleep(1.0)
    assert len(_processes_with(marker)) >= 3, "no workers to orphan"
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 20
    while _processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _processes_with(marker) == []


MARK_PRELOAD_COLLECTIONS = """
import gc
import os
import sys
from pathlib import Path

if "from multiprocessing.forkserver import main" in " ".join(sys.orig_argv):
    _MARKS = Path(os.environ["SPECSEED_TEST_EXITS"])

    class _TorchImport:
        # Marks whether the collector is on when the forkserver starts importing torch.
        def find_spec(self, name, path=None, target=None):
            if name == "torch":
                (_MARKS / f"torch-{os.getpid()}-{gc.isenabled()}").write_text("")
            return None

    def _collections(phase, info):
        # Installed in the forkserver, so in every worker it forks: marks each collection.
        if phase == "start":
            (_MARKS / f"gen{info['generation']}-{os.getpid()}").write_text("")

    sys.meta_path.insert(0, _TorchImport())
    gc.callbacks.append(_collections)
"""


@NEEDS_FORKSERVER
def test_the_forkserver_imports_with_the_collector_off_and_its_workers_collect(
    tmp_path: Path,
) -> None:
    # Full collections during torch's import walk every object it made so far, again and
    # again; the workers' server imports with the collector off. Its workers, forked after
    # the import, must collect as any process does.
    marks = tmp_path / "marks"
    marks.mkdir()
    done, _ = _hooked_audit(
        tmp_path, MARK_PRELOAD_COLLECTIONS, "-s", "distinct-seeds", "-s", "uptime",
        SPECSEED_TEST_EXITS=str(marks),
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "on 2 workers" in done.stdout
    names = [path.name for path in marks.iterdir()]
    (torch_import,) = [name for name in names if name.startswith("torch-")]
    _, server, enabled = torch_import.split("-")
    assert enabled == "False", names  # the server imported torch with the collector off
    assert f"gen2-{server}" not in names  # no full collection (it collects young objects)
    workers = {name.split("-")[1] for name in names if name.startswith("gen")} - {server}
    assert len(workers) == 2, names  # each worker collects
