"""Where an episode's tokens go: what the model server decoded and what it read, per trajectory store.

An evaluation of the main job is paid for in server time, and on 2 cores that time is tokens: each sampled
token is a decoding step (~20-100 ms, growing with the context and the slots busy) and each token the
engine appends between turns (tool results, template glue) is read once (~5-13 ms). For each store this
prints, per episode: turns, sampled tokens and how many of them were bytes the call grammar forced (a
decoding step spent on no choice: `AdmittedTokens.forced`), replies cut at the token limit, tokens read
between turns, and the wall time per episode the store's timestamps give (episodes ran concurrently).

    python benchmarks/perf/episode_cost.py runs/train-tools/<time>/eval/after--1-reference-lite-*
    just bench-episodes runs/train-tools/<time>
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console
from rich.table import Table

from engine.local_models import resolve_gguf, tokenizer_dir
from engine.store import EPISODES_FILE, read_records
from trainers.constrained import AdmittedTokens


def stores(paths: list[Path]) -> list[Path]:
    """Trajectory stores named, or found under the directories named (a whole run, say)."""
    found: list[Path] = []
    for path in paths:
        found += [path] if (path / EPISODES_FILE).exists() else sorted(p.parent for p in path.rglob(EPISODES_FILE))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", type=Path, nargs="+", help="trajectory stores, or directories holding them")
    parser.add_argument("--tokenizer", default="default", help="the served model's tokenizer (a .gguf or 'default')")
    args = parser.parse_args()
    from transformers import AutoTokenizer

    admitted = AdmittedTokens(AutoTokenizer.from_pretrained(tokenizer_dir(resolve_gguf(args.tokenizer))))
    table = Table(title="per episode: tokens decoded and read (means)")
    columns = ("store", "episodes", "turns", "sampled", "of them forced", "capped replies", "read between turns",
               "wall s / episode")  # fmt: skip
    for column in columns:
        table.add_column(column, justify="left" if column == "store" else "right", no_wrap=column == "store")
    totals = {"sampled": 0, "forced": 0}
    for store in stores(args.paths):
        records = [record for record in read_records(store) if record.tokens is not None]
        if not records:
            continue
        sampled = forced = capped = turns = read = 0
        for record in records:
            trace = record.tokens
            assert trace is not None
            sampled += sum(trace.loss_mask)
            read += len(trace.loss_mask) - sum(trace.loss_mask)
            turns += len(record.turns)
            capped += sum(turn.finish_reason == "length" for turn in record.turns)
            if trace.grammar:
                forced += sum(admitted.forced(trace.grammar, trace.completion_ids, trace.loss_mask))
        started = min(record.started_at for record in records)
        ended = max(record.started_at + record.duration_s for record in records)
        count = len(records)
        totals["sampled"] += sampled
        totals["forced"] += forced
        table.add_row(store.name, str(count), f"{turns / count:.2f}", f"{sampled / count:.1f}",
                      f"{forced / count:.1f} ({forced / max(1, sampled):.0%})", f"{capped / count:.2f}",
                      f"{read / count:.1f}", f"{(ended - started) / count:.2f}")  # fmt: skip
    console = Console(width=max(160, Console().width))  # the store names in full, also in a log
    console.print(table)
    if totals["sampled"]:
        share = totals["forced"] / totals["sampled"]
        console.print(
            f"all stores: {totals['forced']:,} of {totals['sampled']:,} sampled tokens were forced ({share:.0%})"
        )


if __name__ == "__main__":
    main()
