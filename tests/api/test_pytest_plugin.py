"""The pytest plugin run by pytest itself (``pytester``): a model.yaml's scenarios become test
items ``specseed::<scenario>``, pass or fail with the scenario's report, and keep the bundle of
a failing audit; the fixture runs an audit on an engine the test built."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import entry_points

import pytest

from tests.api.conftest import write_model

# Block the installed entry point (if any) and load this checkout's module by name.
PLUGIN = ("-p", "no:specseed", "-p", "specseed.api.pytest_plugin")


def test_the_installed_package_declares_the_entry_point() -> None:
    # What pytest loads: the installed distribution's pytest11 entry point (pyproject.toml's
    # [project.entry-points.pytest11], as pip installed it).
    (entry,) = entry_points(group="pytest11", name="specseed")
    assert entry.value == "specseed.api.pytest_plugin"


def test_each_scenario_is_an_item_and_a_defect_fails_only_its_scenario(
    pytester: pytest.Pytester,
) -> None:
    model = write_model(pytester.path, defects=["row0-seed"])
    bundle = pytester.path / "kept"
    result = pytester.runpytest(
        *PLUGIN, "--specseed", str(model), "--specseed-bundle", str(bundle), "-v"
    )
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        ["*specseed::small-position FAILED*", "*specseed::small-rerun PASSED*"]
    )
    # the failure is the scenario's console report, naming the suspect defect
    result.stdout.fnmatch_lines(["*FAIL position-invariance*small-position*", "*row0-seed*"])
    assert (bundle / "manifest.json").is_file()
    assert f"bundle: {bundle}" in result.stdout.str()


def test_a_passing_audit_writes_no_bundle(pytester: pytest.Pytester) -> None:
    model = write_model(pytester.path)
    bundle = pytester.path / "kept"
    pytester.makeini(f"[pytest]\nspecseed_model = {model.name}\n")
    result = pytester.runpytest(*PLUGIN, "--specseed-bundle", str(bundle))
    result.assert_outcomes(passed=2)
    assert not bundle.exists()


def test_scenario_and_check_options_narrow_the_audit(pytester: pytest.Pytester) -> None:
    model = write_model(pytester.path, defects=["row0-seed"])
    only = pytester.runpytest(
        *PLUGIN, "--specseed", str(model), "--specseed-scenario", "small-rerun", "-v"
    )
    only.assert_outcomes(passed=1)
    only.stdout.fnmatch_lines(["*specseed::small-rerun PASSED*"])
    assert "small-position" not in only.stdout.str()
    # the failing comparison not among the checks: the scenario passes on the others
    checks = pytester.runpytest(
        *PLUGIN, "--specseed", str(model), "--specseed-check", "rng-contract", "-k", "position"
    )
    checks.assert_outcomes(passed=1, deselected=1)


def test_an_invalid_model_yaml_is_a_collection_error_with_the_problem(
    pytester: pytest.Pytester,
) -> None:
    bad = pytester.path / "model.yaml"
    bad.write_text("engine: {name: reference, max_draft_lenn: 3}\n")
    result = pytester.runpytest(*PLUGIN, "--specseed", str(bad))
    assert result.ret != 0
    result.stderr.fnmatch_lines(["*unknown key *max_draft_lenn*Did you mean*"])


def test_the_fixture_audits_an_engine_the_test_built(pytester: pytest.Pytester) -> None:
    write_model(pytester.path)
    write_model(pytester.path, defects=["row0-seed"], name="broken.yaml")
    pytester.makepyfile(
        """
        import pytest
        from specseed.engine_adapters.base import EngineSettings
        from specseed.engine_adapters.reference.options import ReferenceOptions
        from specseed.run.execute import create_adapter

        def engine():
            return create_adapter(EngineSettings(name="reference", options=ReferenceOptions()))

        @pytest.mark.specseed(scenarios=["small-position"])
        def test_clean(specseed_audit):
            report = specseed_audit("model.yaml", engine=engine())
            assert [s.scenario.name for s in report.scenarios] == ["small-position"]

        @pytest.mark.specseed(scenarios=["small-position"])
        def test_broken(specseed_audit):
            # the plans carry model.yaml's settings (the defect); the test's engine serves them
            specseed_audit("broken.yaml", engine=engine())
        """
    )
    result = pytester.runpytest(*PLUGIN, "--specseed-bundle", "kept")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*FAIL position-invariance*", "*bundle: *kept*"])
    assert (pytester.path / "kept" / "manifest.json").is_file()


def test_the_plugin_module_does_not_import_torch() -> None:
    code = "import sys, specseed.api.pytest_plugin; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_a_bundle_option_naming_a_file_is_a_usage_error(pytester: pytest.Pytester) -> None:
    model = write_model(pytester.path, defects=["row0-seed"])
    afile = pytester.path / "afile"
    afile.write_text("mine\n")
    result = pytester.runpytest(*PLUGIN, "--specseed", str(model), "--specseed-bundle", "afile")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--specseed-bundle afile: not a folder*"])
    assert "Traceback" not in result.stderr.str() + result.stdout.str()
    assert afile.read_text() == "mine\n"
