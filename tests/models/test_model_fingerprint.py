"""Fingerprints of logits rows: stable across releases, sensitive to every bit."""

from __future__ import annotations

import hashlib

import pytest
import torch

from specseed.models.fingerprint import fingerprint, fingerprints


def test_fingerprint_is_blake2b_of_the_little_endian_float32_bytes() -> None:
    row = torch.tensor([1.0, -2.5, 0.0, float("inf")])
    expected = hashlib.blake2b(
        bytes.fromhex("0000803f000020c000000000" + "0000807f"), digest_size=8
    ).hexdigest()
    assert fingerprint(row) == expected
    assert fingerprint(row) == "f964dbf9c3ec6d1e"  # recorded traces depend on this value


def test_fingerprint_sees_every_bit() -> None:
    row = torch.linspace(-3, 3, 512)
    nudged = row.clone()
    nudged[100] = torch.nextafter(nudged[100], torch.tensor(10.0))
    assert fingerprint(row) != fingerprint(nudged)
    assert fingerprint(torch.tensor([0.0])) != fingerprint(torch.tensor([-0.0]))


def test_fingerprint_accepts_views_and_other_dtypes() -> None:
    matrix = torch.arange(12.0).view(3, 4)
    assert fingerprint(matrix[:, 1]) == fingerprint(torch.tensor([1.0, 5.0, 9.0]))
    assert fingerprint(torch.tensor([1.5], dtype=torch.float64)) == fingerprint(torch.tensor([1.5]))


def test_fingerprint_takes_one_row() -> None:
    with pytest.raises(ValueError, match="one row"):
        fingerprint(torch.zeros(2, 3))


def test_fingerprints_of_a_block_are_those_of_its_rows() -> None:
    block = torch.linspace(-3, 3, 5 * 512).view(5, 512)
    assert fingerprints(block) == [fingerprint(row) for row in block]
    assert fingerprints(block[1:3, ::2]) == [fingerprint(row) for row in block[1:3, ::2]]
    assert fingerprints(torch.zeros(0, 512)) == []
    with pytest.raises(ValueError, match="rows"):
        fingerprints(torch.zeros(3))
