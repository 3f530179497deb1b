"""The bootstrap intervals the report prints, against cases whose answer can be worked out by hand."""

from __future__ import annotations

import pytest

from trainers.stats import bootstrap_mean, paired_lift


def test_equal_differences_have_a_point_interval() -> None:
    before = {f"t{i}": 0.0 for i in range(5)}
    after = {f"t{i}": 1.0 for i in range(5)}
    assert paired_lift(before, after) == (1.0, 1.0, 1.0)


def test_two_tasks_give_the_hand_computed_percentiles() -> None:
    # Differences {0, 1}: a resample of two has mean 0 (p 1/4), 0.5 (p 1/2) or 1 (p 1/4), so the 2.5% and
    # 97.5% percentiles of the resampled means are exactly 0 and 1, and the mean is 0.5.
    lift, low, high = paired_lift({"a": 0.0, "b": 0.0}, {"a": 0.0, "b": 1.0})
    assert (lift, low, high) == (0.5, 0.0, 1.0)


def test_the_interval_matches_the_normal_approximation_on_many_tasks() -> None:
    # 200 tasks, 60 gained a success, 20 lost one: mean 0.2, sd of the differences sqrt(0.4 - 0.04) = 0.6,
    # standard error 0.6 / sqrt(200) = 0.0424, so about 0.2 -/+ 0.083.
    before = {f"t{i}": 0.0 if i < 60 else (1.0 if i < 80 else 0.0) for i in range(200)}
    after = {f"t{i}": 1.0 if i < 60 else 0.0 for i in range(200)}
    lift, low, high = paired_lift(before, after)
    assert lift == pytest.approx(0.2)
    assert low == pytest.approx(0.2 - 1.96 * 0.0424, abs=0.01) and high == pytest.approx(0.2 + 1.96 * 0.0424, abs=0.01)
    assert paired_lift(before, after) == (lift, low, high), "a fixed seed: the same interval every time"


def test_only_tasks_measured_twice_count_and_none_is_an_error() -> None:
    assert paired_lift({"a": 0.0, "b": 0.0}, {"a": 1.0, "c": 0.0})[0] == 1.0
    with pytest.raises(ValueError, match="share no task"):
        paired_lift({"a": 0.0}, {"b": 1.0})
    with pytest.raises(ValueError, match="no values"):
        bootstrap_mean([])


def test_the_difference_of_two_samples_on_a_hand_computed_case() -> None:
    from trainers.stats import bootstrap_difference

    assert bootstrap_difference([3.0, 3.0], [1.0, 1.0, 1.0]) == (2.0, 2.0, 2.0), "no spread: no interval"
    difference, low, high = bootstrap_difference([0.0, 1.0], [0.0])
    assert difference == 0.5 and low == 0.0 and high == 1.0  # means of resampled pairs: 0, 0.5 or 1
    with pytest.raises(ValueError, match="both samples"):
        bootstrap_difference([], [1.0])
