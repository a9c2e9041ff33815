"""The scrubber removes secrets by their value and by their place in data, never words of
prose: specseed's own sentences about keys and tokens reach the user as written, and a real
key, an Authorization value or a URL's token never reaches an output.

The prose cases are specseed's own text as the user meets it (``init``'s model.yaml, the
hint of an unset key variable, ``specseed serve``'s 401 through the audit's error), each read
through the CLI in-process.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from rich.text import Text
from typer.testing import CliRunner

from specseed.cli.app import app
from specseed.core.secrets import REMOVED, SafeConsole, hold, scrub, scrub_text

runner = CliRunner()


# -- prose stays --------------------------------------------------------------------------


def test_init_writes_the_api_key_help_as_the_options_say_it(tmp_path: Path) -> None:
    path = tmp_path / "model.yaml"
    result = runner.invoke(app, ["init", str(path), "--engine", "openai"])
    assert result.exit_code == 0, result.output
    text = path.read_text()
    comments = " ".join(text.replace("#", " ").split())  # a long comment is wrapped
    assert "(sent as a Bearer token)" in comments
    assert REMOVED not in text


def _openai_yaml(tmp_path: Path, url: str) -> Path:
    options = {"base_url": url, "api_key_env": "SPECSEED_KEY", "retries": 0}
    path = tmp_path / "model.yaml"
    path.write_text(
        yaml.safe_dump({"engine": {"name": "openai", "options": options}, "scenarios": ["uptime"]})
    )
    return path


def test_the_hint_for_an_unset_key_variable_shows_what_to_type(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SPECSEED_KEY", raising=False)
    model = _openai_yaml(tmp_path, "http://127.0.0.1:9")
    result = runner.invoke(app, ["audit", str(model), "--no-progress"])
    assert result.exit_code == 2, result.output
    assert "export SPECSEED_KEY=<key> before the audit" in result.output


def test_a_refused_key_reads_as_the_server_said_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``specseed serve``'s 401, through the audit's error: "wrong" is the key the user gave
    (too short to be told from a word, so not removed by value) and "Bearer ..." is prose."""
    from specseed.engine_adapters.base import EngineSettings
    from specseed.engine_adapters.reference.adapter import ReferenceEngine
    from specseed.engine_adapters.reference.live import LiveEngine
    from specseed.server.app import create_app
    from tests.engine_adapters.openai.servers import asgi_server

    settings = EngineSettings()
    right = "right-key-0c4e7a9d2b"
    served = create_app(LiveEngine(ReferenceEngine(settings), settings), api_key=right)
    monkeypatch.setenv("SPECSEED_KEY", "wrong")
    with asgi_server(served) as url:
        result = runner.invoke(app, ["audit", str(_openai_yaml(tmp_path, url)), "--no-progress"])
    assert result.exit_code == 3, result.output
    flat = " ".join(result.output.split())
    assert "HTTP 401: missing or wrong API key (Authorization: Bearer ...)" in flat
    assert right not in result.output


@pytest.mark.parametrize(
    "prose",
    [
        "sent as a Bearer token",
        "Bearer authentication with the key in $SPECSEED_KEY",
        "export SPECSEED_KEY=<key> first",
        "export OPENAI_API_KEY=... before the audit",
        "SPECSEED_KEY=$(cat key.txt) specseed serve --api-key-env SPECSEED_KEY",
        "Authorization: Bearer KEY",
        "probe first diverges at token 17; first different token: 17",
        "missing key: temperature",
        "last_token=5, max_tokens: 8",
        "api_key_env: SPECSEED_KEY",
        "13 pass, 2 fail",
    ],
)
def test_prose_is_not_a_secret(prose: str) -> None:
    assert scrub_text(prose) == prose
    assert scrub_text(prose, by_name=False) == prose


# -- secrets go ---------------------------------------------------------------------------

HELD = "q7-held-secret-4419"
ENV_VALUE = "plain-env-token-8d21e"
"""Shaped like no known key: only the variable's name says it is a secret."""


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        (f"server said: bad key {HELD}", HELD),
        (f"log: using {ENV_VALUE} for downloads", ENV_VALUE),
        ("Authorization: Bearer abc.def-1234567", "abc.def-1234567"),
        ("authorization: basic YWxpY2U6cGE1NQ==", "YWxpY2U6cGE1NQ=="),
        ("{'Authorization': 'Bearer tok3n-in-a-dict'}", "tok3n-in-a-dict"),
        ('{"authorization": "Token 0p4que-value"}', "0p4que-value"),
        ("curl -H 'Authorization: Bearer eyJhbGciOi.x9' http://h", "eyJhbGciOi.x9"),
        ("retrying with bearer A9fjw3kLq2 after 401", "A9fjw3kLq2"),
        ("GET https://alice:pa55-word@api.example.com/v1", "pa55-word"),
        ("GET https://h/v1?model=m&token=t0k3n&sig=abc", "t0k3n"),
        ("GET https://h/v1?model=m&token=t0k3n&sig=abc", "sig=abc"),
        ("key sk-abcdefghijklmnopqrst0 leaked", "sk-abcdefghijklmnopqrst0"),
        ("hf_abcdefghijklmnopqrstu in the log", "hf_abcdefghijklmnopqrstu"),
    ],
)
def test_a_secret_by_value_or_in_its_place_is_removed_from_files_and_the_terminal(
    text: str, secret: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    hold(HELD)
    monkeypatch.setenv("SPECSEED_TEST_DOWNLOAD_TOKEN", ENV_VALUE)
    for scrubbed in (scrub_text(text), scrub_text(text, by_name=False)):
        assert secret not in scrubbed and REMOVED in scrubbed, scrubbed


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("OPENAI_API_KEY=a-plain-value-1", "a-plain-value-1"),
        ('"api_key": "json-field-value"', "json-field-value"),
        ("x-api-key: plain-key-123", "plain-key-123"),
        ("password=hunter2-again", "hunter2-again"),
    ],
)
def test_a_value_assigned_to_a_secret_name_is_removed_from_the_terminal(
    text: str, secret: str
) -> None:
    assert secret not in scrub_text(text)


def test_the_terminal_scrubs_every_styled_piece_of_a_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Rich splits a line into styled pieces; a key in its own piece is still removed, and a
    scheme cut from its credential is left alone."""
    hold(HELD)
    console = SafeConsole(width=200, record=True, force_terminal=False)
    line = Text.assemble("Authorization: Bearer ", (HELD, "bold"), " and Bearer ", ("...", "dim"))
    with console.capture() as captured:
        console.print(line)
    shown = captured.get()
    assert HELD not in shown
    assert "Authorization: Bearer <removed> and Bearer ..." in shown


def test_structured_data_is_scrubbed_by_key() -> None:
    data = {"headers": {"Authorization": "Bearer x"}, "api_key": "y", "max_tokens": 3}
    assert scrub(data) == {
        "headers": {"Authorization": REMOVED},
        "api_key": REMOVED,
        "max_tokens": 3,
    }
