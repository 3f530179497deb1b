"""Which reference tasks the agent trains on: task families whose plays disagree.

A GRPO group whose plays all score the same teaches nothing, and on the embedded model that is most
groups: measured on the `reference-lite` suite (`benchmarks/studies/grpo_sweep.py`, 384 training plays), 83-93%
of groups had no reward spread, because success is a property of the task's family (the tools its
reference plan calls): 30% on "cancel an order", 8% on "freeze an account", 0% on most others.

`FrontierTasks` chooses each task by Thompson sampling over families: a family's chance of yielding a
group with spread has a Beta belief (`PRIOR` plus the spread and flat groups the run has played of it);
each pick draws from every candidate family's belief and takes the best, and knows the plays of the
tasks picked before it. Families never played keep the prior, so they are tried now and then; families
the agent always fails, or has mastered, fade. The counts
come from the run's own training plays (never held-out ones), read back from its directory, so a
resumed run picks what the unbroken one would have.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass

from engine.trajectory import EpisodeRecord
from trainers.suite import Suite, plan_tools

Family = tuple[str, tuple[str, ...]]  # world, the tools its reference plan calls in order
CANDIDATES_PER_WORLD = 64  # seeds drawn per world and pick: every family of the suite shows up among them
# Beta(spread, flat) before a family is played: worth about 4 groups, expecting ~6% of them to spread. Most
# families never spread on the embedded model, so an untried family must not look better than one that
# did: simulated on the sweep's plays (`grpo_sweep.py task-choice`), a uniform prior found no more groups
# with spread than rotating through the worlds (4.1 vs 4.0 of 30 per run), this one 7.2.
PRIOR = (0.25, 4.0)


def family_of(world: str, seed: int) -> Family:
    return world, plan_tools(world, seed)


@dataclass
class Tally:
    """Groups of one family played so far, and how many of them had reward spread."""

    groups: int = 0
    spread: int = 0


def tally_groups(records: Iterable[EpisodeRecord]) -> dict[Family, Tally]:
    """Per family, the groups (one task, one hint condition) among `records` and those with spread."""
    rewards: dict[tuple[str, int, bool], set[float]] = {}
    for record in records:
        if record.reward is not None:
            rewards.setdefault((record.key.world, record.key.seed, record.key.hinted), set()).add(record.reward)
    tallies: dict[Family, Tally] = {}
    for (world, seed, _), seen in rewards.items():
        tally = tallies.setdefault(family_of(world, seed), Tally())
        tally.groups += 1
        tally.spread += len(seen) > 1
    return tallies


class FrontierTasks:
    """Picks training tasks of `suite` from the families most likely to give groups with spread."""

    def __init__(self, suite: Suite, worlds: list[str], tallies: dict[Family, Tally]) -> None:
        self.suite = suite
        self.worlds = worlds
        self.tallies = tallies

    def pick(self, rng: random.Random) -> tuple[str, int]:
        """One task (world, training seed); the same for the same `rng` state and tallies."""
        candidates: dict[Family, int] = {}
        for world in self.worlds:
            for _ in range(CANDIDATES_PER_WORLD):
                seed = self.suite.training_seed(world, rng)
                candidates.setdefault(family_of(world, seed), seed)
        best = choose(sorted(candidates), self.tallies, rng)
        return best[0], candidates[best]


def choose(families: list[Family], tallies: dict[Family, Tally], rng: random.Random,
           prior: tuple[float, float] = PRIOR) -> Family:  # fmt: skip
    """Thompson sampling: one draw from each family's Beta belief about its groups' spread, the best wins."""
    draws = {}
    for family in families:
        tally = tallies.get(family, Tally())
        draws[family] = rng.betavariate(prior[0] + tally.spread, prior[1] + tally.groups - tally.spread)
    return max(families, key=lambda family: draws[family])
