"""The check registry: stable ids, one per check, consistent with schema and contracts."""

from __future__ import annotations

import pytest

from specseed.checks import CHECKS
from specseed.checks.registry import run_check
from specseed.core.contracts import CONTRACTS
from specseed.core.defects import DEFECT_IDS
from specseed.scenarios.schema import COMPARISON_CHECKS


def test_comparison_ids_in_the_schema_are_exactly_the_registered_comparisons() -> None:
    registered = {spec.id for spec in CHECKS.values() if spec.kind == "comparison"}
    assert set(COMPARISON_CHECKS) == registered


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
