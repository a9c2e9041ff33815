"""``specseed rng``: look at Philox (curand) streams directly.

torch is imported inside the command, so ``specseed --help`` stays fast.
"""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.table import Table

from specseed.cli.error_boundary import error_boundary
from specseed.cli.inputs import FLAG
from specseed.core.secrets import SafeConsole

app = typer.Typer(
    help="Inspect curand Philox4x32-10 streams.\n\n[bold]Example[/]\n\n"
    "  specseed rng draws --seed 42 --subsequence 3 --offset 12 -n 4",
    no_args_is_help=True,
)
out = SafeConsole()

MAX_DRAWS = 4096
"""Most draws one command prints (1024 Philox counters). A table of 10,000 took 10 s to
print and a million 90 s and 1.2 GB; a later window is one ``--offset`` away."""


@app.command("draws")
def draws(
    seed: Annotated[
        str,
        typer.Option(
            "--seed",
            metavar="INT",
            help="uint64 seed (decimal or 0x-hex); a negative int64 names the same stream as "
            "its uint64 bits.",
            show_default=False,
        ),
    ],
    subsequence: Annotated[
        str,
        typer.Option(
            "--subsequence",
            metavar="INT",
            help="uint64 subsequence (flashinfer: the row's position in the launch).",
            show_default=False,
        ),
    ],
    offset: Annotated[
        str,
        typer.Option(
            "--offset",
            metavar="INT",
            help="uint64 offset, counted in 32-bit draws.",
            show_default=False,
        ),
    ],
    count: Annotated[
        str,
        typer.Option(
            "-n",
            "--count",
            metavar="INT",
            help=f"How many draws to print (at most {MAX_DRAWS:,}; move --offset for more).",
        ),
    ] = "8",
    as_json: Annotated[
        bool, typer.Option("--json", metavar=FLAG, help="Write JSON to stdout.")
    ] = False,
) -> None:
    """Print the words (hex) and [bold]curand_uniform[/] values of one stream.

    The stream is the one curand_init(seed, subsequence, offset) starts; draw j is what a
    kernel reads as its j-th curand() / curand_uniform() call.

    [bold]Example[/]: what did row 3 of a flashinfer launch with seed 42 draw at offset 12?

      specseed rng draws --seed 42 --subsequence 3 --offset 12 -n 4
    """
    from specseed.core.errors import InputError
    from specseed.rng.draws import parse_stream_value, stream_draws
    from specseed.rng.philox import as_int64_bits

    with error_boundary():
        seed_u = parse_stream_value(seed, "--seed", allow_int64=True)
        subsequence_u = parse_stream_value(subsequence, "--subsequence")
        offset_u = parse_stream_value(offset, "--offset")
        n = parse_stream_value(count, "-n")
        if not 1 <= n <= MAX_DRAWS:
            raise InputError(
                f"-n must be in 1 .. {MAX_DRAWS:,}, got {n:,} (a later window: --offset)"
            )
        listing = stream_draws(seed_u, subsequence_u, offset_u, n)

    if as_json:
        import struct

        payload = {
            "seed": seed_u,
            "seed_int64": as_int64_bits(seed_u),
            "subsequence": subsequence_u,
            "offset": offset_u,
            "draws": [
                {
                    "index": d.index,
                    "offset": d.offset,
                    "counter": f"{d.counter:#x}",
                    "lane": d.lane,
                    "word": f"{d.word:#010x}",
                    "uniform": d.uniform,
                    "uniform_bits": f"{struct.unpack('<I', struct.pack('<f', d.uniform))[0]:#010x}",
                }
                for d in listing
            ],
        }
        from specseed.workflows.outputs import write_stdout

        with error_boundary():  # a stdout that cannot take it: exit 5, no traceback
            write_stdout(json.dumps(payload, indent=2) + "\n", "JSON")
        return

    table = Table(
        title=f"seed {seed_u} (int64 {as_int64_bits(seed_u)}), subsequence {subsequence_u}, "
        f"offset {offset_u}",
        header_style="bold",
    )
    for column in ("draw", "offset", "counter", "lane", "word", "uniform"):
        table.add_column(column, justify="left" if column == "counter" else "right")
    for d in listing:
        table.add_row(
            str(d.index),
            str(d.offset),
            f"{d.counter:#x}",
            str(d.lane),
            f"{d.word:#010x}",
            f"{d.uniform:.9g}",
        )
    out.print(table)
