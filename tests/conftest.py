"""Shared test setup: GPU-only tests carry ``@pytest.mark.gpu`` and skip without CUDA; under
pytest-xdist (``-n 2 --dist loadscope`` in pyproject.toml) each test module runs whole on one
worker, and every vLLM test on the same one.

Why: a module-scoped fixture (the detection matrix, the bundles per defect profile, a module's
engine) is then still built once per test run, not once per worker; and the vLLM tests share
one session engine (tests/engine_adapters/vllm/conftest.py), while two vLLM engines at once
(the in-process one and ``vllm serve``) would each want every core and several GiB. The
controller schedules by node id alone (it never collects), so the vLLM group is named by path
(``VLLM_PATHS``); each worker checks at collection that the paths and the ``vllm`` marker
name the same tests, and that a fixture shared beyond one module stays within one group
(a test where they do not fails).
Workers take the vLLM group first (the longest), then the modules with a ``slow`` test, then
the rest, each by their number of tests, most first.

xdist's own ``--dist loadgroup`` is not used: with pytest 9.2 its ``xdist_group`` marks no
longer reach the scheduler (pytest-dev/pytest-xdist issue 1386: the worker rewrites
``item._nodeid``, which pytest no longer reads), and the tests spread as if unmarked.
"""

from __future__ import annotations

import gc
from typing import Any

import pytest

# pytester drives the pytest plugin's tests (tests/api); only a top-level conftest may name it.
pytest_plugins = ["pytester"]

VLLM_GROUP = "vllm"
VLLM_PATHS = ("tests/engine_adapters/vllm/", "tests/engine_adapters/openai/test_vllm_serve.py")
"""Every test file with ``@pytest.mark.vllm`` tests (checked at collection)."""


def scheduling_scope(nodeid: str) -> str:
    """The unit one worker runs whole: ``vllm`` for the vLLM tests, else the test's module."""
    path = nodeid.split("::", 1)[0]
    return VLLM_GROUP if path.startswith(VLLM_PATHS) else path


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if config.getoption("dist") != "loadscope":
        return None  # another --dist asked for on the command line: xdist's own
    from xdist.scheduler import LoadScopeScheduling

    class SharedFixtureScheduling(LoadScopeScheduling):
        """loadscope by module, with every vLLM test in one scope."""

        def _split_scope(self, nodeid: str) -> str:
            return scheduling_scope(nodeid)

    return SharedFixtureScheduling(config, log)


def _skip_gpu_tests_without_cuda(items: list[pytest.Item]) -> None:
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device (the CPU suite is the CI gate)")
    for item in items:
        if item.get_closest_marker("gpu") is not None:
            item.add_marker(skip)


def _shared_fixture_homes(item: pytest.Item) -> list[str]:
    """Node ids of the folders (conftest files) whose session or package fixtures ``item``
    uses: those are shared beyond one module. Plugins' fixtures (baseid "") are cheap and per
    worker; a module-scoped fixture is built per module anyway."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return []
    module = item.nodeid.split("::", 1)[0]
    homes = []
    for name in info.names_closure:
        defs = info.name2fixturedefs.get(name)
        if defs:
            fixture = defs[-1]  # the definition this item gets (closest override)
            if fixture.scope in ("session", "package") and fixture.baseid not in ("", module):
                homes.append(fixture.baseid)
    return homes


_SCOPE_PROBLEM = pytest.StashKey[str]()


def check_scheduling_scopes(items: list[pytest.Item]) -> None:
    """Fail, at setup, each test where the path rule and the tests disagree: a vLLM test
    outside ``VLLM_PATHS`` (or a test there without the mark), or a test using a conftest's
    session or package fixture that two scheduling scopes share (it would be built on two
    workers). At setup rather than here: an error raised in a worker's collection ends that
    worker with no message."""
    scopes_of_home: dict[str, set[str]] = {}
    for item in items:
        scope = scheduling_scope(item.nodeid)
        if (item.get_closest_marker("vllm") is not None) != (scope == VLLM_GROUP):
            item.stash[_SCOPE_PROBLEM] = (
                "the vllm marker and VLLM_PATHS in tests/conftest.py disagree on this test"
            )
        for home in _shared_fixture_homes(item):
            scopes_of_home.setdefault(home, set()).add(scope)
    for item in items:
        for home in _shared_fixture_homes(item):
            scopes = scopes_of_home[home]
            if len(scopes) > 1:
                item.stash[_SCOPE_PROBLEM] = (
                    f"fixtures of {home} are shared by {sorted(scopes)}: give them one "
                    "scheduling scope in tests/conftest.py"
                )


def pytest_runtest_setup(item: pytest.Item) -> None:
    problem = item.stash.get(_SCOPE_PROBLEM, None)
    if problem is not None:
        pytest.fail(problem, pytrace=False)


def _longest_scopes_first(items: list[pytest.Item]) -> None:
    # Every worker collects, and all must collect the same order: the vLLM group first (the
    # longest), then the modules with a ``slow`` test, then the others, each by their number
    # of tests, most first. A worker takes the next scope when it is nearly done with its
    # own, so the last scopes taken decide how long one worker runs alone at the end: they
    # had better be short ones. The stable sort keeps each module's own order;
    # --no-loadscope-reorder makes the scheduler keep this one.
    sizes: dict[str, int] = {}
    slow: set[str] = set()
    for item in items:
        scope = scheduling_scope(item.nodeid)
        sizes[scope] = sizes.get(scope, 0) + 1
        if item.get_closest_marker("slow") is not None:
            slow.add(scope)

    def rank(pair: tuple[int, pytest.Item]) -> tuple[int, int, int, int]:
        index, item = pair
        scope = scheduling_scope(item.nodeid)
        return (scope != VLLM_GROUP, scope not in slow, -sizes[scope], index)

    items[:] = [item for _, item in sorted(enumerate(items), key=rank)]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    _skip_gpu_tests_without_cuda(items)
    check_scheduling_scopes(items)
    if hasattr(config, "workerinput"):
        _longest_scopes_first(items)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Freeze what collection left (torch, the package, pytest's own objects) out of the
    garbage collector's full collections, which otherwise walk all of it each time the
    tests' own objects pile up: in tests/test_detection_matrix.py on one process, 8.1 s of
    full collections became 1.4 s (of about 110 s). Objects are still freed by their
    reference counts; only cycles among the frozen ones stay until the process ends."""
    gc.freeze()
