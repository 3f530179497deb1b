"""A run's records as one Parquet table: one row per episode, token arrays as typed list columns.

JSONL is what the engine appends to (crash-safe, line by line); Parquet is what people load into pandas,
polars, DuckDB or `datasets` to analyse a run, and what a trainer can memory-map. Rows are written in
batches, so exporting a large run does not hold it in memory.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from engine.store import EPISODES_FILE, PLAN_FILE, StoreError, read_records
from engine.trajectory import EpisodeRecord

SCHEMA = pa.schema(
    [
        ("run", pa.string()),
        ("role", pa.string()),
        ("world", pa.string()),
        ("seed", pa.int64()),
        ("hinted", pa.bool_()),
        ("sample", pa.int32()),
        ("mode", pa.string()),
        ("model", pa.string()),
        ("status", pa.string()),
        ("cause", pa.string()),
        ("reward", pa.float64()),
        ("turns", pa.int32()),
        ("tool_calls", pa.int32()),
        ("malformed_turns", pa.int32()),
        ("duration_s", pa.float64()),
        ("messages", pa.string()),  # JSON: message shapes vary by server
        ("turn_timings", pa.string()),  # JSON list of per-turn records
        ("prompt_ids", pa.list_(pa.int32())),
        ("completion_ids", pa.list_(pa.int32())),
        ("loss_mask", pa.list_(pa.int8())),
        ("logprobs", pa.list_(pa.float32())),
        ("token_exact", pa.bool_()),
    ]
)


def _row(record: EpisodeRecord) -> dict[str, Any]:
    trace = record.tokens
    key = record.key
    return {
        "run": record.run,
        "role": key.role,
        "world": key.world,
        "seed": key.seed,
        "hinted": key.hinted,
        "sample": key.sample,
        "mode": record.mode,
        "model": record.model,
        "status": record.status,
        "cause": record.cause,
        "reward": record.reward,
        "turns": len(record.turns),
        "tool_calls": record.tool_calls,
        "malformed_turns": record.malformed_turns,
        "duration_s": record.duration_s,
        "messages": json.dumps(record.messages),
        "turn_timings": json.dumps([turn.model_dump(mode="json") for turn in record.turns]),
        "prompt_ids": trace.prompt_ids if trace else None,
        "completion_ids": trace.completion_ids if trace else None,
        "loss_mask": trace.loss_mask if trace else None,
        "logprobs": trace.logprobs if trace else None,
        "token_exact": trace.exact if trace else None,
    }


def export_parquet(run_dir: Path, path: Path, batch_size: int = 512) -> int:
    """Write every record of `run_dir` to `path`; returns the number of rows. The file appears only once
    every record was read and written (a run that cannot be read leaves an existing `path` as it was), and
    never in place of the run's own files."""
    target = path.resolve()
    if target.parent == run_dir.resolve() and target.name in (EPISODES_FILE, PLAN_FILE):
        raise StoreError(f"{path} is the run's own {target.name}: write the Parquet file elsewhere")
    if target.is_dir():
        raise StoreError(f"{path} is a directory: name a file")
    rows: list[dict[str, Any]] = []
    written = 0
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.partial")
    try:
        with pq.ParquetWriter(partial, SCHEMA) as writer:
            for record in read_records(run_dir):
                rows.append(_row(record))
                if len(rows) == batch_size:
                    writer.write_table(pa.Table.from_pylist(rows, schema=SCHEMA))
                    written += len(rows)
                    rows.clear()
            if rows or not written:
                writer.write_table(pa.Table.from_pylist(rows, schema=SCHEMA))
                written += len(rows)
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)
    return written
