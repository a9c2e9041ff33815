"""``specseed scenarios``: list, show and validate scenario files."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.syntax import Syntax
from rich.table import Table

from specseed.cli.error_boundary import error_boundary
from specseed.core.secrets import SafeConsole
from specseed.core.wording import plural
from specseed.workflows.outputs import write_stdout

app = typer.Typer(
    help="List, show and validate scenarios.\n\n[bold]Examples[/]\n\n  specseed scenarios list\n"
    "  specseed scenarios show uptime\n  specseed scenarios validate my-scenario.yaml model.yaml",
    no_args_is_help=True,
)
out = SafeConsole()
lines = Console(soft_wrap=True)


@app.command("list")
def list_scenarios() -> None:
    """List the built-in scenario library (the whole of one: specseed scenarios show NAME)."""
    from specseed.scenarios.loader import library_names, load_library_scenario

    with error_boundary():
        # Reads at 80 columns: one id per line (an id is never broken), no prose; `show`
        # prints the description and everything else.
        scenarios = [load_library_scenario(name).scenario for name in library_names()]
        table = Table(header_style="bold", pad_edge=False, box=None, collapse_padding=True)
        table.add_column("name", no_wrap=True)
        table.add_column("runs", justify="right", no_wrap=True)
        table.add_column("compares", no_wrap=True)
        table.add_column("covers (defects)", no_wrap=True)
        for scenario in scenarios:
            compares = list(dict.fromkeys(e.check for e in scenario.expect))
            if scenario.distribution is not None:
                compares.append("distribution")
            table.add_row(
                scenario.name,
                str(len(scenario.runs)),
                "\n".join(compares) or "-",
                "\n".join(scenario.covers) or "-",
            )
        out.print(table)
        named_only = [s.name for s in scenarios if not s.default_audit]
        if named_only:
            out.print(
                f"[dim]Long, so not in the default audit (they run when named): "
                f"{', '.join(named_only)}.[/]"
            )
        out.print("[dim]specseed scenarios show NAME prints a scenario in full.[/]")


@app.command("show")
def show(name: Annotated[str, typer.Argument(help="Built-in scenario name.")]) -> None:
    """Print a built-in scenario's YAML (copy it to start your own)."""
    from specseed.scenarios.loader import library_text, load_library_scenario

    with error_boundary():
        load_library_scenario(name)
        text = library_text(name)
        if out.is_terminal:
            # Highlighted, but never broken at the console width: soft wrap leaves the
            # wrapping to the terminal, so a copied scenario is the file and still parses.
            highlighted = Syntax(text, "yaml", background_color="default").highlight(text)
            highlighted.rstrip()
            out.print(highlighted, soft_wrap=True)
        else:
            # Piped or redirected: the exact file, so that `scenarios show NAME > my.yaml`
            # gives a file that validates.
            write_stdout(text, "scenario")  # exit 5 when stdout cannot take it


@app.command("validate")
def validate(
    files: Annotated[
        list[Path], typer.Argument(help="Scenario files or model.yaml files.", show_default=False)
    ],
) -> None:
    """Validate scenario files and model.yaml files (a model.yaml's scenarios too).

    Exit code 0 when every file validates, 2 otherwise.
    """
    from specseed.checks import registered_comparison_ids
    from specseed.core.errors import ScenarioError
    from specseed.plan.resolve import resolve_audit
    from specseed.scenarios.loader import is_audit_config, parse_scenario, read_source

    problems: list[str] = []
    for path in files:
        try:
            text = read_source(path)
            if is_audit_config(text, str(path)):
                planned = resolve_audit(path).planned
                lines.print(
                    f"[green]✓[/] {escape(str(path))}: model.yaml with "
                    f"{plural(len(planned), 'scenario')}"
                )
            else:
                scenario = parse_scenario(text, str(path), registered_comparison_ids())
                lines.print(
                    f"[green]✓[/] {escape(str(path))}: scenario {scenario.name} "
                    f"({plural(len(scenario.runs), 'run')})"
                )
        except ScenarioError as exc:
            problems.extend(exc.problems or [exc.message])
    if problems:
        with error_boundary():
            raise ScenarioError(f"{plural(len(problems), 'problem')} found", problems)
