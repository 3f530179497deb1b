"""The `spadework` command: one entry point, a sub-command per part of the system."""

from __future__ import annotations

import typer

from spadework.logs import configure_logging
from toolworlds.cli import toolworld_app

app = typer.Typer(
    help="spadework: a language model teaches itself tool use by self-play.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)
app.add_typer(toolworld_app, name="toolworld")


@app.callback()
def main(log_level: str = typer.Option("info", help="debug, info, warning or error.")) -> None:
    configure_logging(log_level)
