"""The check registry: stable ids, one per check, consistent with schema and contracts."""

from __future__ import annotations

from pathlib import Path

import pytest

from specseed.checks import CHECKS, registered_comparison_ids
from specseed.checks.registry import comparison_check, comparison_checks, run_check
from specseed.core.defects import DEFECT_IDS
from specseed.engine_adapters.contracts import CONTRACTS
from specseed.scenarios.schema import (
    COMPARISON_CHECK_IDS,
    COMPARISON_IDS_CONTEXT,
    Expectation,
    Scenario,
    json_schemas,
)


def test_comparison_ids_in_the_schema_are_exactly_the_registered_comparisons() -> None:
    """The scenarios layer lists the comparison ids as data: a new comparison check that is
    not listed in ``COMPARISON_CHECK_IDS`` fails here."""
    builtin = tuple(
        spec.id
        for spec in CHECKS.values()
        if spec.kind == "comparison" and spec.func.__module__.startswith("specseed.checks.")  # type: ignore[attr-defined]
    )
    assert COMPARISON_CHECK_IDS == builtin
    assert set(registered_comparison_ids()) >= set(builtin)
    enum = Scenario.model_json_schema()["$defs"]["Expectation"]["properties"]["check"]["enum"]
    assert tuple(enum) == COMPARISON_CHECK_IDS
    schema = json_schemas(registered_comparison_ids())["scenario"]
    assert schema["$defs"]["Expectation"]["properties"]["check"]["enum"] == list(
        registered_comparison_ids()
    )


def test_a_comparison_registered_with_its_rule_is_known_to_the_schema_at_once() -> None:
    """One decorator is the whole of a comparison: validation (given the registered ids, as
    a plugin's are) and the suspects follow."""

    def rule(d: object) -> list[object]:
        return []

    def expectation() -> Expectation:
        context = {COMPARISON_IDS_CONTEXT: registered_comparison_ids()}
        data = {"check": "new-comparison", "runs": ["a", "b"]}
        return Expectation.model_validate(data, context=context)

    try:
        comparison_check(
            "new-comparison",
            short="new",
            title="t",
            description="d",
            targets=(),
            token_suspects=rule,  # type: ignore[arg-type]
        )(lambda ctx, expectation: iter(()))
        assert expectation().check == "new-comparison"
        enum = json_schemas(registered_comparison_ids())["scenario"]["$defs"]["Expectation"]
        assert "new-comparison" in enum["properties"]["check"]["enum"]
        assert comparison_checks()["new-comparison"].token_suspects is rule
    finally:
        CHECKS.pop("new-comparison", None)
    with pytest.raises(ValueError, match="unknown check 'new-comparison'"):
        expectation()
    with pytest.raises(ValueError, match="unknown check 'new-comparison'"):
        Expectation(check="new-comparison", runs=["a", "b"])


def test_a_plugin_comparison_is_valid_in_a_resolved_audit(tmp_path: Path) -> None:
    """A comparison check registered outside specseed (as an entry-point plugin registers
    one) may be named under ``expect`` in a scenario that ``resolve_audit`` reads."""
    from specseed.plan.resolve import resolve_audit

    (tmp_path / "s.yaml").write_text(
        "name: s\ndescription: d\nrequests:\n  a: {prompt: [1, 2]}\n"
        "runs:\n  - {name: one, requests: [a]}\n  - {name: two, requests: [a]}\n"
        "expect:\n  - {check: plugin-comparison, runs: [one, two]}\n"
    )
    (tmp_path / "model.yaml").write_text("scenarios: [s.yaml]\n")
    try:
        comparison_check("plugin-comparison", short="p", title="t", description="d", targets=())(
            lambda ctx, expectation: iter(())
        )
        [planned] = resolve_audit(tmp_path / "model.yaml").planned
        assert planned.scenario.expect[0].check == "plugin-comparison"
    finally:
        CHECKS.pop("plugin-comparison", None)


def test_every_comparison_states_its_token_suspect_rule_and_no_check_branches_on_ids() -> None:
    from pathlib import Path

    import specseed.checks.token_suspects as module

    assert all(spec.token_suspects is not None for spec in comparison_checks().values())
    source = Path(module.__file__).read_text()
    assert not any(f'"{check_id}"' in source for check_id in CHECKS)


def test_a_duplicate_id_is_an_error() -> None:
    with pytest.raises(ValueError, match="duplicate check id 'rng-contract'"):
        run_check("rng-contract", short="x", title="t", description="d", targets=(), needs=())(
            lambda ctx, trace: iter(())
        )


def test_unknown_target_defect_is_an_error() -> None:
    with pytest.raises(ValueError, match="unknown target defects"):
        run_check("new-check", short="x", title="t", description="d", targets=("nope",), needs=())(
            lambda ctx, trace: iter(())
        )


def test_unknown_evidence_is_an_error() -> None:
    with pytest.raises(ValueError, match="unknown evidence"):
        run_check("new-check", short="x", title="t", description="d", targets=(), needs=("x",))(  # type: ignore[arg-type]
            lambda ctx, trace: iter(())
        )


def test_every_rng_check_needs_rng_state_and_token_checks_need_only_tokens() -> None:
    rng_checks = {"rng-contract", "draw-ranges-disjoint", "distinct-seeds", "unseeded-independence"}
    for spec in CHECKS.values():
        if spec.id in rng_checks:
            assert "rng-state" in spec.needs, spec.id
        elif spec.kind == "comparison":
            assert spec.needs == ("tokens",), spec.id


def test_contract_limitations_name_real_checks_and_defects() -> None:
    for contract in CONTRACTS.values():
        for limitation in contract.limitations:
            assert limitation.defect in DEFECT_IDS
            assert set(limitation.checks) <= set(CHECKS), (contract.name, limitation.checks)


def test_ids_and_column_labels_are_unique_and_documented() -> None:
    shorts = [spec.short for spec in CHECKS.values()]
    assert len(set(shorts)) == len(shorts)
    for spec in CHECKS.values():
        assert spec.id == spec.id.lower() and " " not in spec.id
        assert spec.description.endswith(".") and spec.title
