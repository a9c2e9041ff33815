"""Small commands: ``init``, ``schema``, ``checks``, ``contracts``, ``engines``, ``formats``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Literal

import typer
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from specseed.cli.error_boundary import error_boundary
from specseed.cli.inputs import FLAG
from specseed.core.errors import InputError
from specseed.core.secrets import SafeConsole

out = SafeConsole()


def init(
    path: Annotated[Path, typer.Argument(help="Where to write it.")] = Path("model.yaml"),
    engine: Annotated[
        str,
        typer.Option("--engine", help="Write the options of this engine (see specseed engines)."),
    ] = "reference",
    force: Annotated[
        bool, typer.Option("--force", metavar=FLAG, help="Overwrite an existing file.")
    ] = False,
) -> None:
    """Write the default audit configuration as a commented model.yaml.

    [bold]Examples[/]

      specseed init && specseed audit model.yaml
      specseed init vllm.yaml --engine vllm
    """
    from specseed.core.files import write_atomic
    from specseed.engine_adapters.registry import engine_names
    from specseed.scenarios.template import model_yaml_template

    with error_boundary():
        if engine not in engine_names():
            raise InputError(
                f"--engine {engine}: no such engine", hint=f"known: {', '.join(engine_names())}"
            )
        if path.exists() and not force:
            raise InputError(f"{path} exists", hint="pass --force to overwrite it")
        try:
            write_atomic(path, model_yaml_template(engine))
        except OSError as exc:
            raise InputError(f"cannot write {path}: {exc.strerror}") from None
    # A command to copy: one line whatever the width (the terminal wraps it, not Rich).
    out.print(init_next_step(path, engine), soft_wrap=True, markup=False)


def init_next_step(path: Path, engine: str) -> str:
    """What to do after ``init``: the audit command, after the options the template leaves as
    ``<name>`` placeholders (required options have no default) are filled in."""
    from specseed.engine_adapters.registry import get_engine

    model = get_engine(engine).options_model()
    required = (
        [n for n, f in model.model_fields.items() if f.is_required()] if model is not None else []
    )
    if not required:
        return f"wrote {path}; run: specseed audit {path}"
    fields = ", ".join(f"engine.options.{n} (now <{n}>)" for n in required)
    return f"wrote {path}; fill in {fields}, then run: specseed audit {path}"


def schema(
    kind: Annotated[
        Literal["all", "model", "scenario", "trace", "bundle"],
        typer.Option(
            "--kind",
            # A metavar of the five choices is wider than the help's option column at 80
            # columns, where Rich split it mid-word ("bun" / "dle>"): the help lists them.
            metavar="KIND",
            help="Which schema: model (model.yaml), scenario, trace (a JSONL trace line), "
            "bundle (a bundle's files), or all.",
        ),
    ] = "all",
) -> None:
    """Print the JSON Schema of model.yaml, scenario files, traces and bundles (generated
    from the models).

    [bold]Examples[/]

      specseed schema --kind scenario > scenario.schema.json
      specseed schema --kind trace > trace.schema.json
    """
    from specseed.bundle.format import bundle_json_schema
    from specseed.checks import registered_comparison_ids
    from specseed.scenarios.schema import json_schemas
    from specseed.traces.records import trace_json_schema

    schemas = json_schemas(registered_comparison_ids())
    chosen = {
        "all": {**schemas, "trace": trace_json_schema(), "bundle": bundle_json_schema()},
        "model": schemas["model.yaml"],
        "scenario": schemas["scenario"],
        "trace": trace_json_schema(),
        "bundle": bundle_json_schema(),
    }[kind]
    from specseed.cli.error_boundary import error_boundary
    from specseed.workflows.outputs import write_stdout

    with error_boundary():  # a stdout that cannot take it: exit 5, no traceback
        write_stdout(json.dumps(chosen, indent=2) + "\n", "schema")


def checks() -> None:
    """List every check: its stable id, what it means and the defects it targets."""
    from specseed.checks import CHECKS, PLUGIN_PROBLEMS

    # One block per check, not a four-column table: at 80 columns the table cut ids and
    # defect names ("draw-ranges-disjoi…"); a block wraps only the prose.
    for spec in CHECKS.values():
        head = Text.assemble((spec.id, "bold"), f" ({spec.kind})")
        head.append(" · targets: " + (", ".join(spec.targets) or "—"), style="dim")
        head.append(" · needs: " + ", ".join(spec.needs), style="dim")
        out.print(head)
        out.print(Padding(Text(spec.description), (0, 0, 1, 4)))
    out.print(
        "[dim]needs: the evidence a check reads; where an engine does not expose it, the "
        "check is reported as skip with the reason.[/]"
    )
    for problem in PLUGIN_PROBLEMS:
        out.print(Text(f"unusable: {problem}", style="yellow"))


def contracts() -> None:
    """List every RNG contract: what it says, the upstream commits it models, the
    upstream tests it was held to, the limitations its authors stated (quoted, with
    where) and the upstream bugs it carries, which fail like any other departure.

    Contracts from other packages appear through the `specseed.contracts` entry point group.
    """
    from specseed.engine_adapters.contracts import all_contracts

    # One block per contract, like `checks`: commit hashes and test paths do not fit a table.
    for contract in all_contracts().values():
        head = Text(contract.name, style="bold")
        if contract.aliases:
            head.append(" · aliases: " + ", ".join(contract.aliases), style="dim")
        out.print(head)
        lines = [contract.summary]
        if contract.upstream_commits:
            lines.append("upstream: " + ", ".join(contract.upstream_commits))
        if contract.held_to:
            lines.append("held to: " + "; ".join(contract.held_to))
        if contract.subsequence_rule:
            lines.append("subsequence: " + contract.subsequence_rule)
        if not contract.limitations:
            lines.append("limitations: none")
        for limitation in contract.limitations:  # only what upstream's authors stated
            lines.append(
                f"limitation {limitation.defect}: stated in {limitation.source}: "
                f"\u201c{limitation.stated}\u201d"
            )
        for departure in contract.departures:  # failures, not excused
            lines.append(f"not a limitation, fails: {departure.defect}: {departure.upstream}")
        for line in lines:
            out.print(Padding(Text(line), (0, 0, 0, 4)))
        out.print()


def engines() -> None:
    """List the engines specseed can audit: what each observes, and whether it can run here.

    Engines from other packages appear through the `specseed.engines` entry point group.

    [bold]Example[/]

      specseed engines
    """
    from specseed.engine_adapters.registry import engines as known_engines

    table = Table(header_style="bold")
    table.add_column("engine")
    table.add_column("observes")
    table.add_column("here")
    for info in known_engines().values():
        missing = info.missing_packages()
        here = "[green]ready[/]" if not missing else f"[red]missing {', '.join(missing)}[/]"
        source = "" if info.source == "specseed" else f" [dim]({info.source})[/]"
        table.add_row(
            f"[bold]{info.name}[/]{source}\n[dim]{info.summary}[/]",
            ", ".join(info.observability.evidence),
            here,
        )
    out.print(table)
    out.print(
        "[dim]observes: token ids always; steps = batch rows and engine steps; rng-state = "
        "per-event RNG state; drafts = draft and acceptance counts; logits = logits "
        "fingerprints. Checks needing what an engine does not observe are skipped.[/]"
    )


def formats() -> None:
    """List the report formats `specseed audit --report FORMAT=PATH` can write.

    Formats from other packages appear through the `specseed.formats` entry point group.

    [bold]Example[/]

      specseed audit model.yaml --report junit=junit.xml
    """
    from specseed.reporting.formats import formats as known_formats
    from specseed.workflows.outputs import REPORT_ALIASES

    # One block per format, like `checks`: the summaries are prose.
    for fmt in known_formats().values():
        head = Text(fmt.name, style="bold")
        if fmt.suffix:
            head.append(f" ({fmt.suffix})")
        alias = REPORT_ALIASES.get(fmt.name)
        if alias:
            head.append(f" · also {alias} PATH", style="dim")
        if fmt.source != "specseed":
            head.append(f" · from {fmt.source}", style="dim")
        out.print(head)
        if fmt.problem:
            out.print(Padding(Text(f"unusable: {fmt.problem}", style="red"), (0, 0, 1, 4)))
        else:
            out.print(Padding(Text(fmt.summary), (0, 0, 1, 4)))
    out.print("[dim]'-' as PATH writes to stdout; --report is repeatable.[/]")
