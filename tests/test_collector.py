"""Heavy imports with the garbage collector off (``run.collector``)."""

from __future__ import annotations

import gc

import pytest

from specseed.run.collector import quiet_imports


@pytest.fixture
def collector_state() -> object:
    enabled = gc.isenabled()
    yield
    gc.unfreeze()
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
    gc.unfreeze()
    with quiet_imports():
        pass
    assert gc.get_freeze_count() == 0  # no freeze unless asked: the caller's process
    made = [[index] for index in range(1000)]
    with quiet_imports(freeze=True):
        pass
    assert gc.get_freeze_count() >= len(made)
