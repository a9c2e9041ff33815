"""``specseed doctor`` on the CPU: what it finds, and that it finds without importing."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from specseed.cli.app import app
from specseed.engine_adapters.inventory import take_inventory


def _plant_flashinfer(root: Path, version: str) -> None:
    """An installed-looking flashinfer whose import would fail loudly."""
    package = root / "flashinfer"
    package.mkdir()
    (package / "__init__.py").write_text("raise RuntimeError('doctor must not import me')\n")
    dist = root / f"flashinfer_python-{version}.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: flashinfer-python\nVersion: {version}\n"
    )


def test_doctor_on_this_cpu_machine() -> None:
    result = CliRunner().invoke(app, ["doctor", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    torch_row = next(p for p in data["packages"] if p["name"] == "torch")
    assert torch_row["found"] and torch_row["version"] == torch.__version__
    runs = {(r["engine"], r["device"], r["sampling_backend"]): r for r in data["runnable"]}
    assert runs[("reference", "cpu", "cpu")]["ok"] is True
    assert runs[("reference", "cuda", "flashinfer")]["ok"] is torch.cuda.is_available()
    assert data["cuda_available"] is torch.cuda.is_available()


def test_doctor_tables_fit_80_columns() -> None:
    result = CliRunner().invoke(app, ["doctor"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    assert "What can run here" in result.output
    assert max(len(line) for line in result.output.splitlines()) <= 80


def test_flashinfer_is_found_and_versioned_without_import(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _plant_flashinfer(tmp_path, "0.6.4")
    monkeypatch.syspath_prepend(str(tmp_path))
    inventory = take_inventory()
    flashinfer = inventory.package("flashinfer")
    assert flashinfer.found and flashinfer.version == "0.6.4"
    assert flashinfer.location == str(tmp_path / "flashinfer")
    assert inventory.flashinfer_reads_element0 is True
    assert "flashinfer" not in sys.modules


def test_a_fixed_flashinfer_is_not_flagged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _plant_flashinfer(tmp_path, "0.7.4")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert take_inventory().flashinfer_reads_element0 is False


def test_engines_whose_package_is_missing_say_so() -> None:
    inventory = take_inventory()
    if inventory.package("tensorrt_llm").found:
        pytest.skip("tensorrt_llm is installed here")
    trtllm = next(r for r in inventory.runnable if r.engine == "trtllm")
    assert not trtllm.ok and "tensorrt_llm is not installed" in trtllm.reason


def test_install_hints_survive_rich_markup(monkeypatch: pytest.MonkeyPatch) -> None:
    """``specseed[gpu]`` in a reason must print as written, not be read as a Rich tag."""
    import specseed.engine_adapters.inventory as inventory

    monkeypatch.setattr(inventory, "_torch_cuda", lambda: (True, "13.0", ("Some GPU",)))
    monkeypatch.setattr(
        inventory,
        "_package",
        lambda name: inventory.PackageStatus(name, name == "torch", None, None),
    )
    result = CliRunner().invoke(app, ["doctor"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "'specseed[gpu]')" in result.output  # the reason wraps after 'install'


def test_each_engine_is_listed_where_it_runs_and_samples() -> None:
    from specseed.engine_adapters.inventory import take_inventory

    rows = {r.engine: r for r in take_inventory().runnable if r.engine != "reference"}
    assert (rows["trtllm"].device, rows["trtllm"].sampling_backend) == ("cuda", "flashinfer")
    assert rows["openai"].device == "server" and rows["vllm"].device == "cpu/cuda"
