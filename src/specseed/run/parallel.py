"""Splitting an audit: ``--shard i/n`` across CI machines, ``--jobs N`` across processes.

Sharding is deterministic and needs no coordination: the scenarios are sorted by name and
dealt round-robin, so shard ``i`` of ``n`` gets the names at sorted positions ``i - 1``,
``i - 1 + n``, ...; every scenario lands in exactly one shard whatever the order model.yaml
lists them in, and shards differ in size by at most one.

Jobs run independent scenarios in worker processes, each with its own engine (memory grows
by one engine per job). Every run already starts on fresh engine state, so the findings are
those of a serial audit; results are put back in the planned order. The parent holds the
``--trace-dir`` lock; workers write their runs' traces into it.

Workers start from a ``forkserver`` that has imported torch and the engine modules once
(``run/forkserver.py``), so a worker is ready in milliseconds instead of paying the imports
again (about a second each on a 2-core machine, which made ``--jobs 2`` slower than serial
there); the forkserver itself never runs torch, so no OpenMP pool is forked. Where there is no
forkserver (not POSIX) workers are spawned. Scenarios are handed out largest first (by the
tokens their runs ask for, :func:`scenario_cost`), so the longest one does not start last and
leave the other workers idle.

Workers live in a ``concurrent.futures.ProcessPoolExecutor`` rather than a
``multiprocessing.Pool``: a worker that dies without a word (SIGKILL from the OOM killer)
breaks the executor, and every waiting call raises ``BrokenProcessPool`` at once, where a
``Pool`` replaces the worker and waits forever for the task it lost. The audit then stops
with ``EngineError`` (exit 3) naming the scenarios that were in flight. The other way
round, workers leave on their own when the parent dies without stopping them (SIGKILL): each
watches a pipe only the parent can hold open (``_Lifeline``).
"""

from __future__ import annotations

import contextlib
import gc
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from multiprocessing import reduction
from pathlib import Path
from typing import Any, Literal, TypeVar

from specseed.core.errors import AuditInterrupted, EngineError, InputError, ScenarioError
from specseed.engine_adapters.base import EngineAdapter, EngineSettings, plain_environment
from specseed.plan.planning import PlannedScenario, engine_settings
from specseed.run.execute import create_adapter, run_audit, serve_scenario
from specseed.run.forkserver import context as _context
from specseed.run.forkserver import usable_cpus as _cpu_count
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

T = TypeVar("T")
R = TypeVar("R")


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


def parse_jobs(text: str) -> int | Literal["auto"]:
    """``--jobs``: ``"auto"`` or a whole number >= 1 (``InputError`` otherwise)."""
    if text.strip().lower() == "auto":
        return "auto"
    try:
        jobs = int(text)
    except ValueError:
        jobs = 0
    if jobs < 1:
        raise InputError(
            f"--jobs {text}: give 1 or more worker processes, or auto",
            hint="for example --jobs 4; auto (the default) picks one per CPU",
        )
    return jobs


def shard(planned: Sequence[PlannedScenario], index: int, count: int) -> list[PlannedScenario]:
    """The scenarios of shard ``index`` (1-based) of ``count``, in planned order."""
    names = sorted(p.scenario.name for p in planned)
    mine = {name for position, name in enumerate(names) if position % count == index - 1}
    return [p for p in planned if p.scenario.name in mine]


def scenario_cost(item: PlannedScenario) -> int:
    """Tokens a scenario's runs ask for (warmup, prior traffic and scenario requests): the
    order of handing scenarios to workers, largest first."""
    from specseed.engine_adapters.base import warmup_requests

    return sum(
        request.max_tokens
        for plan in item.plans
        for request in (*warmup_requests(plan), *plan.prior_traffic, *plan.requests)
    )


AUTO_ENGINES = frozenset({"reference"})
"""Engines ``--jobs auto`` runs in one worker per CPU, on the CPU and with their built-in
model only: small enough that each worker can load its own copy. A checkpoint (of any size),
another engine (a vLLM model) or a GPU stays in one process unless ``--jobs N`` asks
otherwise."""


AUTO_MIN_TOKENS = 2000
"""The least work (tokens the runs ask for, :func:`scenario_cost`) ``--jobs auto`` hands to
workers. Workers cost about 0.5 to 1 s more than one process (the server's imports happen
after planning, the results travel back; measured on 2 cores): two small scenarios (300
tokens) took 3.7 s with two workers against 2.8 s in one process, the built-in library
(about 15,800 tokens) 7.4 s against 10.4 s."""


def resolve_jobs(jobs: int | str, config: AuditConfig, planned: Sequence[PlannedScenario]) -> int:
    """``--jobs`` as a number: ``auto`` is one worker per usable CPU (at most one per
    scenario) for the built-in models of :data:`AUTO_ENGINES` on the CPU, when the scenarios
    ask for at least :data:`AUTO_MIN_TOKENS` tokens; else 1.

    Measured (the built-in library, idle 2-core x86_64 VM, whole processes, median of 5
    pairs): the default audit took 7.4 s with auto against 10.4 s serial; on 4 CPUs of an
    Intel Xeon (median of 3), 10.3 s against 21.0 s. The longest scenario (about 3 s here) bounds what more CPUs
    can give."""
    if jobs != "auto":
        return int(jobs)
    if not _auto_engine(config):
        return 1
    if sum(scenario_cost(item) for item in planned) < AUTO_MIN_TOKENS:
        return 1
    return workers_for(_cpu_count(), len(planned))


def resolve_matrix_jobs(jobs: int | str, config: AuditConfig) -> int:
    """``--jobs`` of ``--matrix``: ``auto`` is one worker per usable CPU where
    :func:`resolve_jobs` would take workers at all (the built-in models of
    :data:`AUTO_ENGINES` on the CPU): one audit per defect class is always enough work."""
    if jobs != "auto":
        return int(jobs)
    return _cpu_count() if _auto_engine(config) else 1


def _auto_engine(config: AuditConfig) -> bool:
    """Whether ``--jobs auto`` may load one engine per CPU: a built-in model of
    :data:`AUTO_ENGINES`, on the CPU."""
    engine = config.engine
    built_in = engine.checkpoint is None and engine.draft_checkpoint is None
    return engine.name in AUTO_ENGINES and engine.device == "cpu" and built_in


def workers_for(jobs: int, tasks: int) -> int:
    """Worker processes for ``tasks`` independent tasks under ``--jobs N``: at most N, one
    per task, and no more than the CPUs this process may use (a worker beyond them only adds
    an engine's start-up and memory)."""
    return max(1, min(jobs, _cpu_count(), tasks))


# -- worker processes ---------------------------------------------------------------------

_worker: dict[str, Any] = {}
"""This worker's engine and audit settings (set by ``_init_worker``)."""


def _raise_interrupt(signum: int, _frame: object) -> None:
    _worker["stopping"] = True
    if _worker.get("serving"):
        # The parent stops workers with SIGTERM whatever stopped it, and says which signal
        # that was first (``_Pool.stop``): the trace names the audit's signal, not ours.
        stopped_by = _worker.get("stop_signal")
        parents = stopped_by.value if stopped_by is not None else 0
        raise AuditInterrupted(signal.Signals(parents or signum).name)
    # An idle worker has no trace to end. Raising here would escape the executor's worker
    # loop with a traceback, and leaving (os._exit) would break the pool under the workers
    # still ending their traces: remember it, refuse the next task, and let the executor's
    # shutdown end this process.


@dataclass(frozen=True)
class _ParentState:
    """What a worker takes from the parent at the moment its pool starts, whichever process
    forked it: a forkserver started by an earlier audit of this process holds that audit's
    environment and descriptor 2 (its engine log, see ``workflows.engine_log``). The working
    directory and ``sys.path`` travel with multiprocessing's own start-up data. Module-level
    values read at import (``SPECSEED_LINEAR``) are the forkserver's.

    ``lifeline`` is the read end of a pipe whose write end only the parent holds
    (:class:`_Lifeline`): a worker reads end-of-file there when the parent is gone."""

    environ: dict[str, str]
    lifeline: int

    def __reduce__(self) -> tuple[Any, ...]:
        # Called while the pool starts a worker: DupFd hands the worker a copy of this
        # process's descriptor 2 (through the forkserver, or inherited when spawned), and
        # one of the lifeline's read end.
        return (
            _ParentState._rebuild,
            (self.environ, reduction.DupFd(2), reduction.DupFd(self.lifeline)),
        )

    @staticmethod
    def _rebuild(environ: dict[str, str], stderr: Any, lifeline: Any) -> _ParentState:
        fd = stderr.detach()
        if fd != 2:
            os.dup2(fd, 2)
            os.close(fd)
        return _ParentState(environ, lifeline.detach())

    def apply(self) -> None:
        os.environ.clear()
        os.environ.update(self.environ)
        threading.Thread(target=_leave_with_parent, args=(self.lifeline,), daemon=True).start()


class _Lifeline:
    """A pipe no one writes to, whose write end only this process holds. Workers hold
    only the read end (``_ParentState``), so they read end-of-file there exactly when this
    process is gone, however it went."""

    def __init__(self) -> None:
        self.read, self._write = os.pipe()  # not inherited by anything this process execs

    def close(self) -> None:
        """After the pool has shut down: no worker is left to watch it."""
        for fd in (self.read, self._write):
            with contextlib.suppress(OSError):
                os.close(fd)


def _leave_with_parent(lifeline: int) -> None:
    """A worker's watch on the parent: when it is gone without stopping the pool (SIGKILL,
    the out-of-memory killer), leave at once. Otherwise the worker, the forkserver and the
    resource tracker would wait forever on queues that no one will write to, holding an
    engine's memory and the audit's output (a shell's pipe stays open)."""
    with contextlib.suppress(OSError):
        while os.read(lifeline, 1):
            pass
    os._exit(EXIT_PARENT_GONE)


EXIT_PARENT_GONE = 3
"""A worker's exit status when its parent died first (what is left of the audit could not
run: exit 3, as for an engine that could not run)."""


def _init_worker(
    config: AuditConfig,
    settings: EngineSettings,
    trace_dir: Path | None,
    trace_writer: Callable[[str, str], TraceWriter] | None,
    parent: _ParentState,
    events: Any,
    stop_signal: Any,
) -> None:
    parent.apply()
    # Ctrl-C and a terminal's hangup reach the whole process group: the parent decides, and
    # stops workers with SIGTERM, which ends the current run's trace with an Interrupted
    # failure (a worker killed by SIGHUP would read as an engine crash).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(signal, "SIGHUP"):
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _raise_interrupt)
    # One torch thread per worker: N workers x the default thread count would spin OpenMP
    # threads against each other (the bits do not depend on the thread count; numerics.py).
    import torch

    torch.set_num_threads(1)
    # What torch's import made (about 190,000 objects) lives as long as the worker: out of
    # the collector's sight, a full collection no longer walks it (measured: 0.18 s of full
    # collections in a serial audit of the built-in library, 0.01 s frozen). A forkserver
    # froze its preload already (forkserver_preload); this covers what the worker made
    # since, and a spawned worker, which imported torch just above.
    gc.freeze()
    _worker.update(
        config=config,
        settings=settings,
        trace_dir=trace_dir,
        trace_writer=trace_writer,
        events=events,
        stop_signal=stop_signal,
    )


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
    with _serving_task():
        engine = _engine()
        # On a stop, serve_scenario ends the current trace before the interrupt leaves it.
        result = serve_scenario(
            engine,
            item,
            _worker["config"],
            folder,
            _send_run_event,
            trace_writer=_worker["trace_writer"],
        )
    return index, result, plain_environment(engine.environment())


def _engine_task(task: tuple[Callable[[EngineAdapter, Any], Any], Any]) -> Any:
    """One task of :func:`run_engine_tasks` on this worker's engine: ``work(engine, item)``.
    ``work`` pickles by reference, so it must live at or below this layer (the detection
    matrix's is ``run.matrix.MatrixTask``)."""
    work, item = task
    with _serving_task():
        return work(_engine(), item)


@contextlib.contextmanager
def _serving_task() -> Iterator[None]:
    """A worker's task: refused once the parent has stopped the pool, and interruptible
    by its SIGTERM while it runs (``_raise_interrupt``). An interrupt leaves the worker as
    ``SystemExit(143)``, without a traceback."""
    if _worker.get("stopping"):
        raise SystemExit(143)  # stopped before this task began
    _worker["serving"] = True
    try:
        yield
    except KeyboardInterrupt:
        raise SystemExit(143) from None
    finally:
        _worker["serving"] = False


def _send_run_event(event: object) -> None:
    """A run's start and end, to the parent's progress as they happen (the scenario's
    result comes back with the task)."""
    if isinstance(event, (RunStarted, RunFinished)):
        _worker["events"].put(event)


class _Pool(ProcessPoolExecutor):
    """The worker pool, with the signal that stopped the audit shared with its workers."""

    def __init__(self, workers: int, context: multiprocessing.context.BaseContext, *args: Any):
        # The signal number, 0 until the parent stops the pool (read by ``_raise_interrupt``).
        self.stop_signal = context.Value("i", 0)
        super().__init__(
            workers,
            mp_context=context,
            initializer=_init_worker,
            initargs=(*args, self.stop_signal),
        )

    def stop(self, signal_name: str | None = None) -> None:
        """SIGTERM every live worker, once each has been told ``signal_name`` stopped the
        audit (the first name given stays; the executor has no public way to stop busy
        workers)."""
        if signal_name is not None and not self.stop_signal.value:
            self.stop_signal.value = signal.Signals[signal_name].value
        processes = getattr(self, "_processes", None) or {}
        for process in list(processes.values()):
            if process.is_alive() and process.pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(process.pid, signal.SIGTERM)


def _start_pool(
    workers: int,
    context: multiprocessing.context.BaseContext,
    config: AuditConfig,
    settings: EngineSettings,
    trace_dir: Path | None,
    trace_writer: Callable[[str, str], TraceWriter] | None,
    events: Any,
    lifeline: _Lifeline,
) -> _Pool:
    """The worker pool: each worker starts in ``_init_worker`` with this process's state."""
    parent = _ParentState(dict(os.environ), lifeline.read)
    return _Pool(workers, context, config, settings, trace_dir, trace_writer, parent, events)


def _end_pool(executor: _Pool, lifeline: _Lifeline) -> None:
    """Stop every worker and join them (no defunct processes), then close the lifeline."""
    executor.stop()
    executor.shutdown(wait=True, cancel_futures=True)
    multiprocessing.active_children()  # reap any other finished child of ours
    lifeline.close()


def _signal_of(exc: KeyboardInterrupt) -> str:
    """The signal behind an interrupt (a plain ``KeyboardInterrupt`` is Ctrl-C's)."""
    return exc.signal_name if isinstance(exc, AuditInterrupted) else "SIGINT"


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

    Runs' traces go through ``trace_writer(scenario, run)`` when given (in the workers too, so
    it must pickle: ``bundle.format.BundleTraces``), else under ``trace_dir``, whose lock the
    parent holds (``lock_trace_dir`` False when the caller already holds it).

    ``jobs`` is capped at the CPUs this process may use: a worker beyond them only adds an
    engine's start-up and memory. Each worker runs torch on one thread."""
    if workers_for(jobs, len(planned)) <= 1:
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
    context = _context()
    events = context.SimpleQueue()  # workers' RunStarted and RunFinished, for the progress

    def relay() -> None:
        while not events.empty():
            emit(events.get())

    workers = workers_for(jobs, len(planned))
    lifeline = _Lifeline()
    executor = _start_pool(
        workers, context, config, settings, trace_dir, trace_writer, events, lifeline
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
            largest_first = sorted(
                enumerate(planned), key=lambda pair: scenario_cost(pair[1]), reverse=True
            )
            for index, item in largest_first:
                pending[executor.submit(_serve, (index, item))] = item.scenario.name
            while pending:
                ready, _ = wait(pending, timeout=0.2, return_when=FIRST_COMPLETED)
                relay()
                for future in ready:
                    index, result, env = future.result()
                    del pending[future]
                    done[index] = result
                    environment = env
                    relay()  # the worker sent its runs' events before its result
                    emit(ScenarioChecked(result))
        except BrokenProcessPool:
            lost = ", ".join(sorted(set(pending.values()))) or "the engine check"
            raise EngineError(
                f"a worker process died while serving: {lost} (killed without a word, as "
                "the out-of-memory killer does); the other scenarios' results are lost",
                hint="use fewer --jobs (each loads its own engine) or give the audit more memory",
            ) from None
        except KeyboardInterrupt as exc:
            interrupted = _signal_of(exc)
            # SIGTERM, naming our signal: each worker ends its current trace, then stops.
            executor.stop(interrupted)
            executor.shutdown(wait=True, cancel_futures=True)
            # Scenarios a worker finished before the signal count as finished, as in a
            # serial audit (their results may not have been read yet).
            for future in list(pending):
                if future.done() and not future.cancelled() and future.exception() is None:
                    index, result, env = future.result()
                    done[index] = result
                    environment = env
                    relay()
                    emit(ScenarioChecked(result))
        else:
            executor.shutdown(wait=True)
    finally:
        _end_pool(executor, lifeline)
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
        workers=workers,
    )


def run_engine_tasks(
    config: AuditConfig,
    settings: EngineSettings,
    work: Callable[[EngineAdapter, T], R],
    items: Sequence[T],
    *,
    jobs: int,
    on_result: Callable[[R], None] | None = None,
    doing: str = "serving",
    in_flight: Callable[[list[T]], str] = lambda items: f"{len(items)} tasks in flight",
) -> list[R]:
    """``work(engine, item)`` for each of ``items`` in ``jobs`` worker processes, each on an
    engine of its own built from ``settings``; returns the results in the order of
    ``items``. ``work`` must pickle (a module-level function or a frozen dataclass of this
    layer or below). ``on_result`` hears each result once its item has been served. A worker
    that dies is ``EngineError`` (saying what it was ``doing`` and, through ``in_flight``,
    which items were lost); Ctrl-C stops the workers and raises ``KeyboardInterrupt``."""
    workers = workers_for(jobs, len(items))
    context = _context()
    lifeline = _Lifeline()
    executor = _start_pool(
        workers, context, config, settings, None, None, context.SimpleQueue(), lifeline
    )
    pending: dict[Future[R], int] = {}
    results: dict[int, R] = {}
    try:
        for index, item in enumerate(items):
            pending[executor.submit(_engine_task, (work, item))] = index
        while pending:
            ready, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in ready:
                index = pending.pop(future)
                results[index] = future.result()
                if on_result is not None:
                    on_result(results[index])
    except BrokenProcessPool:
        lost = in_flight([items[i] for i in sorted(pending.values())])
        raise EngineError(
            f"a worker process died while {doing} ({lost}), "
            "killed without a word, as the out-of-memory killer does",
            hint="use fewer --jobs (each loads its own engine) or give the audit more memory",
        ) from None
    except KeyboardInterrupt as exc:
        executor.stop(_signal_of(exc))
        raise
    finally:
        _end_pool(executor, lifeline)
    return [results[i] for i in range(len(items))]
