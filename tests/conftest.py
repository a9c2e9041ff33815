"""Shared test setup: GPU-only tests carry ``@pytest.mark.gpu`` and skip without CUDA; under
pytest-xdist (``-n`` in pyproject.toml) the tests that share an expensive fixture run on one
worker, and every vLLM test on the same one.

Grouping (``--dist loadgroup``): a test that uses a module-, package- or session-scoped
fixture defined in this tree is grouped with the tree node that defines it (the detection
matrix, the bundles per defect profile, a module's engine), so that fixture is still built
once per test run rather than once per worker. Every test marked ``vllm`` shares one group:
two vLLM engines at once (the in-process one and ``vllm serve``) would each want every core
and several GiB, and the in-process tests share one session engine. The rest spread test by
test. Workers take the largest groups first so a long group does not start last.
"""

from __future__ import annotations

import pytest

# pytester drives the pytest plugin's tests (tests/api); only a top-level conftest may name it.
pytest_plugins = ["pytester"]

VLLM_GROUP = "vllm"


def _skip_gpu_tests_without_cuda(items: list[pytest.Item]) -> None:
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device (the CPU suite is the CI gate)")
    for item in items:
        if item.get_closest_marker("gpu") is not None:
            item.add_marker(skip)


def shared_group(item: pytest.Item) -> str | None:
    """The xdist group of ``item``: ``vllm`` for vLLM tests, else the node id of the tree node
    (module, folder) defining the widest-scoped fixture it uses there; None when it uses
    none (it can run on any worker)."""
    if item.get_closest_marker("vllm") is not None:
        return VLLM_GROUP
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return None
    for name in info.names_closure:
        defs = info.name2fixturedefs.get(name)
        if not defs:
            continue
        fixture = defs[-1]  # the definition this item gets (closest override)
        # baseid "" is a plugin's fixture (tmp_path_factory, pytester's): cheap, per worker.
        if fixture.scope != "function" and fixture.baseid:
            return fixture.baseid
    return None


def _group_for_workers(config: pytest.Config, items: list[pytest.Item]) -> None:
    if getattr(config.option, "dist", "no") != "loadgroup":
        return
    sizes: dict[str, int] = {}
    for item in items:
        if item.get_closest_marker("xdist_group") is not None:
            continue
        group = shared_group(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
            sizes[group] = sizes.get(group, 0) + 1
    if hasattr(config, "workerinput"):
        # Every worker collects, and must collect the same order: vLLM's group first (the
        # longest), then the other groups, largest first, then the tests that run anywhere.
        # The stable sort keeps each group's own order.
        def rank(pair: tuple[int, pytest.Item]) -> tuple[int, int, int]:
            index, item = pair
            mark = item.get_closest_marker("xdist_group")
            group = mark.args[0] if mark is not None and mark.args else None
            if group == VLLM_GROUP:
                return (0, 0, index)
            if group is not None:
                return (1, -sizes.get(group, 0), index)
            return (2, 0, index)

        items[:] = [item for _, item in sorted(enumerate(items), key=rank)]


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # tryfirst: xdist's worker reads the xdist_group marks in its own hook of this name.
    _skip_gpu_tests_without_cuda(items)
    _group_for_workers(config, items)
