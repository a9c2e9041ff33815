"""What model.yaml and the environment give the openai engine, when a client could not use
it: a base_url that httpx (or the socket layer) would refuse mid-audit with a traceback is a
validation problem with its key, and an API key a header cannot carry is an input error
that says which character, never the key; both before anything runs."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from specseed.cli.app import app
from specseed.core.errors import InputError
from specseed.engine_adapters.openai.adapter import read_api_key
from specseed.engine_adapters.openai.options import OpenAIOptions

REFUSED = [
    ("http://127.0.0.1:99999", "Port out of range"),
    ("http://127.0.0.1:-1", "Port could not be cast"),
    ("http://127.0.0.1:0", "port 0"),
    ("http://[::1", "Invalid IPv6 URL"),
    ("http://[::1]x", "Invalid port"),
    ("http://xn--zz", "Invalid A-label"),
    ("http://127.0.0.1:8000/\r\nX-Evil: 1", "holds '\\r'"),
    ("http://a\tb", "holds '\\t'"),
    ("http://a b", "holds ' '"),
    ("http://a/\u202e", "holds '\\u202e'"),
    ("http://", "names no host"),
    ("http://127.0.0.1:8000/?x=1", "query or fragment"),
    ("http://127.0.0.1:8000#top", "query or fragment"),
]


@pytest.mark.parametrize(("url", "says"), REFUSED, ids=[repr(u)[:30] for u, _ in REFUSED])
def test_a_url_the_client_cannot_open_is_refused_with_why(url: str, says: str) -> None:
    with pytest.raises(ValidationError) as caught:
        OpenAIOptions.model_validate({"base_url": url})
    assert says in str(caught.value)


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8000",
        "https://api.example.com/v/",
        "http://[::1]:8000",
        "http://ü.example",
    ],
)
def test_a_url_that_validates_is_one_httpx_builds_a_request_for(url: str) -> None:
    base = OpenAIOptions.model_validate({"base_url": url}).base_url
    request = httpx.Client(base_url=base).build_request("GET", "/v1/models")
    assert request.url.host and "/v1/models" in str(request.url)


def test_the_audit_refuses_it_before_anything_runs(tmp_path: Path) -> None:
    model = tmp_path / "model.yaml"
    model.write_text('engine: {name: openai, options: {base_url: "http://[::1", model: m}}\n')
    result = CliRunner().invoke(app, ["audit", str(model), "--no-progress"])
    assert result.exit_code == 2, result.output
    assert "engine.options.base_url: 'http://[::1' is not a valid URL" in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


@pytest.mark.parametrize(
    ("key", "says"),
    [
        ("sk-abc\u00a0def", "holds no-break space (U+00A0) at character 7 of 10"),
        ("sk-abc\ndef", "(U+000A) at character 7 of 10"),
        ("sk-abcdé", "latin small letter e with acute (U+00E9) at character 8 of 8"),
        ("sk-a bc", "holds space (U+0020)"),
    ],
)
def test_an_api_key_a_header_cannot_carry_is_refused_without_showing_it(
    key: str, says: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOSTILE_KEY", key)
    with pytest.raises(InputError) as caught:
        read_api_key("HOSTILE_KEY")
    message = caught.value.message
    assert says in message and "$HOSTILE_KEY" in message
    assert key not in message and "abc" not in message
    result = CliRunner().invoke(app, ["serve", "--api-key-env", "HOSTILE_KEY", "--port", "0"])
    assert result.exit_code == 2, result.output
    assert says in result.output and "abc" not in result.output
