"""One engine's lifetime, shared by every workflow: loaded once, serving run plans, its log
captured, interrupts honoured, closed.

An ``EngineSession`` is a context manager. Inside it the engine's own log (vLLM's logger,
stderr of in-process engines) goes to ``log`` when one is given (``engine_log``), and
specseed's own terminal output is pointed at the terminal through ``on_terminal``. The engine
is built on first use from ``settings`` (``run.execute.create_adapter``), or is the one the
caller built (``adapter``, never closed here), and serves every audit of the session: run
plans (``run``) or tasks of the caller's (``map``), in this process or, with ``jobs`` > 1,
through ``run.parallel``'s workers, each with an engine of its own. Leaving the session closes
the engine it built, then restores the log.

A signal while the engine runs arrives as ``KeyboardInterrupt`` (``AuditInterrupted`` under
an ``InterruptGuard``). The session lets it go on up, after deferring the guard so that a
second signal cannot cut the engine's closing short; ``interrupted`` names the signal.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TextIO, TypeVar

from specseed.workflows.engine_log import capture_engine_log

if TYPE_CHECKING:  # torch and the engines load only when a session serves
    from specseed.engine_adapters.base import EngineAdapter, EngineSettings
    from specseed.plan.planning import PlannedScenario
    from specseed.run.results import AuditResult, EventHandler
    from specseed.scenarios.schema import AuditConfig
    from specseed.traces.records import TraceWriter

T = TypeVar("T")
R = TypeVar("R")


class InterruptGuard(Protocol):
    """What a workflow needs of a signal handler (``cli/interrupts.py`` is one): while the
    engines run, a signal raises ``AuditInterrupted``; after ``defer``, it is only noted in
    ``received``, so no report is cut short; ``resume`` raises one noted meanwhile and lets
    the next raise."""

    received: str | None

    def defer(self) -> None: ...

    def resume(self) -> None: ...

    def __enter__(self) -> InterruptGuard: ...

    def __exit__(self, *exc: object) -> None: ...


class NoGuard:
    """No signal handlers: Ctrl-C still stops the runs (``KeyboardInterrupt`` is SIGINT)."""

    received: str | None = None

    def defer(self) -> None:
        pass

    def resume(self) -> None:
        pass

    def __enter__(self) -> NoGuard:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


class EngineSession:
    """One engine, loaded at most once, for the duration of a ``with`` block.

    ``settings``: what the engine is built from (``ResolvedAudit.engine``, or
    ``plan.planning.base_settings``). ``adapter``: an engine the caller built, used instead
    (one process only). ``jobs``: worker processes for ``run`` and ``map`` (1: this process).
    ``log``: where the engine's log goes while the session is open (None: the terminal);
    ``log_contained``: it is a bundle's file, never written through a link
    (``engine_log.capture_engine_log``).
    ``on_terminal``: told the stream that reaches the terminal while the log is captured,
    and None when the session ends. ``guard``: the active interrupt guard.
    """

    def __init__(
        self,
        settings: EngineSettings | None,
        *,
        adapter: EngineAdapter | None = None,
        jobs: int = 1,
        log: Path | None = None,
        log_contained: bool = False,
        on_terminal: Callable[[TextIO | None], None] | None = None,
        guard: InterruptGuard | None = None,
    ) -> None:
        if settings is None and adapter is None:
            raise ValueError("an engine session needs settings or an adapter")
        if adapter is not None and jobs > 1:
            raise ValueError("an engine built by the caller serves one process: jobs=1")
        self.settings = settings
        self.jobs = jobs
        self.log = log
        self.log_contained = log_contained
        self.on_terminal = on_terminal
        self.guard: InterruptGuard = guard if guard is not None else NoGuard()
        self.interrupted: str | None = None
        """The signal that stopped the session's work, once it has."""
        self._given = adapter
        self._engine: EngineAdapter | None = adapter
        self._stack = ExitStack()

    # -- the lifetime ---------------------------------------------------------------------

    def __enter__(self) -> EngineSession:
        terminal = self._stack.enter_context(
            capture_engine_log(self.log, contained=self.log_contained)
        )
        if self.on_terminal is not None:
            self.on_terminal(terminal)
            self._stack.callback(self.on_terminal, None)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *rest: object) -> None:
        if exc_type is not None and issubclass(exc_type, KeyboardInterrupt):
            self.guard.defer()  # a second signal must not cut the engine's closing short
            self.interrupted = self.guard.received or "SIGINT"
        try:
            self.close()
        finally:
            self._stack.close()

    def engine(self) -> EngineAdapter:
        """The session's engine, built on first use."""
        if self._engine is None:
            from specseed.run.execute import create_adapter

            assert self.settings is not None
            self._engine = create_adapter(self.settings)
        return self._engine

    def close(self) -> None:
        """Close the engine this session built (one the caller gave stays open)."""
        engine, self._engine = self._engine, self._given
        if engine is not None and engine is not self._given:
            engine.close()

    # -- serving --------------------------------------------------------------------------

    def workers(self, tasks: int) -> int:
        """Worker processes for ``tasks`` independent tasks (1: this process serves them)."""
        if self._given is not None or self.jobs <= 1:
            return 1
        from specseed.run.parallel import workers_for

        return workers_for(self.jobs, tasks)

    def run(
        self,
        config: AuditConfig,
        planned: Sequence[PlannedScenario],
        base_dir: Path,
        *,
        on_event: EventHandler | None = None,
        trace_writer: Callable[[str, str], TraceWriter] | None = None,
        trace_dir: Path | None = None,
        command: str = "",
        keep_steps: bool = False,
    ) -> AuditResult:
        """Serve ``planned`` and check the results (``run.execute.run_audit``), scenarios
        spread over the session's workers when it has them (``run.parallel.run_audit_jobs``:
        ``trace_dir``, whose lock the caller holds, is where they write without a
        ``trace_writer``). An interrupt while serving ends the current run's trace and
        returns what finished, ``interrupted`` set."""
        if self.workers(len(planned)) > 1:
            from specseed.run.parallel import run_audit_jobs

            return run_audit_jobs(
                config,
                planned,
                base_dir,
                jobs=self.jobs,
                trace_dir=trace_dir,
                on_event=on_event,
                command=command,
                trace_writer=trace_writer,
                lock_trace_dir=False,
            )
        from specseed.run.execute import run_audit

        result = run_audit(
            config,
            planned,
            base_dir,
            trace_dir=trace_dir,
            on_event=on_event,
            command=command,
            trace_writer=trace_writer,
            keep_steps=keep_steps,
            lock_trace_dir=False,
            open_engine=self.engine,
        )
        if result.interrupted:
            self.interrupted = result.interrupted
        return result

    def map(
        self,
        config: AuditConfig,
        work: Callable[[EngineAdapter, T], R],
        items: Sequence[T],
        *,
        on_result: Callable[[R], None] | None = None,
        doing: str = "serving",
        in_flight: Callable[[list[T]], str] | None = None,
    ) -> list[R]:
        """``work(engine, item)`` for each item, in order: on the session's engine, or on the
        workers' (``run.parallel.run_engine_tasks``: ``work`` must pickle; ``doing`` and
        ``in_flight`` say what was lost when a worker dies)."""
        if self.workers(len(items)) > 1:
            from specseed.run.parallel import run_engine_tasks

            assert self.settings is not None
            return run_engine_tasks(
                config,
                self.settings,
                work,
                items,
                jobs=self.jobs,
                on_result=on_result,
                doing=doing,
                **({"in_flight": in_flight} if in_flight is not None else {}),
            )
        results = []
        for item in items:
            result = work(self.engine(), item)
            results.append(result)
            if on_result is not None:
                on_result(result)
        return results


__all__ = ["EngineSession", "InterruptGuard", "NoGuard"]
