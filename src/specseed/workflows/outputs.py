"""What an audit is asked to write, and the checks made on it before anything runs.

``AuditOutputs`` is the whole request: report files (in any registered format), the bundle
folder, the terminal report, which scenarios, how the work is split. The path checks refuse,
before any engine time is spent, a report onto an input, two reports on one path, or a
folder that cannot be written.
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from specseed.core.errors import InputError, OutputError
from specseed.core.secrets import SafeConsole, scrub_text

STDOUT = Path("-")
"""The path that means standard output (``--json -``)."""


@dataclass(frozen=True)
class AuditOutputs:
    """The outputs asked for, and how the audit is split. Every field has a quiet default:
    ``AuditOutputs()`` writes nothing and prints nothing; the result and the events are still
    there for the caller."""

    json: Path | None = None
    """The JSON report (``Path("-")``: stdout): the same as ``("json", path)`` in
    ``reports``. Once built, the first JSON report's path, however it was given."""
    junit: Path | None = None
    """The JUnit XML report: the same as ``("junit", path)`` in ``reports``. Once built, the
    first JUnit report's path, however it was given."""
    bundle: Path | None = None
    """The bug-report bundle's folder, written as the audit goes (``specseed check`` reads it)."""
    bundle_flag: str = "--bundle"
    """The option that named ``bundle`` (``--bundle`` or ``--trace-dir``), for messages."""
    terminal: bool = False
    """The Rich report on stdout and the end's notes on stderr."""
    progress: bool = True
    """With ``terminal``: a progress bar on a terminal, plain lines on stderr otherwise."""
    summary: bool = False
    """With ``terminal``: only the verdict table and the root causes."""
    scenarios: tuple[str, ...] = ()
    """Only these scenarios, by name (empty: all the plan holds)."""
    shard: tuple[int, int] | None = None
    """``(i, n)``: only shard i of n (``run.parallel.shard``)."""
    jobs: int | Literal["auto"] = 1
    """Worker processes, each with its own engine; ``"auto"``: one per usable CPU for the
    reference engine's built-in model on the CPU when the audit is large enough to pay for
    them, one process otherwise (``run.parallel.resolve_jobs``)."""
    force: bool = False
    """Replace an earlier bundle in ``bundle`` (its files only); refused without it."""
    engine_log: Path | None = None
    """Where the engine's log (vLLM's logger, stderr of in-process engines) goes during the
    runs (``Path("-")``: the terminal, live); default: the bundle's ``engine.log`` with
    ``bundle``, else with ``terminal`` a temporary file, named at the end when the engine
    wrote to it, else wherever the engine writes (the caller's stderr)."""
    argv: tuple[str, ...] = ("audit",)
    """The command line after ``specseed``, for the reproduce string and the bundle's
    manifest."""
    reports: tuple[tuple[str, Path], ...] = ()
    """Every report document as (format, path), ``--report FORMAT=PATH`` each
    (``reporting.formats`` names the formats; ``Path("-")``: stdout). Once built it holds
    ``json`` and ``junit`` too, first, each once."""

    def __post_init__(self) -> None:
        given = tuple((name, Path(path)) for name, path in self.reports)
        aliases = [(n, Path(p)) for n, p in (("json", self.json), ("junit", self.junit)) if p]
        reports = (*(a for a in aliases if a not in given), *given)
        object.__setattr__(self, "reports", reports)
        object.__setattr__(self, "json", _first(reports, "json"))
        object.__setattr__(self, "junit", _first(reports, "junit"))
        if self.jobs != "auto" and (not isinstance(self.jobs, int) or self.jobs < 1):
            raise InputError(
                f"--jobs {self.jobs}: give 1 or more worker processes, or auto",
                hint="for example --jobs 4; auto (the default) picks one per CPU",
            )

    @property
    def command(self) -> str:
        """The command that reproduces the audit."""
        return "specseed " + shlex.join(self.argv)


def _first(reports: tuple[tuple[str, Path], ...], name: str) -> Path | None:
    return next((path for fmt, path in reports if fmt == name), None)


REPORT_ALIASES = {"json": "--json", "junit": "--junit"}
"""The formats with an option of their own (``--json PATH`` is ``--report json=PATH``)."""


def report_option(name: str) -> str:
    """How messages name the option that asked for a report of format ``name``."""
    return REPORT_ALIASES.get(name, f"--report {name}")


def _same_file(a: Path, b: Path) -> bool:
    try:
        if a.exists() and b.exists():
            return os.path.samefile(a, b)
    except OSError:
        pass
    return a.resolve() == b.resolve()


def within(path: Path, folder: Path) -> bool:
    """Whether ``path`` names ``folder`` or something inside it, symlinks resolved (a path
    that does not exist yet resolves as far as it does)."""
    try:
        real, top = Path(os.path.realpath(path)), Path(os.path.realpath(folder))
    except (OSError, ValueError):
        return False
    return real == top or top in real.parents


def check_output_paths(
    outputs: Mapping[str, Path | None] | Iterable[tuple[str, Path | None]],
    inputs: Iterable[Path],
    *,
    bundle: Path | None = None,
    bundle_flag: str = "--bundle",
) -> None:
    """Refuse two reports on one path, a report onto model.yaml, a scenario file or into a
    bundle folder this workflow reads, or any output inside the bundle folder it writes
    (``bundle``: the bundle's own files are its writer's alone).

    ``outputs`` maps an option name (``--json``) to its path, or lists (option, path) pairs
    where an option may come twice (``--report``); ``-`` is stdout, which only one report can
    have. ``inputs``: the files and folders (a bundle replayed) the workflow reads; the
    bundle folder may not overlap a folder read.
    """
    pairs = list(outputs.items() if isinstance(outputs, Mapping) else outputs)
    to_stdout = [option for option, path in pairs if path and str(path) == "-"]
    if len(to_stdout) > 1:
        raise InputError(
            f"{' and '.join(to_stdout)} both write to stdout ('-')",
            hint="send at most one report to stdout",
        )
    given = [(option, path) for option, path in pairs if path and str(path) != "-"]
    inputs = list(inputs)
    for index, (option, path) in enumerate(given):
        for other_option, other in given[:index]:
            if _same_file(path, other):
                raise InputError(
                    f"{other_option} and {option} both write {path}",
                    hint="give each report its own file",
                )
        if bundle is not None and within(path, bundle):
            raise InputError(
                f"{option} {path} is inside the bundle folder {bundle}, which holds only "
                "the bundle's own files",
                hint="write it outside the bundle folder",
            )
        for source in inputs:
            if source.is_dir() and within(path, source):
                raise InputError(
                    f"{option} {path} is inside the bundle {source} that this command reads",
                    hint="write it outside the bundle folder",
                )
            if _same_file(path, source):
                raise InputError(
                    f"{option} {path} would overwrite an input of this audit ({source})",
                    hint="write the report to another file",
                )
    if bundle is not None:
        for source in inputs:  # a bundle read (a model.yaml inside it is read once, up front)
            if source.is_dir() and (within(source, bundle) or within(bundle, source)):
                raise InputError(
                    f"{bundle_flag} {bundle} would write over an input of this workflow ({source})",
                    hint="give the bundle a folder of its own, outside its inputs",
                )


def check_writable(path: Path | None, what: str, *, directory: bool = False) -> None:
    """Refuse an output path before the audit runs, so no result is lost at the end. Creates
    nothing: a missing folder is a typo to report, not one to make."""
    if path is None or str(path) == "-":
        return
    folder = path if directory else path.parent
    if directory and not os.path.lexists(path):
        folder = path.parent
    if not folder.is_dir():
        missing = "does not exist" if not os.path.lexists(folder) else "is not a folder"
        raise InputError(
            f"cannot write the {what} {path}: {folder} {missing}",
            hint=f"create {folder} first, or give another path",
        )
    if not directory and path.is_dir():
        raise InputError(f"the {what} path {path} is a directory", hint="give a file name")
    if directory and os.path.lexists(path) and not path.is_dir():
        raise InputError(f"the {what} path {path} is not a directory", hint="give a folder")
    if not os.access(folder, os.W_OK):
        raise InputError(f"cannot write the {what} in {folder}: permission denied")


def check_bundle_folder(path: Path | None, *, force: bool, flag: str = "--bundle") -> None:
    """Refuse, before anything runs, a bundle folder another workflow is writing (first:
    no --force helps there), one that holds files other than a bundle, or an earlier bundle
    without ``force``. ``flag``: the option that named the folder, for the message."""
    if path is None or not path.is_dir():
        return
    from specseed.bundle.format import MANIFEST, folder_entries

    entries = folder_entries(path)  # dot-files that are links or devices count
    if not entries:
        return
    from specseed.traces.folder import LOCK_NAME, TraceDir

    lock = path / LOCK_NAME
    if lock.is_file() and not lock.is_symlink():
        folder = TraceDir(path, flag)
        folder.lock()  # TraceDirBusy, naming the other workflow's pid, while it runs
        folder.release()

    manifest = path / MANIFEST
    if manifest.is_symlink() or not manifest.is_file():
        from specseed.core.text import printable

        held = ", ".join(printable(e) for e in entries[:3]) + (", ..." if len(entries) > 3 else "")
        raise InputError(
            f"{path} is not empty and holds no specseed bundle ({held}); refusing to write into it",
            hint="give a new or empty directory",
        )
    if not force:
        raise InputError(
            f"{path} holds a bundle already; refusing to replace it",
            hint="pass --force to remove its files first, or give a new directory",
        )


def write_document(path: Path, text: str, what: str) -> None:
    """A report document to its file (atomically) or to stdout (``-``)."""
    from specseed.core.files import write_output

    if str(path) == "-":
        write_stdout(text, what)
        return
    write_output(path, text, what)


_STDOUT_HINT = "free space where stdout goes, or send it elsewhere"


def write_stdout(text: str, what: str) -> None:
    """``text`` to stdout, flushed, secrets removed as the file writer removes them, in any
    encoding stdout has (what it cannot encode as backslash escapes). ``OutputError``
    (exit 5) when stdout is closed, full (``> /dev/full``) or its reader went away
    (``| head``); the rest of stdout then goes nowhere, so nothing fails again at exit."""
    from specseed.core.text import for_encoding

    stream = sys.stdout
    if stream is None or getattr(stream, "closed", False):
        raise OutputError(f"cannot write the {what} to stdout: it is closed", hint=_STDOUT_HINT)
    text = for_encoding(scrub_text(text, by_name=False), getattr(stream, "encoding", None))
    try:
        stream.write(text)
        stream.flush()
    except BrokenPipeError:
        silence_stdout()
        raise OutputError(f"cannot write the {what} to stdout: the reader closed it") from None
    except (OSError, ValueError) as exc:  # ValueError: closed while writing
        silence_stdout()
        why = getattr(exc, "strerror", None) or str(exc)
        raise OutputError(f"cannot write the {what} to stdout: {why}", hint=_STDOUT_HINT) from None


def flush_terminal(render: Callable[[], None], code: int) -> int:
    """Print a terminal report with ``render`` and flush stdout; returns the exit code. A
    reader that went away (``| head``) silences the rest and keeps ``code``; a stdout that
    cannot take the report (``> /dev/full``) makes a 0 or a 4 exit 5 (an output that could
    not be written), as a report file would; a violation or a signal still wins. A closed
    stdout (``>&-``) takes nothing, as ``> /dev/null`` would: the code stands."""
    from specseed.workflows.exit_codes import EXIT_NOTHING_CHECKED, EXIT_OK, EXIT_OUTPUT

    try:
        render()
        if sys.stdout is not None:
            sys.stdout.flush()
    except BrokenPipeError:
        silence_stdout()
    except OSError:
        silence_stdout()
        if code in (EXIT_OK, EXIT_NOTHING_CHECKED):
            return EXIT_OUTPUT
    return code


def stdout_failed(exc: BaseException) -> bool:
    """Whether ``exc`` (an ``OSError``) came from writing stdout: the innermost frame wrote
    to it (a Rich console or ``echo`` whose file is stdout), or what stdout holds pending
    cannot be flushed. Tells a full or closed stdout from a bug elsewhere."""
    stream = sys.stdout
    if stream is None:
        return False
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is not None:
        for value in tb.tb_frame.f_locals.values():
            if value is stream or getattr(value, "file", None) is stream:
                return True
    try:
        stream.flush()
    except (OSError, ValueError):
        return True
    return False


def silence_stdout() -> None:
    """After stdout failed (its reader went away, its disk is full): send the rest nowhere,
    so that the interpreter's final flush does not fail with a traceback."""
    try:
        fileno = sys.stdout.fileno()
    except (AttributeError, ValueError, OSError):  # None, closed, or not a file (a test's)
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fileno)
    finally:
        os.close(devnull)


class StdoutConsole(SafeConsole):
    """The terminal report's console. When the reader of stdout goes away (``| head -1``),
    the rest of the report goes nowhere and the audit keeps its exit code; Rich's default
    exits 1, which would turn a passing audit into a violation."""

    def on_broken_pipe(self) -> None:
        self.quiet = True
        silence_stdout()
