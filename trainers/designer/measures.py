"""What a run's designs say about self-play: the frontier, the designer's learning signal, grounding.

The lift of the agent says nothing about the designer. These do: how many valid worlds sit at the agent's
frontier (it neither always nor never solves them unaided, or the hint helps), the mean regret of valid
worlds with its interval, how many of the designer's GRPO groups (one document's G designs) pay their
valid designs different rewards (without that, the designer learns only to be valid), and how many
valid worlds come from their document (`grounding`). Per iteration, the same measures show whether the
designer learns; `trend` compares the run's first third of iterations with its last.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from trainers.designer.grounding import GROUNDED_SHARE
from trainers.designer.loop import DesignOutcome, IterationMetrics
from trainers.stats import bootstrap_difference, bootstrap_mean

# The unaided win rate's bands (`win_band`): never, rarely, the paper's "wins 20-80% of the time", mostly, always.
WIN_BANDS = ("0", "<20%", "20-80%", ">80%", "1")


def at_frontier(mean_plain: float, regret: float) -> bool:
    """Unaided mean score strictly between 0 and 1, or a hint that helps."""
    return 0.0 < mean_plain < 1.0 or regret > 0


def world_at_frontier(design: DesignOutcome) -> bool:
    return at_frontier(design.mean_plain or 0.0, design.regret or 0.0)


def grounded(design: DesignOutcome) -> bool:
    """A world at least GROUNDED_SHARE of whose names and values its document holds."""
    return design.grounding is not None and design.grounding >= GROUNDED_SHARE


def scored(design: DesignOutcome) -> bool:
    """A valid world that was played and scored (not broken in play, not masked)."""
    return design.mean_plain is not None and design.regret is not None and design.broken is None


def played(designs: list[DesignOutcome]) -> list[DesignOutcome]:
    return [design for design in designs if scored(design)]


def group_of(design: DesignOutcome) -> str:
    """`designer/<iteration>/<document>`: the designs of one prompt, one GRPO group."""
    return design.sample.key.rsplit("/", 1)[0]


def groups_with_valid_spread(designs: list[DesignOutcome]) -> tuple[int, int]:
    """(groups whose valid designs were paid at least two different rewards, groups)."""
    groups: dict[str, set[float]] = defaultdict(set)
    for design in designs:
        if design.verdict is None:  # no reply: the endpoint failed
            continue
        paid = groups[group_of(design)]
        if scored(design) and design.reward is not None:
            paid.add(round(design.reward, 9))
    return sum(len(paid) > 1 for paid in groups.values()), len(groups)


def designer_summary(designs: list[DesignOutcome], metrics: list[IterationMetrics] | None = None) -> dict[str, Any]:
    """The designer's block of `summary.json`: validity, frontier share, regret (95% CI), group spread,
    grounding, the same per iteration, and the trends of frontier share and designer reward."""
    replies = [d for d in designs if d.verdict is not None]
    valid = played(designs)
    regrets = [d.regret for d in valid if d.regret is not None]
    spread, groups = groups_with_valid_spread(designs)
    groundings = [d.grounding for d in valid if d.grounding is not None]
    summary: dict[str, Any] = {
        "replies": len(replies),
        "valid": len(valid),
        "frontier": sum(world_at_frontier(d) for d in valid),
        "regret_mean": None,
        "regret_ci95": None,
        "groups": groups,
        "groups_with_valid_spread": spread,
        "grounded": sum(grounded(d) for d in valid),
        "grounding_mean": round(sum(groundings) / len(groundings), 4) if groundings else None,
    }
    if regrets:
        mean, low, high = bootstrap_mean(regrets)
        summary["regret_mean"], summary["regret_ci95"] = round(mean, 4), [round(low, 4), round(high, 4)]
    summary["per_iteration"] = [_iteration_json(row) for row in per_iteration(designs, metrics or [])]
    summary["trend"] = {name: None if found is None else found.as_json() for name, found in trends(designs).items()}
    return summary


def _iteration_json(row: DesignerIteration) -> dict[str, Any]:
    def rounded(value: float | None) -> float | None:
        return None if value is None else round(value, 4)

    return {"iteration": row.iteration, "replies": row.replies, "valid": row.valid, "frontier": row.frontier,
            "frontier_share": rounded(row.frontier_share), "unaided_win_rate": row.wins,
            "regret_mean": rounded(row.regret_mean), "plain_mean": rounded(row.plain_mean),
            "hinted_mean": rounded(row.hinted_mean), "reward_mean": rounded(row.reward_mean),
            "grounded": row.grounded, "vendi": rounded(row.vendi), "leak_rate": rounded(row.leak_rate)}  # fmt: skip


def win_band(rate: float) -> str:
    """The band of WIN_BANDS a win rate falls in: 0 and 1 on their own, 20-80% closed at both ends."""
    if rate <= 0.0:
        return "0"
    if rate >= 1.0:
        return "1"
    if rate < 0.2:
        return "<20%"
    return "20-80%" if rate <= 0.8 else ">80%"


@dataclass(frozen=True)
class DesignerIteration:
    """One iteration of the designer as the report's per-iteration table shows it."""

    iteration: int
    replies: int
    valid: int
    frontier: int
    wins: dict[str, int]  # valid worlds per band of the agent's unaided win rate (WIN_BANDS)
    regret_mean: float | None
    plain_mean: float | None  # the valid worlds' mean unaided score
    hinted_mean: float | None
    reward_mean: float | None  # the designer's mean reward over every reply it was paid for
    grounded: int
    vendi: float | None
    leak_rate: float | None

    @property
    def frontier_share(self) -> float | None:
        return self.frontier / self.valid if self.valid else None


def per_iteration(designs: list[DesignOutcome], metrics: list[IterationMetrics]) -> list[DesignerIteration]:
    """The designer's measures iteration by iteration (Vendi and leak rate as `metrics.jsonl` recorded them)."""
    recorded = {m.iteration: m for m in metrics}
    by_iteration: dict[int, list[DesignOutcome]] = defaultdict(list)
    for design in designs:
        by_iteration[design.iteration].append(design)
    rows = []
    for iteration in sorted(by_iteration):
        outcomes = by_iteration[iteration]
        valid = played(outcomes)
        wins = dict.fromkeys(WIN_BANDS, 0)
        for design in valid:
            if design.solved_plain is not None:
                wins[win_band(design.solved_plain)] += 1
        paid = [d.reward for d in outcomes if d.verdict is not None and d.reward is not None]
        metric = recorded.get(iteration)
        rows.append(
            DesignerIteration(
                iteration=iteration,
                replies=sum(d.verdict is not None for d in outcomes),
                valid=len(valid),
                frontier=sum(world_at_frontier(d) for d in valid),
                wins=wins,
                regret_mean=_mean([d.regret for d in valid if d.regret is not None]),
                plain_mean=_mean([d.mean_plain for d in valid if d.mean_plain is not None]),
                hinted_mean=_mean([d.mean_hinted for d in valid if d.mean_hinted is not None]),
                reward_mean=_mean(paid),
                grounded=sum(grounded(d) for d in valid),
                vendi=metric.vendi if metric else None,
                leak_rate=metric.answer_leak_rate if metric else None,
            )
        )
    return rows


@dataclass(frozen=True)
class Trend:
    """The last third of a run's iterations against its first: means, difference and its 95% interval."""

    first_iterations: list[int]
    last_iterations: list[int]
    first: float
    last: float
    difference: float
    low: float
    high: float
    samples: tuple[int, int]  # values behind each mean

    def as_json(self) -> dict[str, Any]:
        return {"first_iterations": self.first_iterations, "last_iterations": self.last_iterations,
                "first": round(self.first, 4), "last": round(self.last, 4), "difference": round(self.difference, 4),
                "ci95": [round(self.low, 4), round(self.high, 4)], "samples": list(self.samples)}  # fmt: skip


def trend(values: dict[int, list[float]]) -> Trend | None:
    """Last third minus first third of the iterations (a third: a whole number of iterations, at least one),
    every value resampled as its own draw; None with fewer than 3 iterations or a third without values.

    The values of one iteration come from one policy, so they are not independent draws: the interval is
    narrower than one over whole runs would be, and a run's trend is one run's."""
    iterations = sorted(values)
    third = len(iterations) // 3
    if third == 0:
        return None
    first_iterations, last_iterations = iterations[:third], iterations[-third:]
    first = [value for i in first_iterations for value in values[i]]
    last = [value for i in last_iterations for value in values[i]]
    if not first or not last:
        return None
    difference, low, high = bootstrap_difference(last, first)
    return Trend(first_iterations, last_iterations, statistics.fmean(first), statistics.fmean(last), difference,
                 low, high, (len(first), len(last)))  # fmt: skip


TRENDS = {  # what `trends` measures, and how the report names it
    "frontier_share": "frontier share of valid worlds",
    "designer_reward": "designer reward",
    "regret": "regret of valid worlds",
    "hinted_mean": "hinted mean score of valid worlds",
    "unaided_mean": "unaided mean score of valid worlds",
}


def trends(designs: list[DesignOutcome]) -> dict[str, Trend | None]:
    """The trends the designer is judged by: the frontier share of its valid worlds, and its reward (over
    every reply it was paid for, so validity counts too); and, to read a rise in either, the valid worlds'
    regret and its two parts, the hinted and the unaided mean score (an agent that learns to follow hints
    raises the hinted mean on worlds no better designed: `benchmarks/studies/who_learned.py` tells the two apart)."""
    values: dict[str, dict[int, list[float]]] = {name: {} for name in TRENDS}
    for design in designs:
        if design.verdict is None:
            continue
        # an iteration with replies counts even when none of them was valid or paid
        of = {name: values[name].setdefault(design.iteration, []) for name in TRENDS}
        if scored(design):
            assert design.regret is not None and design.mean_plain is not None  # scored() says so
            of["frontier_share"].append(float(world_at_frontier(design)))
            of["regret"].append(design.regret)
            of["unaided_mean"].append(design.mean_plain)
            if design.mean_hinted is not None:
                of["hinted_mean"].append(design.mean_hinted)
        if design.reward is not None:
            of["designer_reward"].append(design.reward)
    return {name: trend(values[name]) for name in TRENDS}


def _mean(values: list[float]) -> float | None:
    return statistics.fmean(values) if values else None
