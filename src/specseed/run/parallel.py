"""Splitting an audit: ``--shard i/n`` across CI machines, ``--jobs N`` across processes.

Sharding is deterministic and needs no coordination: the scenarios are sorted by name and
dealt round-robin, so shard ``i`` of ``n`` gets the names at sorted positions ``i - 1``,
``i - 1 + n``, ...; every scenario lands in exactly one shard whatever the order model.yaml
lists them in, and shards differ in size by at most one.

Jobs run independent scenarios in worker processes (``spawn``: each loads its own engine, so
memory grows by one engine per job). Every run already starts on fresh engine state, so the
findings are those of a serial audit; results are put back in the planned order. The parent
holds the ``--trace-dir`` lock; workers write their runs' traces into it.

Workers live in a ``concurrent.futures.ProcessPoolExecutor`` rather than a
``multiprocessing.Pool``: a worker that dies without a word (SIGKILL from the OOM killer)
breaks the executor, and every waiting call raises ``BrokenProcessPool`` at once, where a
``Pool`` replaces the worker and waits forever for the task it lost. The audit then stops
with ``EngineError`` (exit 3) naming the scenarios that were in flight.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

from specseed.core.errors import AuditInterrupted, EngineError, InputError, ScenarioError
from specseed.engine_adapters.base import EngineAdapter, EngineSettings
from specseed.plan.planning import PlannedScenario, engine_settings
from specseed.run.execute import create_adapter, run_audit, serve_scenario
from specseed.run.results import (
    AuditResult,
    AuditStarted,
    EventHandler,
    RunFinished,
    RunStarted,
    ScenarioChecked,
    ScenarioResult,
)
from specseed.scenarios.schema import AuditConfig
from specseed.traces.folder import TraceDir
from specseed.traces.records import TraceWriter


def parse_shard(text: str) -> tuple[int, int]:
    """``"2/5"`` as (2, 5); ``InputError`` unless 1 <= i <= n."""
    index, slash, count = text.partition("/")
    try:
        i, n = int(index), int(count)
    except ValueError:
        i = n = 0
    if not slash or n < 1 or not 1 <= i <= n:
        raise InputError(
            f"--shard {text}: expected i/n with 1 <= i <= n", hint="for example --shard 1/4"
        )
    return i, n


def shard(planned: Sequence[PlannedScenario], index: int, count: int) -> list[PlannedScenario]:
    """The scenarios of shard ``index`` (1-based) of ``count``, in planned order."""
    names = sorted(p.scenario.name for p in planned)
    mine = {name for position, name in enumerate(names) if position % count == index - 1}
    return [p for p in planned if p.scenario.name in mine]


def _cpu_count() -> int:
    """CPUs this process may run on (the affinity mask where the platform has one)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


# -- worker processes ---------------------------------------------------------------------

_worker: dict[str, Any] = {}
"""This worker's engine and audit settings (set by ``_init_worker``)."""


def _raise_interrupt(signum: int, _frame: object) -> None:
    _worker["stopping"] = True
    if _worker.get("serving"):
        raise AuditInterrupted(signal.Signals(signum).name)
    # An idle worker has no trace to end. Raising here would escape the executor's worker
    # loop with a traceback, and leaving (os._exit) would break the pool under the workers
    # still ending their traces: remember it, refuse the next task, and let the executor's
    # shutdown end this process.


def _init_worker(config: AuditConfig, settings: EngineSettings, trace_dir: Path | None) -> None:
    # Ctrl-C reaches the whole process group: the parent decides, and stops workers with
    # SIGTERM, which ends the current run's trace with an Interrupted failure.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _raise_interrupt)
    # One torch thread per worker: N workers x the default thread count would spin OpenMP
    # threads against each other (the bits do not depend on the thread count; numerics.py).
    import torch

    torch.set_num_threads(1)
    _worker.update(config=config, settings=settings, trace_dir=trace_dir)


def _engine() -> EngineAdapter:
    if "engine" not in _worker:
        _worker["engine"] = create_adapter(_worker["settings"])
    engine: EngineAdapter = _worker["engine"]
    return engine


def _validate(planned: Sequence[PlannedScenario]) -> list[str]:
    engine = _engine()
    return [p for item in planned for plan in item.plans for p in engine.validate(plan)]


def _serve(task: tuple[int, PlannedScenario]) -> tuple[int, ScenarioResult, dict[str, str]]:
    index, item = task
    trace_dir = _worker["trace_dir"]
    folder = TraceDir(trace_dir) if trace_dir is not None else None  # the parent holds the lock
    if _worker.get("stopping"):
        raise SystemExit(143)  # the audit was stopped before this task began
    _worker["serving"] = True
    try:
        engine = _engine()
        result = serve_scenario(engine, item, _worker["config"], folder, lambda _event: None)
    except KeyboardInterrupt:
        # The parent stopped the audit; serve_scenario already ended the current trace.
        # SystemExit leaves the worker without a traceback.
        raise SystemExit(143) from None
    finally:
        _worker["serving"] = False
    return index, result, engine.environment()


def _stop_workers(executor: ProcessPoolExecutor) -> None:
    """SIGTERM every live worker (the executor has no public way to stop busy workers)."""
    processes = getattr(executor, "_processes", None) or {}
    for process in list(processes.values()):
        if process.is_alive() and process.pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, signal.SIGTERM)


def run_audit_jobs(
    config: AuditConfig,
    planned: Sequence[PlannedScenario],
    base_dir: Path,
    *,
    jobs: int,
    trace_dir: Path | None = None,
    on_event: EventHandler | None = None,
    command: str = "",
    trace_writer: Callable[[str, str], TraceWriter] | None = None,
    lock_trace_dir: bool = True,
) -> AuditResult:
    """``run_audit`` with scenarios spread over ``jobs`` worker processes (same findings).

    Workers write their traces under ``trace_dir`` (``trace_writer`` serves the serial case
    only); ``lock_trace_dir`` False when the caller already holds the folder's lock.

    ``jobs`` is capped at the CPUs this process may use: a worker beyond them only adds an
    engine's start-up and memory. Each worker runs torch on one thread."""
    jobs = min(jobs, _cpu_count())
    if jobs <= 1 or len(planned) <= 1:
        return run_audit(
            config,
            planned,
            base_dir,
            trace_dir=trace_dir,
            on_event=on_event,
            command=command,
            trace_writer=trace_writer,
            lock_trace_dir=lock_trace_dir,
        )
    emit = on_event or (lambda _event: None)
    started = time.perf_counter()
    done: dict[int, ScenarioResult] = {}
    environment: dict[str, str] = {}
    interrupted: str | None = None
    lock = TraceDir(trace_dir) if trace_dir is not None and lock_trace_dir else None
    if lock is not None:
        lock.lock()
    # Workers build their engines from the settings planning resolved (never validated again).
    settings = engine_settings(planned, config, base_dir)
    context = multiprocessing.get_context("spawn")
    executor = ProcessPoolExecutor(
        min(jobs, len(planned)),
        mp_context=context,
        initializer=_init_worker,
        initargs=(config, settings, trace_dir),
    )
    pending: dict[Future[tuple[int, ScenarioResult, dict[str, str]]], str] = {}
    try:
        emit(
            AuditStarted(
                scenarios=len(planned),
                runs=sum(len(p.plans) for p in planned),
                engine=config.engine.name,
            )
        )
        try:
            problems = executor.submit(_validate, list(planned)).result()
            if problems:
                raise ScenarioError("the engine cannot serve these scenarios as written", problems)
            for index, item in enumerate(planned):
                pending[executor.submit(_serve, (index, item))] = item.scenario.name
            while pending:
                ready, _ = wait(pending, return_when=FIRST_COMPLETED)
                for future in ready:
                    index, result, env = future.result()
                    del pending[future]
                    done[index] = result
                    environment = env
                    for name, trace in result.traces.items():
                        emit(RunStarted(result.scenario.name, name))
                        emit(
                            RunFinished(result.scenario.name, name, trace.end.seconds, trace.failed)
                        )
                    emit(ScenarioChecked(result))
        except BrokenProcessPool:
            lost = ", ".join(sorted(set(pending.values()))) or "the engine check"
            raise EngineError(
                f"a worker process died while serving: {lost} (killed without a word, as "
                "the out-of-memory killer does); the other scenarios' results are lost",
                hint="use fewer --jobs (each loads its own engine) or give the audit more memory",
            ) from None
        except KeyboardInterrupt as exc:
            interrupted = exc.signal_name if isinstance(exc, AuditInterrupted) else "SIGINT"
            _stop_workers(executor)  # SIGTERM: each worker ends its current trace, then stops
            executor.shutdown(wait=True, cancel_futures=True)
        else:
            executor.shutdown(wait=True)
    finally:
        _stop_workers(executor)
        executor.shutdown(wait=True, cancel_futures=True)  # joins them: no defunct processes
        multiprocessing.active_children()  # reap any other finished child of ours
        if lock is not None:
            lock.release()
    results = tuple(done[i] for i in sorted(done))
    finished = {r.scenario.name for r in results}
    return AuditResult(
        config=config,
        contract=config.engine.contract,
        scenarios=results,
        environment=environment,
        seconds=time.perf_counter() - started,
        command=command,
        interrupted=interrupted,
        unfinished=tuple(p.scenario.name for p in planned if p.scenario.name not in finished),
    )
