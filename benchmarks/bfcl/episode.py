"""One BFCL multi-turn entry played with the official loop semantics, and scored by the official checker.

The loop (`BaseHandler.inference_multi_turn_*` in bfcl-eval): the user's messages arrive turn by turn;
on a miss_func turn the held-out functions are revealed with the fixed follow-up message; within a turn
the model is asked again after every batch of tool results until it answers without a call; once a turn
has had more than `MAX_STEPS` steps that ran calls, the entry is force-quit (the later turns are never
played, so it fails, unless it was the last turn, which is scored as it stands).

bfcl-eval caches backend instances in a module dictionary keyed by model name and entry id, so each
episode uses a name of its own and removes its instances when it is scored.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from benchmarks.bfcl.data import Entry, bfcl_modules

MAX_STEPS = 20  # bfcl_eval.constants.default_prompts.MAXIMUM_STEP_LIMIT
REVEAL_MESSAGE = "I have updated some more functions you can choose from. What about now?"


@dataclass
class TurnView:
    """What a policy sees at one step: the conversation so far and the functions it may call."""

    entry: Entry
    turn: int
    step: int
    messages: list[dict[str, Any]]
    functions: list[dict[str, Any]]


Policy = Callable[[TurnView], list[str]]  # the calls to make now, as Python call source; [] ends the turn


@dataclass
class Outcome:
    """How one entry went: the calls per turn and step (what the checker reads), and its verdict."""

    id: str
    category: str
    valid: bool
    reason: str
    steps: int
    decoded: list[list[list[str]]] = field(default_factory=list)
    force_quit: bool = False


class BFCLBackends:
    """One entry's backend instances in bfcl-eval: run calls on them, score a play, then forget them.

    bfcl-eval caches instances in a module dictionary keyed by model name and entry id, so each play uses
    a name of its own and `close` removes what it (and its scoring) created."""

    def __init__(self, entry: Entry) -> None:
        self.entry = entry
        self.name = f"spadework_{uuid.uuid4().hex[:12]}"

    def execute(self, calls: list[str]) -> list[str]:
        """Run calls on this play's backends (the official executor); one result string per call."""
        from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils import execute_multi_turn_func_call

        entry = self.entry
        results, _ = execute_multi_turn_func_call(calls, entry.initial_config, entry.involved_classes, self.name,
                                                  entry.id, long_context=entry.long_context)  # fmt: skip
        return [str(result) for result in results]

    def score(self, decoded: list[list[list[str]]], steps: int) -> Outcome:
        """The official multi-turn checker: state and responses after every turn, against the ground truth.
        A play cut short (fewer turns than the entry has) fails as `multi_turn:force_terminated`."""
        from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import multi_turn_checker

        bfcl_modules()
        entry = self.entry
        if len(decoded) < len(entry.turns):
            return Outcome(entry.id, entry.category, False, "multi_turn:force_terminated", steps, decoded,
                           force_quit=True)  # fmt: skip
        verdict = multi_turn_checker(decoded, entry.ground_truth, entry.raw, f"multi_turn_{entry.category}",
                                     f"{self.name}_checker")  # fmt: skip
        reason = "" if verdict["valid"] else str(verdict.get("error_type") or verdict.get("error_message", ""))
        return Outcome(entry.id, entry.category, bool(verdict["valid"]), reason, steps, decoded)

    def close(self) -> None:
        """Drop every backend instance this play (and its scoring) created in bfcl-eval's module cache."""
        from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_utils

        prefix = re.sub(r"[-./:]", "_", self.name)
        cache = vars(multi_turn_utils)
        # Other plays' backends run in worker threads and add to this dict meanwhile: copy its keys in one step
        # (`tuple` of a dict is one C call under the GIL; a Python loop over it raised "changed size").
        for key in [key for key in tuple(cache) if key.startswith(prefix)]:
            cache.pop(key, None)


class BFCLEpisode:
    """An entry played by a `Policy` in this process: the harness's self-tests (no model, no engine)."""

    def __init__(self, entry: Entry) -> None:
        self.entry = entry
        self.backends = BFCLBackends(entry)

    def play(self, policy: Policy) -> Outcome:
        entry = self.entry
        messages: list[dict[str, Any]] = []
        functions = list(entry.functions)
        decoded: list[list[list[str]]] = []
        steps = 0
        try:
            for turn, user in enumerate(entry.turns):
                if turn in entry.missed:
                    functions += entry.missed[turn]
                    user = [{"role": "user", "content": REVEAL_MESSAGE}]
                messages += user
                turn_steps: list[list[str]] = []
                while len(turn_steps) <= MAX_STEPS:
                    calls = policy(TurnView(entry, turn, len(turn_steps), messages, functions))
                    steps += 1
                    if not calls:
                        break
                    turn_steps.append(calls)
                    messages += _call_messages(calls, self.backends.execute(calls))
                decoded.append(turn_steps)
                if len(turn_steps) > MAX_STEPS:  # force-quit: the later turns are not played
                    break
            return self.backends.score(decoded, steps)
        finally:
            self.backends.close()


def _call_messages(calls: list[str], results: list[str]) -> list[dict[str, Any]]:
    """The calls and their results as the official prompting loop records them: the calls as the model's
    text, the results as one user message listing `{"role": "tool", "name": call, "content": result}`."""
    listed = [{"role": "tool", "name": call, "content": result} for call, result in zip(calls, results, strict=True)]
    return [{"role": "assistant", "content": f"[{', '.join(calls)}]"}, {"role": "user", "content": repr(listed)}]


def ground_truth_policy(view: TurnView) -> list[str]:
    """Replays the answer: every call of the turn in the first step, then ends the turn (must score 100%)."""
    return list(view.entry.ground_truth[view.turn]) if view.step == 0 else []


def no_call_policy(view: TurnView) -> list[str]:
    """Never calls anything (must score 0%: every entry expects calls)."""
    return []


POLICIES: dict[str, Policy] = {"ground-truth": ground_truth_policy, "none": no_call_policy}
