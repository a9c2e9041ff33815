"""The pytest plugin against input it cannot use: a model.yaml with a raw control byte, a
``--specseed-bundle`` that names a file, a marker with a lone string. Each is a usage error or
a failing test naming the problem, never pytest's INTERNALERROR, and nothing runs."""

from __future__ import annotations

import pytest

from tests.api.conftest import write_model

PLUGIN = ("-p", "no:specseed", "-p", "specseed.api.pytest_plugin")


def test_a_control_byte_in_model_yaml_is_a_usage_error_naming_its_line(
    pytester: pytest.Pytester,
) -> None:
    model = pytester.path / "model.yaml"
    model.write_bytes(b"engine: {}\n# \x1b[2J\nscenarios: [builtin]\n")
    result = pytester.runpytest(*PLUGIN, "--specseed", str(model))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    text = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in text and "Traceback" not in text
    assert f"{model}:2: the character 0x001b is not allowed in YAML" in text


def test_a_bundle_option_naming_a_file_is_a_usage_error_before_the_audit(
    pytester: pytest.Pytester,
) -> None:
    model = write_model(pytester.path, defects=["row0-seed"])
    taken = pytester.path / "taken.txt"
    taken.write_text("keep me\n")
    result = pytester.runpytest(*PLUGIN, "--specseed", str(model), "--specseed-bundle", str(taken))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    text = result.stdout.str() + result.stderr.str()
    assert f"--specseed-bundle {taken}: not a folder" in text
    assert "INTERNALERROR" not in text and "Traceback" not in text
    assert taken.read_text() == "keep me\n"


MARKERS = [
    ('scenarios="small-rerun"', "specseed(scenarios=...) must be a list of names, not str"),
    ("checks=[1]", "specseed(checks=...): 1 is not a name"),
    ('scenario=["x"]', "takes scenarios= and checks= only, not scenario"),
]


def test_a_marker_with_a_wrong_argument_fails_its_test_naming_it(
    pytester: pytest.Pytester,
) -> None:
    tests = "\n".join(
        f"@pytest.mark.specseed({marker})\n"
        f"def test_{n}(specseed_audit):\n"
        "    raise AssertionError('the fixture should have refused the marker')\n"
        for n, (marker, _) in enumerate(MARKERS)
    )
    pytester.makepyfile("import pytest\n\n" + tests)
    result = pytester.runpytest(*PLUGIN)
    result.assert_outcomes(errors=len(MARKERS))
    for _, says in MARKERS:
        assert says in result.stdout.str()
    assert "should have refused" not in result.stdout.str()
