"""`spadework corpus sample`: see what the designer would be grounded on."""

from __future__ import annotations

import json
import random
import sys
from typing import Annotated

import typer
from rich.console import Console
from rich.panel import Panel

from trainers.corpus import Corpus, open_source
from trainers.documents import CorpusError

corpus_app = typer.Typer(help="Grounding documents for the designer.", no_args_is_help=True)


@corpus_app.command("sample")
def sample(
    source: Annotated[
        str,
        typer.Argument(
            help="'tables', 'python-docs', a .jsonl or .parquet file, a folder of text files, hf:NAME (or "
            "hf:NAME@SPLIT) or hf-stream:NAME."
        ),
    ] = "tables",
    count: Annotated[int, typer.Option(min=1, help="How many documents to draw.")] = 3,
    max_tokens: Annotated[int, typer.Option(min=16, help="Chunk budget (about 4 characters per token).")] = 1500,
    text_field: Annotated[str, typer.Option(help="The text column or key of a .jsonl/.parquet corpus.")] = "text",
    seed: Annotated[int, typer.Option(help="Seed of the draws.")] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per line.")] = False,
) -> None:
    """Draw documents uniformly at random (then a chunk of each) and print them."""
    try:
        corpus = Corpus(open_source(source, text_field), max_tokens=max_tokens)
        rng = random.Random(seed)
        drawn = [corpus.sample(rng) for _ in range(count)]
    except CorpusError as error:
        raise typer.BadParameter(str(error), param_hint="SOURCE") from None
    if as_json:
        for document in drawn:
            sys.stdout.write(json.dumps(document.__dict__) + "\n")
        return
    console = Console()
    console.print(f"{len(corpus.source)} documents in {corpus.source.name}")
    for document in drawn:
        console.print(Panel(document.text, title=document.source, title_align="left"))
