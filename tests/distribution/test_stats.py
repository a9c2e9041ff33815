"""Chi-square tails, critical values, power and Holm, against published values and sampling."""

from __future__ import annotations

import math

import pytest
import torch

from specseed.distribution import stats


@pytest.mark.parametrize(
    ("x", "df", "expected"),
    [
        (3.841458820694124, 1, 0.05),  # textbook 95% quantiles
        (30.14352720564616, 19, 0.05),
        (43.82019596451793, 19, 0.001),
        (10.827566170662733, 1, 0.001),
        (0.0, 4, 1.0),
    ],
)
def test_chi2_sf_matches_published_quantiles(x: float, df: int, expected: float) -> None:
    assert stats.chi2_sf(x, df) == pytest.approx(expected, rel=1e-7)


def test_chi2_critical_inverts_the_tail() -> None:
    for df in (1, 7, 24):
        for alpha in (0.05, 1e-3, 1e-6):
            assert stats.chi2_sf(stats.chi2_critical(alpha, df), df) == pytest.approx(
                alpha, rel=1e-6
            )


def test_noncentral_tail_matches_sampling() -> None:
    generator = torch.Generator().manual_seed(0)
    z = torch.randn(400_000, 3, generator=generator, dtype=torch.float64)
    z[:, 0] += math.sqrt(5.0)
    sampled = float(((z**2).sum(1) >= 10.0).double().mean())
    assert stats.ncx2_sf(10.0, 3, 5.0) == pytest.approx(sampled, abs=0.003)
    assert stats.ncx2_sf(10.0, 3, 0.0) == stats.chi2_sf(10.0, 3)


def test_power_noncentrality_is_the_textbook_figure() -> None:
    # alpha 0.05, 1 df, 80% power: noncentrality 7.85 (Cohen's tables: (1.96 + 0.84)^2).
    assert stats.noncentrality_for_power(0.05, 1, 0.8) == pytest.approx(7.849, abs=0.002)


def test_holm_step_down() -> None:
    rejected, adjusted = stats.holm([0.01, 0.04, 0.03, 0.005], 0.05)
    assert adjusted == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert rejected == [True, False, False, True]
