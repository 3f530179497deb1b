"""Names and words the reference worlds draw from, so their people and things read as real."""

from __future__ import annotations

import random

FIRST_NAMES = (
    "Ada", "Bilal", "Chen", "Dana", "Emeka", "Farah", "Goran", "Hana", "Ines", "Jonas", "Kemi", "Luis",
    "Maya", "Nikhil", "Olga", "Priya", "Quinn", "Rosa", "Sami", "Tara", "Umar", "Vera", "Wen", "Yusuf",
)  # fmt: skip
LAST_NAMES = (
    "Okafor", "Lindqvist", "Ortiz", "Nakamura", "Haddad", "Kowalski", "Mensah", "Rossi", "Dubois", "Park",
    "Silva", "Novak", "Brennan", "Iyer", "Schmidt", "Abara",
)  # fmt: skip
MERCHANTS = (
    "Corner Grocer", "CityRail", "Bright Pharmacy", "Peak Fitness", "Nimbus Streaming", "Harbor Fuel",
    "Lumen Electronics", "Olive Bistro", "Atlas Hotels", "Quick Parcel",
)  # fmt: skip
BILLERS = ("City Water", "Metro Power", "FiberNet", "Greenleaf Insurance", "Northside Gas", "Civic Phone")


def person_names(rng: random.Random, count: int) -> list[str]:
    """`count` distinct full names; surnames repeat on purpose so lookups must use the full name."""
    names: set[str] = set()
    while len(names) < count:
        names.add(f"{rng.choice(FIRST_NAMES)} {rng.choice(LAST_NAMES[: max(4, count // 2)])}")
    return sorted(names)


def email_for(name: str, domain: str = "example.com") -> str:
    return f"{name.lower().replace(' ', '.')}@{domain}"


def money(rng: random.Random, low: float, high: float) -> float:
    """An amount in dollars with cents."""
    return round(rng.uniform(low, high), 2)
