"""Root causes as the reports show them.

The inference (which hypotheses explain the failing findings, what is a consequence of
what) lives in ``specseed.checks.attribution``, below reporting: reporting renders causes and
never decides them. This module keeps the names the reporters import.
"""

from __future__ import annotations

from specseed.checks.attribution import RootCause, root_causes

__all__ = ["RootCause", "root_causes"]
