"""Which designer reward has spread and points at the frontier: every reward, on the same recorded plays.

Reads finished design runs (`spadework design`, `just bench-corpora`): for each valid world, the scores of
its K unaided and K hinted plays as they were played; then pays each world under each reward of
`trainers/designer/regret.py` (invalid worlds get the penalty under all of them) and prints, side by side:
how many GRPO groups (one document's G designs) have reward spread among their valid designs, how many have
spread at all, the mean reward of valid worlds at the frontier (unaided mean strictly between 0 and 1, or
regret > 0) against the others, and how many valid worlds each reward pays more than nothing. Nothing is
played again: the rewards differ only in how they read the same plays.

    python benchmarks/studies/designer_rewards.py runs/corpora/tables runs/corpora/python-docs
"""

from __future__ import annotations

import argparse
import statistics
from collections import defaultdict
from pathlib import Path

from engine.store import read_records
from trainers.designer.loop import DesignOutcome, read_designs
from trainers.designer.measures import at_frontier, group_of
from trainers.designer.regret import Play, Regret, RewardSettings, designer_reward, regret_of

REWARDS = {
    "regret (credit; the preset's)": RewardSettings(mode="regret"),
    "blend, success in [0.4, 0.6]": RewardSettings(mode="blend", win="success"),
    "band, success (official SPADE)": RewardSettings(mode="band", win="success"),
    "band, credit": RewardSettings(mode="band", win="credit"),
    "band, credit, wide [0.2, 0.8]": RewardSettings(mode="band", win="credit", plateau=(0.2, 0.8)),
}


def world_regret(out: Path, outcome: DesignOutcome) -> Regret | None:
    """The recorded plays of a valid world, read back; None for an invalid design."""
    if outcome.plays is None or outcome.broken is not None:
        return None
    records = read_records(out / outcome.plays)
    return regret_of(Play(r.key.hinted, None if r.status == "infra_error" else r.reward) for r in records)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", type=Path, nargs="+")
    args = parser.parse_args()
    groups: dict[str, list[Regret | None]] = defaultdict(list)  # run/iteration/document -> its designs
    for out in args.runs:
        for outcome in read_designs(out):
            if outcome.verdict is None:  # no reply: the endpoint failed
                continue
            group = f"{out}/{group_of(outcome)}"
            groups[group].append(world_regret(out, outcome))
    valid = [regret for members in groups.values() for regret in members if regret is not None]
    print(f"{len(groups)} groups, {sum(map(len, groups.values()))} designs, {len(valid)} valid, "
          f"{sum(at_frontier(r.mean_plain, r.value) for r in valid)} at the frontier; plays per side: "
          f"{sorted({len(r.plain) for r in valid})}\n")  # fmt: skip
    print("| reward | groups with spread among valid | groups with any spread | mean at frontier | "
          "mean elsewhere | valid paid > 0 |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    for name, settings in REWARDS.items():
        spread_valid = spread_any = 0
        for members in groups.values():
            paid = [designer_reward(regret, settings) for regret in members]
            valid_paid = {round(r, 9) for r, m in zip(paid, members, strict=True) if m is not None and r is not None}
            spread_valid += len(valid_paid) > 1
            spread_any += len({round(r, 9) for r in paid if r is not None}) > 1
        frontier = [designer_reward(r, settings) or 0.0 for r in valid if at_frontier(r.mean_plain, r.value)]
        elsewhere = [designer_reward(r, settings) or 0.0 for r in valid if not at_frontier(r.mean_plain, r.value)]
        paid_any = sum((designer_reward(r, settings) or 0.0) > 0 for r in valid)
        means = [f"{statistics.fmean(part):.3f}" if part else "-" for part in (frontier, elsewhere)]
        print(f"| {name} | {spread_valid} of {len(groups)} | {spread_any} of {len(groups)} | {means[0]} | "
              f"{means[1]} | {paid_any} of {len(valid)} |")  # fmt: skip


if __name__ == "__main__":
    main()
