"""``specseed.api.audit`` checks its arguments at the boundary: a wrong one is a ``TypeError``
or ``ValueError`` naming it (and an ``InputError``), raised before anything is read, written
or run, instead of an ``AttributeError`` from deep inside the audit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import specseed.api as api


@pytest.mark.parametrize(
    ("kwargs", "error", "says"),
    [
        ({"scenarios": "uptime"}, TypeError, "scenarios must be a list of names, not the string"),
        ({"scenarios": [1]}, TypeError, "scenarios[0] must be a non-empty name (a str), not int"),
        ({"scenarios": [""]}, TypeError, "scenarios[0] must be a non-empty name"),
        ({"scenarios": 5}, TypeError, "scenarios must be a list of names, not int 5"),
        ({"checks": "rng-contract"}, TypeError, "checks must be a list of names"),
        ({"checks": [None]}, TypeError, "checks[0] must be a non-empty name (a str), not NoneType"),
        ({"on_event": 5}, TypeError, "on_event must be a function of one event, not int 5"),
        ({"terminal": "yes"}, TypeError, "terminal must be True or False, not str 'yes'"),
        ({"bundle": 3}, TypeError, "bundle must be a path (str or Path), not int 3"),
        ({"json": ""}, ValueError, "json must name a path, not ''"),
        ({"junit": "a\x00b"}, ValueError, "junit must name a path"),
        ({"base_dir": 1.5}, TypeError, "base_dir must be a path"),
        ({"reports": ["junit"]}, TypeError, "reports must map format names to paths, not list"),
        ({"reports": {"junit": 7}}, TypeError, "reports['junit'] must be a path"),
        ({"reports": {1: "x"}}, TypeError, "reports: a format name must be a str, not int 1"),
        ({"engine": 5}, TypeError, "engine: cannot audit a int"),
        ({"source": 5}, TypeError, "source must be a model.yaml path, a dict or an AuditConfig"),
        ({"source": ""}, ValueError, "source must name a path"),
    ],
    ids=lambda v: repr(v)[:40] if isinstance(v, dict) else None,
)
def test_a_wrong_argument_is_named_before_anything_runs(
    kwargs: dict[str, Any], error: type[Exception], says: str, tmp_path: Path
) -> None:
    source = kwargs.pop("source", None)
    kwargs.setdefault("bundle", tmp_path / "bundle")
    with pytest.raises(error) as caught:
        api.audit(source, **kwargs)
    assert says in str(caught.value)
    assert str(caught.value).startswith("audit(): ")
    assert isinstance(caught.value, api.InputError)  # the typed errors still catch it
    assert not (tmp_path / "bundle").exists()  # nothing was written


def test_a_lone_string_gets_the_list_it_meant_as_a_hint() -> None:
    with pytest.raises(api.ArgumentTypeError) as caught:
        api.audit(scenarios="uptime")  # type: ignore[arg-type]
    assert caught.value.hint == "scenarios=['uptime']"
