"""The distribution check's evidence in bundles (issue 21): ``audit --bundle`` stores it per
run, ``check`` re-judges it with no model and no torch and reaches the recorded verdict, a
biased engine's bundle still fails, and evidence that is damaged or describes other tokens
is refused (exit 2) or ``skip`` naming the mismatch, never a pass.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from specseed.bundle.format import EVIDENCE_SUFFIX, MAX_EVIDENCE_BYTES
from tests.bundle.common import invoke

SRC = Path(__file__).resolve().parents[2] / "src"

SCENARIO = """\
name: dist
description: Seeded copies of one sampled request under rejection sampling.
requests:
  hot: {prompt: [31, 7, 88, 14], seed: 1, temperature: 1.0, max_tokens: 8}
runs:
  - name: rejection
    requests: [hot]
    engine: {max_num_requests: 64, verification: rejection}
distribution: {samples: 100}
"""

HIDE_TORCH = """
import sys

class _HideTorch:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ModuleNotFoundError("No module named 'torch'", name="torch")
        return None

sys.meta_path.insert(0, _HideTorch())
"""


def _record(root: Path, *, defects: list[str], checkpoint: bool) -> Path:
    root.mkdir()
    (root / "dist.scenario.yaml").write_text(SCENARIO)
    engine = f"  options: {{defects: {json.dumps(defects)}}}\n"
    if checkpoint:
        assert invoke("make-checkpoint", str(root / "ckpt")).exit_code == 0
        engine += "  checkpoint: ckpt/target\n  draft_checkpoint: ckpt/draft\n"
    (root / "model.yaml").write_text(f"engine:\n{engine}scenarios: [dist.scenario.yaml]\n")
    bundle = root / "bundle"
    result = invoke("audit", str(root / "model.yaml"), "--bundle", str(bundle))
    assert result.exit_code in (0, 1), result.output
    return bundle


def _distribution(bundle: Path) -> dict[str, Any]:
    findings = json.loads((bundle / "dist" / "findings.json").read_text())["findings"]
    (finding,) = [f for f in findings if f["check"] == "distribution"]
    return finding


def _check_without_torch(bundle: Path, tmp: Path) -> tuple[int, dict[str, Any] | None, str]:
    """``specseed check`` in a process where torch cannot be imported."""
    hide = tmp / "hide"
    hide.mkdir(exist_ok=True)
    (hide / "sitecustomize.py").write_text(HIDE_TORCH)
    env = {**os.environ, "PYTHONPATH": f"{hide}{os.pathsep}{SRC}", "COLUMNS": "80"}
    probe = subprocess.run([sys.executable, "-c", "import torch"], env=env, capture_output=True)
    assert probe.returncode != 0  # the hiding works, so what follows proves something
    report = tmp / "report.json"
    report.unlink(missing_ok=True)
    done = subprocess.run(
        [sys.executable, "-m", "specseed", "check", str(bundle), "--json", str(report)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if not report.exists():
        return done.returncode, None, done.stdout + done.stderr
    findings = json.loads(report.read_text())["findings"]
    found = [f for f in findings if f["check"] == "distribution"]
    return done.returncode, (found[0] if found else None), done.stdout + done.stderr


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _record(tmp_path_factory.mktemp("clean") / "audit", defects=[], checkpoint=True)


def _copy(bundle: Path, tmp: Path) -> Path:
    target = tmp / "copy"
    shutil.copytree(bundle, target)
    return target


def _evidence_path(bundle: Path) -> Path:
    return bundle / "dist" / f"rejection{EVIDENCE_SUFFIX}"


def test_check_rejudges_the_stored_evidence_without_torch_or_the_checkpoint(
    clean: Path, tmp_path: Path
) -> None:
    recorded = _distribution(clean)
    assert recorded["status"] == "pass"
    evidence = json.loads(_evidence_path(clean).read_text())
    assert evidence["groups"][0]["length"] == 8 and len(evidence["groups"][0]["tokens"]) == 100
    bundle = _copy(clean, tmp_path)
    shutil.rmtree(clean.parent / "ckpt")  # the model is gone
    code, finding, output = _check_without_torch(bundle, tmp_path)
    assert code == 0, output
    assert finding is not None
    assert (finding["status"], finding["message"], finding["details"]) == (
        recorded["status"],
        recorded["message"],
        recorded["details"],
    )
    # Without the evidence the same process has no way to judge: the evidence did it.
    _evidence_path(bundle).unlink()
    code, finding, output = _check_without_torch(bundle, tmp_path)
    assert finding is not None and finding["status"] == "skip", output
    assert "no stored evidence and no oracle here" in finding["message"]


def test_a_biased_engines_bundle_still_fails_on_recheck(tmp_path: Path) -> None:
    bundle = _record(tmp_path / "audit", defects=["biased-acceptance"], checkpoint=False)
    recorded = _distribution(bundle)
    assert recorded["status"] == "fail"
    code, finding, output = _check_without_torch(bundle, tmp_path)
    assert code == 1, output
    assert finding is not None and finding["status"] == "fail"
    assert finding["message"] == recorded["message"]
    assert "biased-acceptance" in {s["defect"] for s in finding["suspects"]}


def _tamper(bundle: Path, change: Any) -> None:
    path = _evidence_path(bundle)
    data = json.loads(path.read_text())
    change(data["groups"][0])
    path.write_text(json.dumps(data))


def _set(key: str, index: int, value: Any) -> Any:
    def change(group: dict[str, Any]) -> None:
        group[key][index] = value

    return change


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (_set("probability", 3, -0.25), "probability.3"),
        (_set("mass_before", 0, 2.0), "mass_before.0"),
        (lambda g: g["envelope"].pop(), "envelope holds 799 values, not 800"),
        (lambda g: g["tokens"][5].append(1), "a token row is not 8 tokens long"),
        (lambda g: g.update(surplus=1), "surplus"),
    ],
    ids=["negative", "above-one", "short", "long-row", "unknown-key"],
)
def test_damaged_evidence_is_exit_2_naming_the_file(
    clean: Path, tmp_path: Path, change: Any, said: str
) -> None:
    bundle = _copy(clean, tmp_path)
    _tamper(bundle, change)
    result = invoke("check", str(bundle))
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.split())
    assert "distribution" in text and said in text


def test_nan_huge_and_symlinked_evidence_files_are_exit_2(clean: Path, tmp_path: Path) -> None:
    bundle = _copy(clean, tmp_path)
    path = _evidence_path(bundle)
    text = path.read_text()
    value = json.dumps(json.loads(text)["groups"][0]["probability"][0])
    path.write_text(text.replace(value, "NaN", 1))
    result = invoke("check", str(bundle))
    assert result.exit_code == 2 and "NaN" in result.output, result.output
    with path.open("wb") as handle:  # sparse: no disk spent
        handle.truncate(MAX_EVIDENCE_BYTES + 1)
    result = invoke("check", str(bundle))
    assert result.exit_code == 2 and "larger than 64 MiB" in result.output, result.output
    outside = tmp_path / "outside.json"
    outside.write_text(_evidence_path(clean).read_text())
    path.unlink()
    path.symlink_to(outside)  # a file outside the bundle is never read through it
    result = invoke("check", str(bundle))
    assert result.exit_code == 2 and "symlink" in result.output, result.output


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (lambda g: g["tokens"][2].__setitem__(4, (g["tokens"][2][4] + 1) % 200), "at position 4"),
        (lambda g: g.update(request_ids=["x" + r for r in g["request_ids"]]), "request ids"),
        (lambda g: g.update(prompt_ids=[1, 2, 3]), "prompt ids"),
        (lambda g: g.update(temperature=0.5), "sampling setup"),
    ],
    ids=["token", "request-ids", "prompt", "setup"],
)
def test_evidence_of_other_requests_or_tokens_is_skip_naming_the_mismatch(
    clean: Path, tmp_path: Path, change: Any, said: str
) -> None:
    bundle = _copy(clean, tmp_path)
    _tamper(bundle, change)
    result = invoke("check", str(bundle), "--json", str(tmp_path / "r.json"))
    findings = json.loads((tmp_path / "r.json").read_text())["findings"]
    (finding,) = [f for f in findings if f["check"] == "distribution"]
    assert finding["status"] == "skip", finding
    assert "does not match the trace" in finding["message"] and said in finding["message"]
    assert result.exit_code in (0, 4), result.output
