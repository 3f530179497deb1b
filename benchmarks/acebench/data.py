"""ACEBench Agent tasks and their answers, read from the benchmark's JSONL files.

A data folder is laid out like `data_all/` of github.com/chenchen0103/ACEBench: `data_en/` and `data_zh/`, each
with `data_agent_multi_turn.json`, `data_agent_multi_step.json` and the same two names under `possible_answer/`.
The vendored copy (`benchmarks/acebench/data/`) is the default, so a clean clone needs nothing else.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, cast

Language = Literal["en", "zh"]
Kind = Literal["multi_turn", "multi_step"]

LANGUAGES: tuple[Language, ...] = ("en", "zh")
KINDS: tuple[Kind, ...] = ("multi_turn", "multi_step")
VENDORED = Path(__file__).resolve().parent / "data"
UPSTREAM = "github.com/chenchen0103/ACEBench, folder data_all/"
TASK_FIELDS = ("id", "question", "initial_config", "function", "involved_classes")
ANSWER_FIELDS = ("id", "ground_truth", "mile_stone")


class DataError(ValueError):
    """The data folder is not an ACEBench data folder; the message names the folder, file, line or id at fault."""


@dataclass(frozen=True)
class AceTask:
    """One Agent task: what the user wants, the apps' start, the API docs, and the answer it is scored against."""

    id: str
    language: Language
    kind: Kind
    question: str  # multi_turn: the user simulator's instruction; multi_step: the task given to the agent
    initial_config: dict[str, Any]
    functions: list[dict[str, Any]]  # the API docs shown to the agent, as the file holds them
    involved_classes: list[str]
    ground_truth: list[dict[str, Any]]  # [{class name: {attribute: value}}], names as the answer file spells them
    milestones: list[list[str]]  # alternative call paths; a single path is a one-element list

    @property
    def key(self) -> str:
        """`en/agent_multi_turn_0`: ids repeat across languages, so this is what tells tasks apart."""
        return f"{self.language}/{self.id}"


def task_file(data_dir: Path, language: Language, kind: Kind) -> Path:
    return data_dir / f"data_{language}" / f"data_agent_{kind}.json"


def answer_file(data_dir: Path, language: Language, kind: Kind) -> Path:
    return data_dir / f"data_{language}" / "possible_answer" / f"data_agent_{kind}.json"


def load_tasks(
    data_dir: Path | None = None,
    languages: tuple[Language, ...] | list[Language] = LANGUAGES,
    kinds: tuple[Kind, ...] | list[Kind] = KINDS,
) -> list[AceTask]:
    """Every task of the chosen languages and kinds, in file order (en before zh, multi_turn before multi_step)."""
    root = VENDORED if data_dir is None else Path(data_dir)
    unknown = [value for value in (*languages, *kinds) if value not in (*LANGUAGES, *KINDS)]
    if unknown:
        raise DataError(f"unknown language or kind {', '.join(map(str, unknown))}: choose from {LANGUAGES} and {KINDS}")
    if not root.is_dir():
        raise DataError(f"ACEBench data folder {root} does not exist: it must hold data_en/ and data_zh/ ({UPSTREAM})")
    tasks: list[AceTask] = []
    for language in languages:
        for kind in kinds:
            tasks.extend(_load_split(root, language, kind))
    return tasks


def _load_split(root: Path, language: Language, kind: Kind) -> list[AceTask]:
    entries_path, answers_path = task_file(root, language, kind), answer_file(root, language, kind)
    entries = _read_jsonl(entries_path, TASK_FIELDS, root)
    answers = {answer["id"]: answer for answer in _read_jsonl(answers_path, ANSWER_FIELDS, root)}
    ids = [entry["id"] for entry in entries]
    orphans = [answer_id for answer_id in answers if answer_id not in set(ids)]
    if orphans:
        raise DataError(f"{answers_path}: answer id {orphans[0]!r} has no task in {entries_path}")
    unanswered = [task_id for task_id in ids if task_id not in answers]
    if unanswered:
        raise DataError(f"{entries_path}: task id {unanswered[0]!r} has no answer in {answers_path}")
    return [_task(entry, answers[entry["id"]], language, kind) for entry in entries]


def _task(entry: dict[str, Any], answer: dict[str, Any], language: Language, kind: Kind) -> AceTask:
    functions = entry["function"]
    ground_truth = answer["ground_truth"]
    return AceTask(
        id=entry["id"],
        language=language,
        kind=kind,
        question=entry["question"],
        initial_config=entry["initial_config"],
        functions=functions if isinstance(functions, list) else [functions],  # the reference wraps a lone doc
        involved_classes=list(entry["involved_classes"]),
        ground_truth=ground_truth if isinstance(ground_truth, list) else [ground_truth],  # agent_eval does too
        milestones=normalise_milestones(answer["mile_stone"]),
    )


def normalise_milestones(raw: Any) -> list[list[str]]:
    """`["[a()]", "[b()]"]` and `[["[a()]"], ["[b()]"]]` (alternatives) both as a list of alternative paths."""
    if not isinstance(raw, list):
        raise DataError(f"mile_stone must be a list of call strings or of lists of them, not {type(raw).__name__}")
    if raw and all(isinstance(path, list) for path in raw):
        return [[str(stone) for stone in path] for path in raw]
    return [[str(stone) for stone in raw]]


def _read_jsonl(path: Path, fields: tuple[str, ...], root: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        raise DataError(
            f"{path} is missing: an ACEBench data folder ({root}) holds data_{{en,zh}}/data_agent_{{multi_turn,"
            f"multi_step}}.json and the same names under data_{{en,zh}}/possible_answer/; get them from {UPSTREAM}"
        )
    entries = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except json.JSONDecodeError as error:
            raise DataError(f"{path}, line {number}: not JSON ({error.msg} at column {error.colno})") from None
        if not isinstance(entry, dict):
            raise DataError(f"{path}, line {number}: an entry must be a JSON object, not {type(entry).__name__}")
        missing = [field for field in fields if field not in entry]
        if missing:
            name = entry.get("id", "without an id")
            raise DataError(f"{path}, line {number}: entry {name} has no field {missing[0]!r}")
        entries.append(cast(dict[str, Any], entry))
    return entries
