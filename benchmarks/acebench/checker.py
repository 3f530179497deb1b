"""ACEBench Agent scoring: end-state accuracy, process accuracy and the "agent" score, as `eval_main.agent_eval`,
`agent_eval_process` and `model_eval.checker.agent_checker` compute them.

End state (lenient, with the reference's quirks): the number of classes must match the ground truth's; each
ground-truth class is checked against the state's class of the same name, where every attribute of the state
must appear in the ground truth and equal it, except that for a dict attribute only the ground truth's keys are
compared (extra keys in the state pass); lists and scalars must be equal. A ground-truth class with no state
class of that name is not checked at all: it takes the verdict of the class before it (a pass when it comes
first). That matters because four answers misspell a class (`BaseAPI`, `Reminderpi`, `ReminderAPI`).

Process: the fraction of a milestone path found in order among the agent's executed messages, compared as
stripped strings; the search is greedy and a milestone that is not found ends it, so the score is the found
prefix. Best alternative path counts; a task whose end state is correct scores 1.0.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from benchmarks.acebench.data import KINDS, AceTask, Kind, Language


@dataclass(frozen=True)
class Verdict:
    """Whether an end state passes, and why not."""

    ok: bool
    errors: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class TaskScore:
    id: str
    language: Language
    kind: Kind
    end_state_ok: bool
    process: float


@dataclass(frozen=True)
class SplitScore:
    """One (language, kind): its end-state and process accuracies, rounded to 3 places as the reference reports."""

    language: Language
    kind: Kind
    correct: int
    total: int
    end_state: float
    process: float


@dataclass(frozen=True)
class AceScore:
    splits: list[SplitScore]
    agent: dict[str, float]  # language -> mean of its multi_turn and multi_step end-state accuracies

    def split(self, language: Language, kind: Kind) -> SplitScore:
        return next(score for score in self.splits if (score.language, score.kind) == (language, kind))


def check_end_state(state: Mapping[str, Mapping[str, Any]], ground_truth: Sequence[Mapping[str, Any]]) -> Verdict:
    """`state` as `AceBackends.state()` gives it ({class: {attribute: value}}); `ground_truth` as the answer file."""
    model = [{name: attributes} for name, attributes in state.items()]
    if len(model) != len(ground_truth):
        return Verdict(False, [f"wrong number of classes: {len(model)} in the state, {len(ground_truth)} expected"])
    verdict, errors = Verdict(True), []
    for expected in ground_truth:
        matched = next((entry for entry in model if set(entry) == set(expected)), None)
        if matched:
            verdict = _check_class(matched, expected)
        if not verdict.ok:
            errors.extend(verdict.errors)
    return Verdict(not errors, errors)


def end_state_correct(state: Mapping[str, Mapping[str, Any]], ground_truth: Sequence[Mapping[str, Any]]) -> bool:
    return check_end_state(state, ground_truth).ok


def _check_class(model: Mapping[str, Any], expected: Mapping[str, Any]) -> Verdict:
    name = next(iter(expected))
    wanted: Mapping[str, Any] = next(iter(expected.values()))
    actual: Mapping[str, Any] = next(iter(model.values()))
    errors = []
    for attribute, value in actual.items():
        if attribute not in wanted:
            errors.append(f"{name}.{attribute} is not in the ground truth")
            continue
        target = wanted[attribute]
        if isinstance(target, dict):
            if not isinstance(value, dict):  # the reference would test membership on it (or crash)
                errors.append(f"{name}.{attribute}: expected a dict, got {value!r}")
                continue
            for key, item in target.items():
                if key not in value:
                    errors.append(f"{name}.{attribute}[{key!r}] is missing (expected {item!r})")
                elif item != value[key]:
                    errors.append(f"{name}.{attribute}[{key!r}]: expected {item!r}, got {value[key]!r}")
        elif target != value:
            errors.append(f"{name}.{attribute}: expected {target!r}, got {value!r}")
    return Verdict(not errors, errors)


def process_accuracy(executed: Sequence[str], milestones: Sequence[Sequence[str]], end_state_ok: bool) -> float:
    """`executed`: the agent messages that went to execution, verbatim, in order. With alternative paths the best
    score rounded to 3 places counts (the reference rounds there, and not for a single path)."""
    if end_state_ok:
        return 1.0
    scores = [_path_score(executed, path) for path in milestones]
    if len(scores) == 1:
        return scores[0]
    return max(round(score, 3) for score in scores)


def _path_score(executed: Sequence[str], path: Sequence[str]) -> float:
    if not path:
        return 1.0
    position, found = 0, 0
    for stone in path:
        wanted = stone.strip()
        while position < len(executed) and executed[position].strip() != wanted:
            position += 1
        if position == len(executed):
            break
        found += 1
        position += 1
    return found / len(path)


def score_task(task: AceTask, state: Mapping[str, Mapping[str, Any]], executed: Sequence[str]) -> TaskScore:
    ok = end_state_correct(state, task.ground_truth)
    return TaskScore(task.id, task.language, task.kind, ok, process_accuracy(executed, task.milestones, ok))


def agent_score(scores: Iterable[TaskScore]) -> AceScore:
    """Per (language, kind) accuracies, and per language the agent score: the unweighted mean of the multi_turn
    and multi_step end-state accuracies, rounded to 3 places (a language is only scored when it has both)."""
    groups: dict[tuple[Language, Kind], list[TaskScore]] = {}
    for score in scores:
        groups.setdefault((score.language, score.kind), []).append(score)
    splits = []
    for (language, kind), members in groups.items():
        correct = sum(member.end_state_ok for member in members)
        process = sum(member.process for member in members) / len(members)
        splits.append(
            SplitScore(language, kind, correct, len(members), round(correct / len(members), 3), round(process, 3))
        )
    agent: dict[str, float] = {}
    for language in dict.fromkeys(split.language for split in splits):
        accuracies = {split.kind: split.end_state for split in splits if split.language == language}
        if set(accuracies) == set(KINDS):
            agent[language] = round(sum(accuracies.values()) / len(accuracies), 3)
    return AceScore(splits, agent)
