"""What a run's designs say about self-play: the frontier, the designer's learning signal, grounding.

The lift of the agent says nothing about the designer. These do: how many valid worlds sit at the agent's
frontier (it neither always nor never solves them unaided, or the hint helps), the mean regret of valid
worlds with its interval, how many of the designer's GRPO groups (one document's G designs) pay their
valid designs different rewards (without that, the designer learns only to be valid), and how many
valid worlds come from their document (`grounding`).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from trainers.designer.grounding import GROUNDED_SHARE
from trainers.designer.loop import DesignOutcome
from trainers.stats import bootstrap_mean


def at_frontier(mean_plain: float, regret: float) -> bool:
    """Unaided mean score strictly between 0 and 1, or a hint that helps."""
    return 0.0 < mean_plain < 1.0 or regret > 0


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


def designer_summary(designs: list[DesignOutcome]) -> dict[str, Any]:
    """The designer's block of `summary.json`: validity, frontier share, regret (95% CI), group spread, grounding."""
    replies = [d for d in designs if d.verdict is not None]
    valid = played(designs)
    regrets = [d.regret for d in valid if d.regret is not None]
    spread, groups = groups_with_valid_spread(designs)
    groundings = [d.grounding for d in valid if d.grounding is not None]
    summary: dict[str, Any] = {
        "replies": len(replies),
        "valid": len(valid),
        "frontier": sum(at_frontier(d.mean_plain or 0.0, d.regret or 0.0) for d in valid),
        "regret_mean": None,
        "regret_ci95": None,
        "groups": groups,
        "groups_with_valid_spread": spread,
        "grounded": sum(share >= GROUNDED_SHARE for share in groundings),
        "grounding_mean": round(sum(groundings) / len(groundings), 4) if groundings else None,
    }
    if regrets:
        mean, low, high = bootstrap_mean(regrets)
        summary["regret_mean"], summary["regret_ci95"] = round(mean, 4), [round(low, 4), round(high, 4)]
    return summary
