"""The `spadework` command: one entry point, a sub-command per part of the system.

Each sub-command's module is imported only when that command runs (or for `--help`, which lists them all):
importing every part took about 1.6 s before any command began, paid by each call and each child process."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterable
from typing import Annotated, Any

import typer

from spadework import __version__
from spadework.logs import configure_logging

# name -> (module, attribute): a typer app of sub-commands, or one command's function
GROUPS = {"toolworld": ("toolworlds.cli", "toolworld_app"), "corpus": ("trainers.corpus_cli", "corpus_app"),
          "bench": ("benchmarks.cli", "bench_app"), "worlds": ("trainers.pools_cli", "worlds_app")}  # fmt: skip
COMMANDS = {"rollout": ("engine.cli", "rollout"), "episodes": ("engine.cli", "show"),
            "mock-server": ("spadework.testing.mock_server", "command"), "serve": ("engine.cli", "serve"),
            "vllm": ("engine.cli", "vllm"),
            "design": ("trainers.designer.cli", "design"), "train": ("trainers.train_cli", "train"),
            "report": ("trainers.train_cli", "report"),
            "train-compare": ("trainers.train_cli", "train_compare")}  # fmt: skip


def build_app(names: Iterable[str] = (*GROUPS, *COMMANDS)) -> typer.Typer:
    """The command with the sub-commands `names` (all of them by default), in the order they are listed."""
    built = typer.Typer(
        help="spadework: a language model teaches itself tool use by self-play.",
        no_args_is_help=True,
        pretty_exceptions_show_locals=False,
    )
    built.callback()(main)
    for name in names:
        if name in GROUPS:
            built.add_typer(_load(*GROUPS[name]), name=name)
        else:
            built.command(name)(_load(*COMMANDS[name]))
    return built


def _load(module: str, attribute: str) -> Any:
    return getattr(importlib.import_module(module), attribute)


def _chosen(arguments: list[str]) -> str | None:
    """The sub-command named on the command line, past the top-level options (`--log-level LEVEL` takes a value)."""
    skip = False
    for argument in arguments:
        if skip or argument.startswith("-"):
            skip = argument == "--log-level"
            continue
        return argument
    return None


def _print_version(wanted: bool) -> None:
    if wanted:
        typer.echo(f"spadework {__version__}")
        raise typer.Exit()


LOG_LEVELS = ("debug", "info", "warning", "error")


def _log_level(value: str) -> str:
    if value.lower() not in LOG_LEVELS:
        raise typer.BadParameter(f"{value!r} is not one of {', '.join(LOG_LEVELS)}")
    return value.lower()


def main(
    log_level: Annotated[
        str,
        typer.Option(
            envvar="SPADEWORK_LOG_LEVEL",
            callback=_log_level,
            help="debug, info, warning or error (or set the environment variable SPADEWORK_LOG_LEVEL).",
        ),
    ] = "info",
    version: Annotated[
        bool, typer.Option("--version", callback=_print_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    configure_logging(log_level)


def run() -> None:
    """The `spadework` command. A path it cannot use (missing, a directory, not writable) or a world it
    cannot find ends in one line naming it, not a traceback, whichever command met it."""
    chosen = _chosen(sys.argv[1:])
    try:
        build_app([chosen] if chosen in GROUPS or chosen in COMMANDS else [*GROUPS, *COMMANDS])()
    except Exception as error:
        from toolworlds.registry import UnknownWorldError

        if not isinstance(error, OSError | UnknownWorldError):
            raise
        typer.echo(f"Error: {error}", err=True)
        raise SystemExit(2) from None


def __getattr__(name: str) -> Any:
    """`app`: the whole command, every sub-command loaded (tests drive it in process)."""
    if name == "app":
        return build_app()
    raise AttributeError(name)
