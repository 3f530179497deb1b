"""Confidence intervals for held-out measurements: percentile bootstraps over tasks.

Tasks are the unit that is resampled: a task's plays are not independent of each other (same state, same
instruction), and a lift compares the same tasks before and after, so the paired difference per task is
what varies. Resampling uses a fixed seed, so a report computed twice prints the same interval.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

RESAMPLES = 10_000


def bootstrap_mean(values: Sequence[float], resamples: int = RESAMPLES, seed: int = 0) -> tuple[float, float, float]:
    """The mean of `values` and a 95% percentile-bootstrap interval for it: (mean, low, high)."""
    if not values:
        raise ValueError("no values to bootstrap")
    data = np.asarray(values, dtype=float)
    rng = np.random.default_rng(seed)
    means = data[rng.integers(0, len(data), size=(resamples, len(data)))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return float(data.mean()), float(low), float(high)


def bootstrap_difference(
    first: Sequence[float], second: Sequence[float], resamples: int = RESAMPLES, seed: int = 0
) -> tuple[float, float, float]:
    """mean(first) - mean(second) for two independent samples, each resampled on its own, with a 95%
    percentile-bootstrap interval: (difference, low, high)."""
    if not first or not second:
        raise ValueError("both samples need values")
    rng = np.random.default_rng(seed)
    differences = np.zeros(resamples)
    for data, sign in ((np.asarray(first, dtype=float), 1.0), (np.asarray(second, dtype=float), -1.0)):
        differences += sign * data[rng.integers(0, len(data), size=(resamples, len(data)))].mean(axis=1)
    low, high = np.percentile(differences, [2.5, 97.5])
    return float(np.mean(first) - np.mean(second)), float(low), float(high)


def paired_lift(
    before: Mapping[str, float], after: Mapping[str, float], resamples: int = RESAMPLES, seed: int = 0
) -> tuple[float, float, float]:
    """Mean of after - before over the tasks measured both times, with a 95% paired-bootstrap interval:
    (lift, low, high). Tasks measured only once are left out; none in common is an error."""
    common = sorted(set(before) & set(after))
    if not common:
        raise ValueError("the two measurements share no task")
    return bootstrap_mean([after[task] - before[task] for task in common], resamples, seed)
