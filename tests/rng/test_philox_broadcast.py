"""The Philox stream parameters broadcast as torch broadcasts, without torch's slow path.

``torch.broadcast_shapes`` imports torch's symbolic-shape machinery and sympy on first use,
which cost the default audit over a second at its first draw; ``philox_words`` uses its own
shape rule instead, which must agree with torch's on every shape.
"""

from __future__ import annotations

import itertools
import subprocess
import sys

import pytest
import torch

from specseed.rng.philox import _broadcast_shape, philox_words


def _torch_rule(*shapes: tuple[int, ...]) -> tuple[int, ...] | None:
    try:
        return tuple(torch.broadcast_shapes(*shapes))
    except RuntimeError:
        return None


def _ours(*shapes: tuple[int, ...]) -> tuple[int, ...] | None:
    try:
        return _broadcast_shape(*shapes)
    except ValueError:
        return None


SHAPES = [(), (1,), (3,), (2,), (1, 3), (2, 1), (2, 3), (3, 3), (0,), (1, 0), (2, 1, 1)]


@pytest.mark.parametrize("count", [1, 2, 3])
def test_broadcast_rule_matches_torch(count: int) -> None:
    for shapes in itertools.product(SHAPES, repeat=count):
        assert _ours(*shapes) == _torch_rule(*shapes), shapes


def test_words_broadcast_their_parameters() -> None:
    seeds = torch.tensor([[1], [2]], dtype=torch.int64)
    offsets = torch.tensor([0, 4, 8], dtype=torch.int64)
    words = philox_words(seeds, 0, offsets, 4)
    assert words.shape == (2, 3, 4)
    assert torch.equal(words[1, 2], philox_words(2, 0, 8, 4))
    with pytest.raises(ValueError, match="do not broadcast"):
        philox_words(torch.tensor([1, 2]), 0, torch.tensor([0, 4, 8]), 4)


def test_first_draw_does_not_import_sympy() -> None:
    code = (
        "import sys; from specseed.rng.philox import philox_words; "
        "philox_words(1, 0, 0, 4); philox_words(1, 0, 0, 4000); "
        "print('sympy' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300
    )
    assert out.stdout.strip() == "False"
