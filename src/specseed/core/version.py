"""specseed's version: what reports, bundles and servers state they were made by."""

from __future__ import annotations

__version__ = "0.1.0"
