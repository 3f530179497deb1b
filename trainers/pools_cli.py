"""`spadework worlds export RUN --out DIR`: a run's designed worlds as a dataset another run can start from."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Annotated

import anyio
import typer

from toolworlds.sandbox import SandboxPool
from trainers.pools import DATA_FILE, PoolError, export_pool

worlds_app = typer.Typer(help="World pools: the worlds a run designed, as Parquet datasets.", no_args_is_help=True)


@worlds_app.command("export")
def export(
    run: Annotated[Path, typer.Argument(help="A training or design run directory (it holds memory.sqlite).")],
    out: Annotated[Path, typer.Option(help="Folder for the pool: data/worlds.parquet and a dataset card.")],
) -> None:
    """Write the run's valid worlds (spec or code, tools, task and hint, the agent's scores, regret, status,
    document, iteration) as a Parquet dataset with a dataset card; `run.archive_from=OUT` trains on it."""

    async def main() -> list[dict[str, object]]:
        async with SandboxPool() as sandbox:  # a pool's Python worlds load only in the sandbox
            return await export_pool(run, out, sandbox)

    try:
        rows = anyio.run(main)
    except PoolError as error:
        raise typer.BadParameter(str(error), param_hint="RUN") from None
    statuses = Counter(str(row["status"]) for row in rows)
    typer.echo(f"{len(rows)} worlds ({', '.join(f'{n} {s}' for s, n in sorted(statuses.items())) or 'none'}) "
               f"-> {out / DATA_FILE}, {out / 'README.md'}")  # fmt: skip
