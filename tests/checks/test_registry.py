"""The check registry: stable ids, one per check, consistent with schema and contracts."""

from __future__ import annotations

import pytest

from specseed.checks import CHECKS
from specseed.checks.registry import comparison_check, comparison_checks, run_check
from specseed.core.contracts import CONTRACTS
from specseed.core.defects import DEFECT_IDS
from specseed.scenarios.schema import Expectation, Scenario, comparison_ids


def test_comparison_ids_in_the_schema_are_exactly_the_registered_comparisons() -> None:
    registered = {spec.id for spec in CHECKS.values() if spec.kind == "comparison"}
    assert set(comparison_ids()) == registered
    enum = Scenario.model_json_schema()["$defs"]["Expectation"]["properties"]["check"]["enum"]
    assert set(enum) == registered


def test_a_comparison_registered_with_its_rule_is_known_to_the_schema_at_once() -> None:
    """One decorator is the whole of a comparison: the schema and the suspects follow."""

    def rule(d: object) -> list[object]:
        return []

    try:
        comparison_check(
            "new-comparison",
            short="new",
            title="t",
            description="d",
            targets=(),
            token_suspects=rule,  # type: ignore[arg-type]
        )(lambda ctx, expectation: iter(()))
        assert Expectation(check="new-comparison", runs=["a", "b"]).check == "new-comparison"
        enum = Scenario.model_json_schema()["$defs"]["Expectation"]["properties"]["check"]
        assert "new-comparison" in enum["enum"]
        assert comparison_checks()["new-comparison"].token_suspects is rule
    finally:
        CHECKS.pop("new-comparison", None)
    with pytest.raises(ValueError, match="unknown check 'new-comparison'"):
        Expectation(check="new-comparison", runs=["a", "b"])


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
