"""The grounding measure on worlds whose answer is known: copied from their document, made up, or gamed."""

from __future__ import annotations

import json
from typing import Any

from toolworlds.examples import EXAMPLE_SPEC
from toolworlds.spec import Spec
from trainers.designer.grounding import Grounding, grounding

DOCUMENT = """Airports of Portugal. The airports of Portugal that have an IATA code, from airportsdata.

Fields: iata: the airport's three-letter IATA code; name: the airport's name; city: the city it serves;
elevation_ft: its elevation in feet.

iata | name | city | elevation_ft
LIS | Humberto Delgado Airport | Lisbon | 374
OPO | Francisco de Sa Carneiro Airport | Porto | 228
FAO | Faro Airport | Faro | 24
"""


def _airports(records: list[dict[str, Any]], tools: list[dict[str, Any]], table: str = "airports") -> Spec:
    fields = {"iata": {"type": "string"}, "city": {"type": "string"}, "elevation_ft": {"type": "integer"}}
    return Spec.model_validate({
        "spec_version": 1, "name": "airports", "description": "Airports.",
        "tables": [{"name": table, "key": "iata", "fields": fields, "records": records}],
        "tools": tools,
        "task": {"instruction": "Look up Faro.", "hint": "Use the lookup.", "plan": [{"tool": tools[0]["name"],
                 "arguments": {"iata": records[0]["iata"]}}]},
    })  # fmt: skip


LOOKUP = {"kind": "lookup", "name": "lookup_airport", "description": "An airport by code.", "table": "airports"}


def test_a_world_copied_from_its_document_is_wholly_grounded() -> None:
    records = [
        {"iata": "LIS", "city": "Lisbon", "elevation_ft": 374},
        {"iata": "FAO", "city": "faro", "elevation_ft": 24},
    ]
    measured = grounding(_airports(records, [LOOKUP]), DOCUMENT)
    # names: airports, iata, city, elevation_ft, lookup_airport; values: 4 texts, 2 numbers (case folded)
    assert measured == Grounding(names=5, names_found=5, values=6, values_found=6)
    assert measured.share == 1.0 and measured.grounded


def test_a_made_up_world_is_not() -> None:
    records = [{"iata": "B1", "city": "Emma", "elevation_ft": 375}, {"iata": "B2", "city": "Dune", "elevation_ft": 12}]
    tool = {**LOOKUP, "name": "fetch_thing"}
    measured = grounding(_airports(records, [tool], table="things"), DOCUMENT)
    # found: iata, city, elevation_ft (the fields alone); values: none (375 and 12 are not in it)
    assert measured == Grounding(names=5, names_found=3, values=6, values_found=0)
    assert not measured.grounded
    library = grounding(Spec.model_validate_json(EXAMPLE_SPEC), DOCUMENT)
    assert library.values_found == 0 and library.share < 0.2


def test_cheap_matches_do_not_count() -> None:
    """Operation words, fragments of words, flags and small counts say nothing about the document."""
    records = [{"iata": "IS", "city": "Lisb", "elevation_ft": 3}, {"iata": "Ai", "city": "port", "elevation_ft": 2}]
    tools = [{**LOOKUP, "name": "get_by_record"}, {"kind": "list", "name": "list_all", "description": "All.",
             "table": "airports"}]  # fmt: skip
    measured = grounding(_airports(records, tools), DOCUMENT)
    # found: airports, iata, city, elevation_ft; the tool names are operation words only; the small numbers
    # are not counted, and "IS", "Lisb", "Ai", "port" are parts of words of the document, not words of it
    assert measured == Grounding(names=6, names_found=4, values=4, values_found=0)


def test_the_share_of_an_empty_world() -> None:
    assert Grounding(names=0, names_found=0, values=0, values_found=0).share == 0.0
    spec = json.loads(EXAMPLE_SPEC)
    assert grounding(Spec.model_validate(spec), EXAMPLE_SPEC).share > 0.9  # the spec's own text grounds it
