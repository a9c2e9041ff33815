"""Tests of ``specseed serve``: they need the http extra, and skip with the reason without it."""

from tests.extras import require_extra

require_extra("http")
