"""The ``specseed`` command's entry point, light on purpose.

``--jobs`` workers fork from a server and then import the main script again (Python's
``multiprocessing`` does this for every worker it starts), so whatever the console script
imports at its top level, every worker imports too. The console script imports this
module; the command-line app (typer, rich and the commands: about 0.13 s on a 2-core VM) is
imported inside :func:`main`, so no worker pays for it.

:func:`main` also starts the workers' server before that import, when the command line is
plainly an audit that runs on workers (the default audit, or ``--matrix``): its imports
(torch) then run beside the app's own from the first moment. :func:`starts_workers` reads
the arguments conservatively; whatever it does not recognise is left to the audit command,
which decides again once its options are parsed (``cli/audit.py``), as it always did.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

_VALUED = frozenset({"--json", "--junit", "--report", "--engine-log", "--bundle", "--trace-dir"})
"""``specseed audit`` options that take a value and do not decide where the audit runs."""

_FLAGS = frozenset({"--no-progress", "--summary", "--force"})
"""``specseed audit`` flags that do not decide where the audit runs."""


def starts_workers(args: Sequence[str]) -> bool:
    """Whether ``args`` (``sys.argv[1:]``) are an audit that the audit command runs on
    workers when the machine has CPUs for them: ``audit`` with no model.yaml, no
    ``--scenario`` or ``--shard`` unless ``--matrix``, and ``--jobs`` other than 1.

    Anything else (another command, a model.yaml, an option this does not know, ``--help``)
    is False: a missed early start costs what it always cost, a wrong one costs the server's
    imports on an idle CPU (the server is killed at exit, unused)."""
    if not args or args[0] != "audit":
        return False
    jobs = "auto"
    narrowed = matrix = False
    rest = list(args[1:])
    index = 0
    while index < len(rest):
        name, equals, value = rest[index].partition("=")
        if name in ("--jobs", "-j", "--scenario", "-s", "--shard", *_VALUED):
            if not equals:
                index += 1
                if index == len(rest):
                    return False  # a missing value: the command says so
                value = rest[index]
            if name in ("--jobs", "-j"):
                jobs = value
            elif name not in _VALUED:
                narrowed = True
        elif rest[index] == "--matrix":
            matrix = True
        elif rest[index] not in _FLAGS:
            return False
        index += 1
    return (matrix or not narrowed) and jobs.strip() != "1"


def main() -> None:
    """Entry point of the ``specseed`` console script and ``python -m specseed``."""
    from specseed.run.collector import own_process

    own_process()
    if starts_workers(sys.argv[1:]):
        from specseed.run.forkserver import start_early

        start_early()
    from specseed.cli.app import main as app_main

    app_main()
