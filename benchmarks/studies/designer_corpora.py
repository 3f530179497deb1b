"""The designer on each grounding corpus, task wording, plan rule and vocabulary, same seeds, side by side.

Runs `spadework design --preset cpu-tiny` (the embedded model, the CPU preset's designer: specs written in
stages, 768 tokens, temperature 0.7, paid the band on partial credit; the agent constrained, 4 turns of 64
tokens) once per corpus, `--task-text` (written by the model, or derived from the plan by trusted code),
`--plans` (which plans may end), `--plan-calls` (the most calls a plan has), `--vocabularies` (names and values free, or
copied from the document), `--tool-texts` (tools named by the model, or by trusted code for what they do)
and `--keys` (the agent spells a record's key, or picks one its tools list: `--key-choices`) with the same
seed, then prints one table:
validity, what the gates rejected (the `meaning` gate's rejections counted apart: worlds that passed every
other gate), the Vendi score of the valid worlds' tool schemas, grounding (the share of a valid world's names
and record values found in its document; worlds at least half grounded), regret with its interval, hinted
and unaided means, the frontier share (valid worlds the agent neither always nor never solves unaided, or
with regret > 0), the valid worlds' plans (changing or reading, their length), and the designer groups whose
valid designs were paid different rewards. A finished run is read back, not run again, so a killed comparison resumes.

    python benchmarks/studies/designer_corpora.py --out runs/corpora      # or: just bench-corpora
    python benchmarks/studies/designer_corpora.py --corpora tables --task-texts written derived
    python benchmarks/studies/designer_corpora.py --corpora tables --plans any change --plan-calls 3 1
    python benchmarks/studies/designer_corpora.py --corpora tables --vocabularies free document
    python benchmarks/studies/designer_corpora.py --corpora tables --vocabularies document --task-texts derived \
        --plan-calls 1 --tool-texts written derived
    python benchmarks/studies/designer_corpora.py --corpora tables --vocabularies document --task-texts derived \
        --plan-calls 1 --keys spelled listed
"""

from __future__ import annotations

import argparse
import itertools
import random
import statistics
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from toolworlds.spec import SpecError, parse_spec
from trainers.corpus import Corpus, open_source
from trainers.designer.budget import SPEC_BUDGET
from trainers.designer.diversity import vendi_score
from trainers.designer.grounding import GROUNDED_SHARE, grounding
from trainers.designer.loop import DesignOutcome, read_designs, read_metrics
from trainers.designer.measures import at_frontier, designer_summary, played
from trainers.designer.stages import CHANGING_KINDS

# The CPU preset's designer (specs in stages, 768 tokens, temperature 0.7, the band on partial credit) with the
# agent constrained (a JSON-schema reply, 4 turns of 64 tokens) and every seed a play uses checked; each arm's
# rules are set on top.
DESIGN = ["agent.mode=constrained", "agent.call_schema=false", "designer.smoke_seeds=8"]


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
    block = designer_summary(designs)
    interval = block["regret_ci95"]
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
        "regret, mean (95% CI)": f"{statistics.fmean(regrets):+.3f} [{interval[0]:+.3f}, {interval[1]:+.3f}]"
        if regrets else "-",
        "hinted / unaided mean": f"{statistics.fmean(d.mean_hinted or 0.0 for d in scored):.3f} / "
        f"{statistics.fmean(d.mean_plain or 0.0 for d in scored):.3f}" if scored else "-",
        "frontier": f"{sum(at_frontier(d.mean_plain or 0.0, d.regret or 0.0) for d in scored)} of {len(scored)}",
        "groups with reward spread among valid designs": f"{block['groups_with_valid_spread']} of {block['groups']}",
        "unaided means": " ".join(f"{d.mean_plain:.2f}" for d in scored) or "-",
        **plan_rows(scored),
    }  # fmt: skip


def plan_rows(scored: list[DesignOutcome]) -> dict[str, str]:
    """What the valid worlds' plans do (change something, or only read and ask), how long they are, and how
    many of each are at the frontier: which tasks the agent can be taught by."""
    kinds: dict[str, list[bool]] = {"changes": [], "reads only": []}
    calls: list[int] = []
    for design in scored:
        spec = parse_spec(design.sample.reply or "")
        changing = {tool.name for tool in spec.tools if tool.kind in CHANGING_KINDS}
        changes = any(call.tool in changing for call in spec.task.plan)
        kinds["changes" if changes else "reads only"].append(
            at_frontier(design.mean_plain or 0.0, design.regret or 0.0)
        )
        calls.append(len(spec.task.plan))
    return {
        "valid plans that change / read only (at the frontier)": " / ".join(
            f"{len(marks)} ({sum(marks)})" for marks in kinds.values()),
        "calls per valid plan, mean": f"{statistics.fmean(calls):.2f}" if calls else "-",
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("runs/corpora"))
    parser.add_argument("--corpora", nargs="+", default=["python-docs", "tables"])
    parser.add_argument("--task-texts", nargs="+", default=["written"], choices=["written", "derived"])
    parser.add_argument("--plans", nargs="+", default=["any"], choices=["any", "change"])
    parser.add_argument("--plan-calls", nargs="+", type=int, default=[SPEC_BUDGET.plan])
    parser.add_argument("--vocabularies", nargs="+", default=["free"], choices=["free", "document"])
    parser.add_argument("--tool-texts", nargs="+", default=["written"], choices=["written", "derived"])
    parser.add_argument("--keys", nargs="+", default=["spelled"], choices=["spelled", "listed"])
    parser.add_argument("--iterations", type=int, default=2)
    parser.add_argument("--documents", type=int, default=4)
    parser.add_argument("--generations", type=int, default=4)
    parser.add_argument("--plays", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    arms = list(itertools.product(args.corpora, args.task_texts, args.plans, args.plan_calls, args.vocabularies,
                                  args.tool_texts, args.keys))  # fmt: skip
    for arm in arms:
        corpus, text, plans, calls, vocabulary, tools, keys = arm
        out = arm_directory(args.out, *arm)
        if len(read_metrics(out)) >= args.iterations if out.exists() else False:
            continue
        knobs = [*DESIGN, f"run.iterations={args.iterations}", f"designer.documents={args.documents}",
                 f"designer.generations={args.generations}", f"agent.plays={args.plays}", f"run.seed={args.seed}",
                 f"designer.corpus={corpus}", f"designer.task_text={text}", f"designer.plans={plans}",
                 f"designer.plan_calls={calls}", f"designer.vocabulary={vocabulary}", f"designer.tool_text={tools}",
                 f"designer.key_choices={'true' if keys == 'listed' else 'false'}"]  # fmt: skip
        command = [sys.executable, "-m", "spadework", "design", "--out", str(out), "--preset", "cpu-tiny",
                   *(flag for knob in knobs for flag in ("--set", knob))]  # fmt: skip
        print(f"designing on {arm_label(*arm)}: {' '.join(command[1:])}", flush=True)
        subprocess.run(command, check=True)
    summaries = {arm: summary(arm_directory(args.out, *arm), arm[0], args.seed, args.documents) for arm in arms}
    rows = list(next(iter(summaries.values())))
    print(f"\n| seed {args.seed} | " + " | ".join(arm_label(*arm) for arm in arms) + " |")
    print("|---|" + "---|" * len(arms))
    for row in rows:
        print(f"| {row} | " + " | ".join(summaries[arm][row] for arm in arms) + " |")


def arm_directory(out: Path, corpus: str, text: str, plans: str, calls: int, vocabulary: str = "free",
                  tools: str = "written", keys: str = "spelled") -> Path:  # fmt: skip
    """`OUT/<corpus>` for the defaults (as before there were choices), else with what differs:
    `OUT/<corpus>-derived-change-calls1-document-tools-keys`."""
    return out / "-".join([corpus, *_differs(text, plans, calls, vocabulary, tools, keys)])


def arm_label(corpus: str, text: str, plans: str, calls: int, vocabulary: str = "free", tools: str = "written",
              keys: str = "spelled") -> str:  # fmt: skip
    return ", ".join([corpus, *_differs(text, plans, calls, vocabulary, tools, keys)])


def _differs(text: str, plans: str, calls: int, vocabulary: str, tools: str, keys: str) -> list[str]:
    defaults = ((text, "written"), (plans, "any"), (f"calls{calls}", f"calls{SPEC_BUDGET.plan}"), (vocabulary, "free"),
                ("tools" if tools == "derived" else "", ""), ("keys" if keys == "listed" else "", ""))  # fmt: skip
    return [part for part, default in defaults if part != default]


if __name__ == "__main__":
    main()
