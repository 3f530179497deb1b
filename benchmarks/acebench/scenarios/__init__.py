"""The apps an ACEBench Agent task runs against, one class per reference scenario class, en and zh.

The reference keeps four copies of each class (multi_turn/multi_step x en/zh). The multi_turn and multi_step
copies differ only in comments, so there is one class here; en and zh differ in their data and texts (carried
as data in `data/scenarios.json`) and in three behaviours, which each class documents and keys on its language.
"""

from __future__ import annotations

from benchmarks.acebench.scenarios.base import BaseApi
from benchmarks.acebench.scenarios.food import FoodPlatform
from benchmarks.acebench.scenarios.message import MessageApi
from benchmarks.acebench.scenarios.reminder import ReminderApi
from benchmarks.acebench.scenarios.travel import Travel

Scenario = BaseApi | Travel

SCENARIO_CLASSES: dict[str, type[BaseApi] | type[Travel]] = {
    "BaseApi": BaseApi,
    "MessageApi": MessageApi,
    "ReminderApi": ReminderApi,
    "FoodPlatform": FoodPlatform,
    "Travel": Travel,
}

# The attributes dumped as an app's end state (the reference's SAVED_CLASS).
SAVED_ATTRIBUTES: dict[str, tuple[str, ...]] = {
    "BaseApi": ("wifi", "logged_in"),
    "MessageApi": ("inbox",),
    "ReminderApi": ("reminder_list",),
    "FoodPlatform": ("users", "logged_in_users", "orders"),
    "Travel": ("users", "reservations"),
}

__all__ = [
    "SAVED_ATTRIBUTES",
    "SCENARIO_CLASSES",
    "BaseApi",
    "FoodPlatform",
    "MessageApi",
    "ReminderApi",
    "Scenario",
    "Travel",
]
