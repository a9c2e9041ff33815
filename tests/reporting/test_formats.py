"""The output format registry: every built-in format loads without a plugin, parses from
``--report``, and writes what its reporter renders; names are checked; the documents that
state the exit code are written last."""

from __future__ import annotations

from pathlib import Path

import pytest

from specseed.core.errors import InputError
from specseed.plan.resolve import resolve_audit
from specseed.reporting.base import DocumentReporter
from specseed.reporting.formats import BUILTIN_FORMATS, OutputFormat, get_format, parse_report
from specseed.reporting.json_report import JsonReporter
from specseed.reporting.junit import JunitReporter
from specseed.scenarios.schema import AuditConfig
from specseed.workflows.audit import Audit
from specseed.workflows.outputs import AuditOutputs


@pytest.mark.parametrize("fmt", BUILTIN_FORMATS, ids=lambda f: f.name)
def test_every_built_in_format_builds_a_document_reporter(fmt: OutputFormat) -> None:
    assert get_format(fmt.name) is fmt and not fmt.problem
    assert isinstance(fmt.build(lambda text: None), DocumentReporter)
    assert fmt.suffix.startswith(".") and fmt.summary and fmt.what.endswith("report")
    assert parse_report(f"{fmt.name}=out{fmt.suffix}") == (fmt.name, Path(f"out{fmt.suffix}"))


def test_the_built_in_formats_and_which_states_the_exit_code() -> None:
    assert [(f.name, f.states_exit_code) for f in BUILTIN_FORMATS] == [
        ("json", True),
        ("junit", False),
        ("html", True),
    ]


def test_a_path_may_hold_an_equals_sign() -> None:
    assert parse_report("json=a=b.json") == ("json", Path("a=b.json"))


@pytest.mark.parametrize("name", ["", "JSON", "a b", "x=y", "-json"])
def test_a_format_name_is_lowercase_and_plain(name: str) -> None:
    with pytest.raises(ValueError, match="output format name"):
        OutputFormat(name, "", ".x", "m:f")


@pytest.mark.parametrize(
    ("name", "hint"),
    [
        ("junt", "Did you mean 'junit'? Known formats: json, junit, html"),
        ("sarif", "known formats: json, junit, html"),
    ],
)
def test_the_api_refuses_an_unknown_format_before_anything_runs(
    tmp_path: Path, name: str, hint: str
) -> None:
    outputs = AuditOutputs(reports=((name, tmp_path / "r"),))
    audit = Audit(resolve_audit(AuditConfig(), base_dir=tmp_path), outputs)
    with pytest.raises(InputError, match=f"unknown output format '{name}'") as caught:
        audit.check_outputs()
    assert caught.value.hint == f"{hint} (specseed formats lists them)"
    assert not (tmp_path / "r").exists()


def test_json_and_junit_are_aliases_of_their_reports() -> None:
    flags = AuditOutputs(json=Path("r.json"), junit=Path("j.xml"))
    reports = AuditOutputs(reports=(("json", Path("r.json")), ("junit", Path("j.xml"))))
    assert flags.reports == reports.reports
    assert (reports.json, reports.junit) == (Path("r.json"), Path("j.xml"))
    # Given both ways, one report.
    both = AuditOutputs(json=Path("r.json"), reports=(("json", Path("r.json")),))
    assert both.reports == (("json", Path("r.json")),)


def test_json_is_written_after_junit_whatever_the_order_given(tmp_path: Path) -> None:
    outputs = AuditOutputs(reports=(("json", tmp_path / "r.json"), ("junit", tmp_path / "j")))
    documents = Audit(resolve_audit(AuditConfig(), base_dir=tmp_path), outputs).documents()
    assert [type(d) for d in documents] == [JunitReporter, JsonReporter]
