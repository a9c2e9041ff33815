"""Optional extras in tests: a test module that needs one skips, with the reason and the install
line, when the extra is missing, instead of failing the whole run at collection."""

from __future__ import annotations

import pytest

EXTRAS = {"http": ("httpx", "fastapi", "uvicorn"), "report": ("matplotlib",)}
"""Each optional extra of pyproject.toml a test folder needs, and the modules it brings."""


def require_extra(extra: str) -> None:
    """Skip the importing module (or folder, from its ``__init__``) unless ``extra`` imports."""
    for module in EXTRAS[extra]:
        pytest.importorskip(
            module,
            reason=f"needs the {extra} extra ({module} is missing): pip install -e '.[{extra}]'",
        )
