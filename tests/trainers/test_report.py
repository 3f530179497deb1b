"""`spadework report` on runs that have little to show: the page still renders, and a directory that is
not a run is named as such. (A real run's report is rendered in `test_train_run.py`.)"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from tests.servers import SPADEWORK
from trainers.config import load_config
from trainers.report import PLOTS, read_run, summary, write_report


def test_a_run_killed_before_its_first_iteration_still_reports(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(load_config("cpu-tiny").model_dump_json())
    held = {"after_iteration": -1, "success_plain": {"banking": 0.0}, "success_hinted": {"banking": 0.5},
            "mean_plain": 0.0, "mean_hinted": 0.5, "seconds": 90.0}  # fmt: skip
    (tmp_path / "eval.jsonl").write_text(json.dumps(held) + "\n")
    page = write_report(read_run(tmp_path))
    assert page == tmp_path / "report" / "index.html"
    assert all((tmp_path / "report" / f"{name}.png").stat().st_size > 1000 for name in PLOTS)
    rows = dict(summary(read_run(tmp_path)))
    assert rows["iterations done"] == "0 of 2"
    assert rows["held-out success with hint"] == "50.0% (after -1) -> 50.0% (after -1)"


def test_a_directory_that_is_not_a_run_is_refused(tmp_path: Path) -> None:
    completed = subprocess.run([*SPADEWORK, "report", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert completed.returncode == 2 and "config.json is missing" in completed.stderr
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "train.jsonl").write_text('{"iteration": "zero"}\n')
    completed = subprocess.run([*SPADEWORK, "report", str(tmp_path)], capture_output=True, text=True, timeout=120,
                               env={**os.environ, "COLUMNS": "300"})  # fmt: skip
    assert completed.returncode == 2 and "train.jsonl: a record does not parse (iteration:" in completed.stderr
