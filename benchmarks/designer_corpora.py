"""The designer on each grounding corpus, same seeds, side by side: what a corpus does to the worlds.

Runs `spadework design` (the embedded model, the CPU preset's designer: specs written in stages, 768 tokens,
temperature 0.7; the agent constrained, 4 turns of 64 tokens) once per corpus with the same seed, then
prints one table: validity, what the gates rejected (the `meaning` gate's rejections counted apart: worlds
that passed every other gate), the Vendi score of the valid worlds' tool schemas, grounding (the share of a
valid world's names and record values found in its document; worlds at least half grounded), regret, and
the frontier share (valid worlds the agent neither always nor never solves unaided, or with regret > 0).
A finished corpus run is read back, not run again, so a killed comparison resumes.

    python benchmarks/designer_corpora.py --out runs/corpora      # or: just bench-corpora
"""

from __future__ import annotations

import argparse
import random
import statistics
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from toolworlds.spec import SpecError, parse_spec
from trainers.corpus import Corpus, open_source
from trainers.designer.diversity import vendi_score
from trainers.designer.grounding import GROUNDED_SHARE, grounding
from trainers.designer.loop import read_designs, read_metrics
from trainers.designer.measures import at_frontier, played

DESIGN = ["--designer-format", "spec", "--designer-mode", "tokens", "--designer-tokens", "768", "--temperature",
          "0.7", "--agent-mode", "constrained", "--agent-turns", "4", "--agent-tokens", "64",
          "--document-tokens", "400"]  # fmt: skip


def parsed_specs(out: Path, corpus: str, seed: int, documents: int) -> tuple[list[float], float]:
    """The grounding of every design whose spec parses, valid or not, against the document it was asked for
    (the iteration's draws replayed: `run_iteration` draws from `Random(f"{seed}/{iteration}")`), and the
    Vendi score of their tool names and descriptions."""
    source = Corpus(open_source(corpus), max_tokens=400)
    shares: list[float] = []
    tools: list[list[dict[str, Any]]] = []
    for design in read_designs(out):
        iteration, index = (int(part) for part in design.sample.key.split("/")[1:3])
        rng = random.Random(f"{seed}/{iteration}")
        document = [source.sample(rng) for _ in range(documents)][index]
        assert document.source == design.sample.document, (document.source, design.sample.document)
        try:
            spec = parse_spec(design.sample.reply or "")
        except SpecError:
            continue
        shares.append(grounding(spec, document.text).share)
        tools.append([{"name": tool.name, "description": tool.description} for tool in spec.tools])
    return shares, vendi_score(tools)


def summary(out: Path, corpus: str, seed: int, documents: int) -> dict[str, str]:
    metrics, designs = read_metrics(out), read_designs(out)
    everything, parsed_vendi = parsed_specs(out, corpus, seed, documents)
    replies = sum(m.replies for m in metrics)
    rejections: Counter[str] = Counter()
    for m in metrics:
        rejections.update(m.rejections)
    meaning = {kind: n for kind, n in rejections.items() if kind.startswith("meaning")}
    scored = played(designs)
    groundings = [d.grounding for d in designs if d.grounding is not None]
    regrets = [d.regret for d in scored if d.regret is not None]
    vendi = [f"{m.vendi:.2f}" for m in metrics]
    meaning_kinds = ", ".join(f"{kind.removeprefix('meaning: ')} {n}" for kind, n in meaning.items())
    other = [f"{kind} {n}" for kind, n in rejections.most_common() if not kind.startswith("meaning")]
    return {
        "valid": f"{len(scored)} of {replies}",
        "failed only the meaning gate": f"{sum(meaning.values())} ({meaning_kinds or 'none'})",
        "other rejections": ", ".join(other[:4]) or "-",
        "Vendi per iteration": " ".join(vendi),
        "every parsed spec: grounding mean; grounded; Vendi": f"{statistics.fmean(everything):.2f}; "
        f"{sum(g >= GROUNDED_SHARE for g in everything)} of {len(everything)}; {parsed_vendi:.2f}",
        "grounding of valid worlds, mean": f"{statistics.fmean(groundings):.2f}" if groundings else "-",
        f"grounded (>= {GROUNDED_SHARE:.0%})": f"{sum(g >= GROUNDED_SHARE for g in groundings)} of {len(groundings)}",
        "regret, mean": f"{statistics.fmean(regrets):+.3f}" if regrets else "-",
        "frontier": f"{sum(at_frontier(d.mean_plain or 0.0, d.regret or 0.0) for d in scored)} of {len(scored)}",
        "unaided means": " ".join(f"{d.mean_plain:.2f}" for d in scored) or "-",
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("runs/corpora"))
    parser.add_argument("--corpora", nargs="+", default=["python-docs", "tables"])
    parser.add_argument("--iterations", type=int, default=2)
    parser.add_argument("--documents", type=int, default=4)
    parser.add_argument("--generations", type=int, default=4)
    parser.add_argument("--plays", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    for corpus in args.corpora:
        out = args.out / corpus
        if len(read_metrics(out)) >= args.iterations if out.exists() else False:
            continue
        command = [sys.executable, "-m", "spadework", "design", "--out", str(out), "--corpus", corpus, *DESIGN,
                   "--iterations", str(args.iterations), "--documents", str(args.documents), "--generations",
                   str(args.generations), "--plays", str(args.plays), "--seed", str(args.seed)]  # fmt: skip
        print(f"designing on {corpus}: {' '.join(command[1:])}", flush=True)
        subprocess.run(command, check=True)
    summaries = {corpus: summary(args.out / corpus, corpus, args.seed, args.documents) for corpus in args.corpora}
    rows = list(next(iter(summaries.values())))
    print(f"\n| seed {args.seed} | " + " | ".join(args.corpora) + " |")
    print("|---|" + "---|" * len(args.corpora))
    for row in rows:
        print(f"| {row} | " + " | ".join(summaries[corpus][row] for corpus in args.corpora) + " |")


if __name__ == "__main__":
    main()
