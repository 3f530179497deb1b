"""Read back what a run wrote to each tracker, through each tracker's own files and libraries."""

from __future__ import annotations

import json
import struct
from pathlib import Path

Points = dict[str, dict[int, float]]  # metric name -> step -> value


def tensorboard_points(directory: Path) -> Points:
    """Every scalar in the event files under `directory` (TensorBoard's own reader)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    points: Points = {}
    for events in sorted(directory.glob("events.out.tfevents.*")):
        accumulator = EventAccumulator(str(events))
        accumulator.Reload()
        for tag in accumulator.Tags()["scalars"]:
            points.setdefault(tag, {}).update({event.step: event.value for event in accumulator.Scalars(tag)})
    return points


def trackio_points(project: str, run: str) -> Points:
    """Every logged number of `run` in Trackio's local store (TRACKIO_DIR), through Trackio's storage API."""
    from trackio.sqlite_storage import SQLiteStorage

    points: Points = {}
    for entry in SQLiteStorage.get_logs(project, run):
        for name, value in entry.items():
            if name not in ("step", "timestamp") and isinstance(value, int | float):
                points.setdefault(name, {})[entry["step"]] = float(value)
    return points


def wandb_points(directory: Path) -> Points:
    """Every history row in the offline runs under `directory`: W&B's transaction log (LevelDB-log blocks of
    protobuf `Record`s, as `wandb sync` reads them), parsed with W&B's own protobuf classes."""
    from wandb.proto import wandb_internal_pb2

    points: Points = {}
    for log in sorted(directory.glob("wandb/*run-*/run-*.wandb")):
        data, position, pending = log.read_bytes(), 7, b""  # 7: the file's own header
        while position + 7 <= len(data):
            if 32768 - position % 32768 < 7:  # a block's tail too short for a header is padding
                position += 32768 - position % 32768
                continue
            _, length, kind = struct.unpack("<IHB", data[position : position + 7])
            if (length, kind) == (0, 0):
                break
            pending += data[position + 7 : position + 7 + length]
            position += 7 + length
            if kind in (1, 4):  # a whole record, or a record's last part
                record = wandb_internal_pb2.Record()
                record.ParseFromString(pending)
                pending = b""
                if record.WhichOneof("record_type") == "history":
                    for item in record.history.item:
                        name = item.key or "/".join(item.nested_key)
                        value = json.loads(item.value_json)
                        if not name.startswith("_") and isinstance(value, int | float):
                            points.setdefault(name, {})[record.history.step.num] = float(value)
    return points
