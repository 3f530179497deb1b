"""`spadework bench`: public benchmark harnesses."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

bench_app = typer.Typer(help="Public benchmarks: BFCL v4 multi-turn.", no_args_is_help=True)


@bench_app.command("bfcl-v4")
def bfcl_v4(
    categories: Annotated[
        str | None, typer.Option(help="Comma-separated: base, miss_func, miss_param, long_context [default: all].")
    ] = None,
    limit: Annotated[
        int | None, typer.Option(min=1, help="The first N entries of each category [default: 200].")
    ] = None,
    policy: Annotated[
        str, typer.Option(help="ground-truth (replays the answers: must score 100%) or none (must score 0%).")
    ] = "ground-truth",
    out: Annotated[Path | None, typer.Option(help="Run folder; an existing one is resumed.")] = None,
) -> None:
    """BFCL v4 multi-turn with the official loop semantics, backends and checker (from bfcl-eval)."""
    from benchmarks.bfcl.data import BFCLUnavailable, UnknownCategory
    from benchmarks.bfcl.data import categories as parse_categories
    from benchmarks.bfcl.episode import POLICIES
    from benchmarks.bfcl.run import RunMismatch, run_bfcl

    if policy not in POLICIES:
        raise typer.BadParameter(f"unknown policy {policy!r}: choose from {', '.join(POLICIES)}", param_hint="--policy")
    try:
        chosen = parse_categories(categories)
    except UnknownCategory as error:
        raise typer.BadParameter(str(error), param_hint="--categories") from None
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    out = out or Path("benchmarks/results") / f"bfcl-v4-{policy}-{stamp}"
    try:
        summary = run_bfcl(out, policy, chosen, limit)
    except (BFCLUnavailable, RunMismatch) as error:
        raise typer.BadParameter(str(error)) from None
    table = Table("category", "accuracy", "entries", title=f"BFCL v4 multi-turn, policy {policy}")
    for category, accuracy in summary.accuracy.items():
        table.add_row(category, f"{accuracy:.1%}", str(summary.entries[category]))
    table.add_row("overall (mean)", f"{summary.overall:.1%}", str(sum(summary.entries.values())))
    Console().print(table)
    Console().print(f"results: {out / 'results.json'}, {out / 'results.md'} ({summary.seconds:.0f} s)")
