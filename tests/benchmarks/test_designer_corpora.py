"""The designer comparison's arms and its plan rows (`benchmarks/studies/designer_corpora.py`)."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.studies.designer_corpora import arm_directory, arm_label, plan_rows
from tests.trainers.test_spec_stages import LIBRARY_STAGES
from trainers.designer.generate import DesignSample
from trainers.designer.loop import DesignOutcome


def outcome(plan: list[dict[str, object]], mean_plain: float, regret: float) -> DesignOutcome:
    spec = json.loads("".join(LIBRARY_STAGES))
    spec["task"]["plan"] = plan
    sample = DesignSample(key="designer/0/0/0", document="d", prompt_version="v", messages=[], reply=json.dumps(spec))
    return DesignOutcome(iteration=0, sample=sample, mean_plain=mean_plain, regret=regret)


def test_arms_name_only_what_differs_from_the_defaults() -> None:
    out = Path("runs/x")
    assert arm_directory(out, "tables", "written", "any", 3) == out / "tables"  # where earlier runs were written
    assert arm_directory(out, "tables", "derived", "any", 3) == out / "tables-derived"
    assert arm_directory(out, "tables", "written", "change", 1) == out / "tables-change-calls1"
    assert arm_label("python-docs", "written", "change", 3) == "python-docs, change"
    assert arm_directory(out, "tables", "written", "any", 3, "document") == out / "tables-document"
    assert arm_directory(out, "tables", "derived", "any", 1, "document", "derived") == (
        out / "tables-derived-calls1-document-tools"
    )
    assert arm_label("tables", "written", "any", 3, "free", "derived") == "tables, tools"
    assert arm_directory(out, "tables", "derived", "any", 1, "document", "written", "listed") == (
        out / "tables-derived-calls1-document-keys"
    )


def test_plan_rows_count_changing_and_reading_plans_and_their_frontier() -> None:
    search = {"tool": "search", "arguments": {"title": "Dune"}}
    borrow = {"tool": "borrow", "arguments": {"book_id": "B2"}}
    designs = [
        outcome([search, borrow], mean_plain=0.5, regret=0.0),  # changes, at the frontier
        outcome([borrow], mean_plain=0.0, regret=0.0),  # changes, never solved
        outcome([search], mean_plain=0.0, regret=0.25),  # reads only, the hint helped
    ]
    rows = plan_rows(designs)
    assert rows["valid plans that change / read only (at the frontier)"] == "2 (1) / 1 (1)"
    assert rows["calls per valid plan, mean"] == "1.33"
    assert plan_rows([])["calls per valid plan, mean"] == "-"
