"""Heavy imports with the garbage collector off (``run.collector``)."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

import pytest

from specseed.run.collector import quiet_imports


@pytest.fixture
def collector_state() -> Iterator[None]:
    """The collector on or off as the test found it. (What a test froze stays frozen: the
    suite freezes what collection made, and unfreezing would undo that too.)"""
    enabled = gc.isenabled()
    yield
    if enabled:
        gc.enable()
    else:
        gc.disable()


@pytest.mark.parametrize("enabled", [True, False])
def test_the_collector_is_off_inside_and_as_it_was_after(
    enabled: bool, collector_state: object
) -> None:
    (gc.enable if enabled else gc.disable)()
    with quiet_imports():
        assert not gc.isenabled()
    assert gc.isenabled() is enabled


def test_it_is_back_on_after_an_import_that_fails(collector_state: object) -> None:
    gc.enable()
    with pytest.raises(ModuleNotFoundError), quiet_imports():
        __import__("specseed_no_such_module")
    assert gc.isenabled()


def test_freeze_moves_what_is_alive_out_of_the_collectors_sight(collector_state: object) -> None:
    before = gc.get_freeze_count()
    with quiet_imports():
        pass
    assert gc.get_freeze_count() == before  # no freeze unless asked: the caller's process
    made = [[index] for index in range(1000)]
    with quiet_imports(freeze=True):
        pass
    assert gc.get_freeze_count() >= before + len(made)


def test_an_engine_is_made_with_the_collector_off(
    monkeypatch: pytest.MonkeyPatch, collector_state: object
) -> None:
    # An engine's adapter imports its engine when made (vLLM's import: 1.4 s with the
    # collector off, 2.1 s with it on); create_adapter makes it with the collector off.
    from specseed.engine_adapters.reference.adapter import ReferenceEngine
    from specseed.plan.planning import base_settings
    from specseed.run import execute
    from specseed.scenarios.schema import AuditConfig

    seen: list[bool] = []

    class Recording(ReferenceEngine):
        def __init__(self, *args: object, **kwargs: object) -> None:
            seen.append(gc.isenabled())
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(execute, "load_adapter_class", lambda name: Recording)
    gc.enable()
    engine = execute.create_adapter(base_settings(AuditConfig(), Path.cwd()))
    engine.close()
    assert seen == [False]
    assert gc.isenabled()


_MAKE_ENGINE = """
import gc, sys
from specseed.cli import entry
from specseed.run.collector import owned_process
from specseed.run.execute import create_adapter
from specseed.engine_adapters.base import EngineSettings
if sys.argv[1] == "command":
    sys.argv = ["specseed", "--version"]
    try:
        entry.main()  # what the specseed command runs first
    except SystemExit:
        pass
before = gc.get_freeze_count()
create_adapter(EngineSettings()).close()
first = gc.get_freeze_count()
garbage = [[i] for i in range(1000)]
create_adapter(EngineSettings()).close()  # a second engine: nothing new to freeze
print(owned_process(), first > before, gc.get_freeze_count() == first)
"""


@pytest.mark.parametrize(("how", "frozen"), [("command", True), ("library", False)])
def test_the_command_freezes_the_engines_imports_and_a_library_does_not(
    how: str, frozen: bool
) -> None:
    """The ``specseed`` command's process is specseed's own: the first engine made there
    freezes what its imports made (a serial audit's full collections skip torch's objects),
    a later one does not. A program that imports specseed keeps its collector as it had
    it."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", _MAKE_ENGINE, how],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert done.stdout.splitlines()[-1].split() == [str(frozen), str(frozen), "True"]
