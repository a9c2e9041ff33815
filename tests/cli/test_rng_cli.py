"""``specseed rng draws`` through Typer's CliRunner."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from typer.testing import CliRunner

from specseed.cli.app import app
from specseed.cli.rng import MAX_DRAWS
from specseed.rng import philox_uniforms, philox_words

runner = CliRunner()
U64 = (1 << 64) - 1


def _draws(*args: str):  # type: ignore[no-untyped-def]
    return runner.invoke(app, ["rng", "draws", *args])


def test_json_lists_the_stream() -> None:
    result = _draws("--seed", "42", "--subsequence", "3", "--offset", "12", "-n", "5", "--json")
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    words = philox_words(42, 3, 12, 5).tolist()
    uniforms = philox_uniforms(42, 3, 12, 5).tolist()
    assert [int(d["word"], 16) for d in payload["draws"]] == words
    assert [d["uniform"] for d in payload["draws"]] == uniforms
    assert [d["offset"] for d in payload["draws"]] == [12, 13, 14, 15, 16]
    assert [d["lane"] for d in payload["draws"]] == [0, 1, 2, 3, 0]
    assert payload["draws"][4]["counter"] == hex((3 << 64) + 4)
    assert (payload["seed"], payload["subsequence"], payload["offset"]) == (42, 3, 12)


def test_table_shows_hex_words_and_uniforms() -> None:
    result = _draws("--seed", "0x2a", "--subsequence", "0", "--offset", "0", "-n", "3")
    assert result.exit_code == 0, result.output
    for word, uniform in zip(
        philox_words(42, 0, 0, 3).tolist(), philox_uniforms(42, 0, 0, 3).tolist(), strict=True
    ):
        assert f"{word:#010x}" in result.stdout
        assert f"{uniform:.9g}" in result.stdout


def test_negative_seed_is_the_uint64_stream() -> None:
    neg = _draws("--seed", "-1", "--subsequence", "0", "--offset", "7", "--json")
    pos = _draws("--seed", str(U64), "--subsequence", "0", "--offset", "7", "--json")
    assert neg.exit_code == 0 and pos.exit_code == 0, neg.output + pos.output
    assert json.loads(neg.stdout)["draws"] == json.loads(pos.stdout)["draws"]
    assert json.loads(neg.stdout)["seed_int64"] == -1


def test_largest_values_are_accepted() -> None:
    result = _draws("--seed", str(U64), "--subsequence", str(U64), "--offset", str(U64), "--json")
    assert result.exit_code == 0, result.output
    words = [int(d["word"], 16) for d in json.loads(result.stdout)["draws"]]
    assert words == philox_words(U64, U64, U64, 8).tolist()


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--offset", "-1", "--offset must be in 0 .. 2**64-1"),
        ("--offset", "1.5", "--offset must be an integer"),
        ("--offset", str(U64 + 1), "--offset must be in 0 .. 2**64-1"),
        ("--subsequence", "-3", "--subsequence must be in 0 .. 2**64-1"),
        ("--subsequence", "abc", "--subsequence must be an integer"),
        ("--seed", str(-(1 << 63) - 1), "--seed must be in -2**63 .. 2**64-1"),
        ("--seed", str(U64 + 1), "--seed must be in -2**63 .. 2**64-1"),
        ("-n", "0", "-n must be in 1 .. "),
    ],
)
def test_bad_values_exit_2_with_one_line(option: str, value: str, message: str) -> None:
    args = {"--seed": "1", "--subsequence": "0", "--offset": "0", "-n": "2"}
    args[option] = value
    result = _draws(*[x for pair in args.items() for x in pair])
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], result.stderr


def test_help_shows_an_example() -> None:
    result = runner.invoke(app, ["rng", "draws", "--help"])
    assert result.exit_code == 0, result.output
    assert "specseed rng draws --seed 42 --subsequence 3 --offset 12 -n 4" in result.output


def test_cli_module_does_not_import_torch() -> None:
    code = "import sys, specseed.cli.rng; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("count", [str(MAX_DRAWS + 1), "1000000"])
def test_a_count_past_the_documented_maximum_is_refused_at_once(count: str) -> None:
    # A million draws took 90 s and 1.2 GB; the bound is checked before any is drawn.
    started = time.monotonic()
    result = _draws("--seed", "1", "--subsequence", "0", "--offset", "0", "-n", count)
    assert time.monotonic() - started < 5
    assert result.exit_code == 2, result.output
    assert f"-n must be in 1 .. {MAX_DRAWS:,}, got {int(count):,}" in result.output


def test_the_maximum_is_in_the_help() -> None:
    result = runner.invoke(app, ["rng", "draws", "--help"])
    assert f"at most {MAX_DRAWS:,}" in " ".join(result.output.split())
