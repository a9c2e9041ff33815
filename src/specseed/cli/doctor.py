"""``specseed doctor``: what is installed, and which engines and backends can run here."""

from __future__ import annotations

import dataclasses
import json
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from specseed.core.secrets import SafeConsole
from specseed.reporting.layout import Fitted

out = SafeConsole()


def doctor(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")] = False,
) -> None:
    """Show installed engines, flashinfer, torch, CUDA and the GPU, and what can run here.

    Engine packages are found without importing them. Exit code 0 whatever is missing.

    [bold]Example[/]

      specseed doctor
    """
    from specseed.engine_adapters.inventory import take_inventory

    inventory = take_inventory()
    if as_json:
        from specseed.cli.error_boundary import error_boundary
        from specseed.workflows.outputs import write_stdout

        with error_boundary():  # a stdout that cannot take it: exit 5, no traceback
            write_stdout(json.dumps(dataclasses.asdict(inventory), indent=2) + "\n", "JSON")
        return
    gpus = ", ".join(inventory.gpus) or "none"
    cuda = f"CUDA {inventory.cuda_version}" if inventory.cuda_version else "no CUDA build"
    out.print(
        f"specseed {inventory.specseed}, Python {inventory.python}; torch: {cuda}, GPU: {gpus}",
        highlight=False,
    )
    packages = Table(title="Packages", title_justify="left", header_style="bold")
    packages.add_column("package")
    packages.add_column("found")
    packages.add_column("version")
    packages.add_column("from")
    for p in inventory.packages:
        packages.add_row(
            p.name, "yes" if p.found else "no", p.version or "—", escape(p.location or "—")
        )
    # A path is never split mid-name: where the table would, its rows become lines.
    out.print(Fitted(packages), soft_wrap=True)
    runs = Table(title="What can run here", title_justify="left", header_style="bold")
    runs.add_column("engine")
    runs.add_column("device")
    runs.add_column("sampling")
    runs.add_column("runs")
    runs.add_column("why", ratio=1)
    for r in inventory.runnable:
        # escape: reasons hold "specseed[gpu]", which Rich would read as markup.
        runs.add_row(
            r.engine, r.device, r.sampling_backend, "yes" if r.ok else "no", escape(r.reason)
        )
    out.print(Fitted(runs), soft_wrap=True)
