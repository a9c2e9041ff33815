"""Shared test setup: GPU-only tests carry ``@pytest.mark.gpu`` and skip without CUDA."""

from __future__ import annotations

import pytest

# pytester drives the pytest plugin's tests (tests/api); only a top-level conftest may name it.
pytest_plugins = ["pytester"]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device (the CPU suite is the CI gate)")
    for item in items:
        if item.get_closest_marker("gpu") is not None:
            item.add_marker(skip)
