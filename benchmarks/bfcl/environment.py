"""BFCL v4 multi-turn entries as engine conversations, so any endpoint (or the embedded model) can play them.

The official loop, mapped onto `engine.conversation`: the user's turns arrive one by one; a reply without
a call ends the model's turn (so does one that cannot be decoded, as in bfcl-eval); a miss_func turn
reveals the held-out functions with the fixed follow-up message; a turn is cut after its 21st step that
ran calls (bfcl-eval's count passing `MAX_STEPS`). Calls run on the entry's own backends and the play is
scored by the official checker (`BFCLBackends`).

Three ways to present the tools (`Style`):
- `chat`: bfcl-eval's FC protocol. The docs go as OpenAI `tools`, no system prompt is added, results come
  back as tool messages.
- `text`: bfcl-eval's prompting protocol. Its default system prompt lists the docs as JSON and asks for
  `[func(a=1)]`; nothing goes in `tools`. Replies are read by bfcl-eval's decoding rules (`prompting`, never
  by running them); a step's results come back as one user message listing `{"role": "tool", "name": call,
  "content": result}`, and held-out docs in the reveal message, as bfcl-eval writes both.
- `constrained`: spadework's own, for models that cannot call tools unaided. A JSON schema forces each
  reply into one call, so a `finish` call ends the turn. Not a BFCL protocol: not comparable.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Literal

import anyio

from benchmarks.bfcl.calls import CallRefused, call_source, openai_tools
from benchmarks.bfcl.data import Entry, bfcl_modules
from benchmarks.bfcl.episode import MAX_STEPS, REVEAL_MESSAGE, BFCLBackends, Outcome
from benchmarks.bfcl.prompting import PromptedCall, Undecodable, decode
from engine.conversation import Conversation, UserTurn
from engine.messages import Message, OpenAITool, messages_from
from engine.settings import Calls, Mode
from toolworlds.core import Finish, StepResult, Task, ToolCall
from toolworlds.episode import Grade

Style = Literal["chat", "text", "constrained"]
# The engine's mode for each style, and how it reads calls: `chat` as bfcl-eval's FC handlers do (only
# `tool_calls`, arguments a JSON object); `text` replies are read by the conversation (`reads_replies`).
ENGINE_MODES: dict[Style, tuple[Mode, Calls]] = {
    "chat": ("chat", "native"), "text": ("chat", "native"), "constrained": ("constrained", "lenient"),
}  # fmt: skip
WORLD = "bfcl-v4"
CONSTRAINED_RULES = (
    "You help the user by calling functions. Reply with one call at a time, as JSON. When you have done "
    "everything the user asked in this message, or cannot do more, call `finish` (with `answer` for the user)."
)


def prompting_system_prompt(docs: Sequence[dict[str, Any]]) -> str:
    """bfcl-eval's default prompting system prompt (`ret_fmt=python`, plaintext, classic style), built from
    the package's own templates: the function docs as indented JSON, calls as a Python list."""
    bfcl_modules()
    from bfcl_eval.constants import default_prompts as prompts

    style = prompts.PROMPT_STYLE_TEMPLATES["classic"]
    return str(
        prompts.PROMPT_TEMPLATE_MAPPING["plaintext"].format(
            persona=style["persona"],
            task=style["task"],
            tool_call_format=style["tool_call_no_tag"].format(
                output_format=prompts.OUTPUT_FORMAT_MAPPING["python"], param_types=prompts.PARAM_TYPE_MAPPING["python"]
            ),
            multiturn_behavior=style["multiturn_behavior"],
            available_tools=style["available_tools"].format(format="json", functions=json.dumps(docs, indent=4)),
        )
    )


class BFCLConversation(Conversation):
    """One entry per episode; the episode's seed is the entry's index in `entries`."""

    description = "BFCL v4 multi-turn"
    malformed_ends_turn = True
    max_calling_replies = MAX_STEPS

    def __init__(self, entries: Sequence[Entry], style: Style, scoring: anyio.CapacityLimiter) -> None:
        self.entries, self.style = entries, style
        self.name = WORLD
        self.finish_tool = style == "constrained"
        self.reads_replies = style == "text"  # bfcl-eval's prompting decoder reads the replies, not the engine's
        self.tools: list[OpenAITool] = []
        self.outcome: Outcome | None = None
        self._scoring = scoring
        self._backends: BFCLBackends | None = None

    @property
    def entry(self) -> Entry:
        return self._opened().entry

    def _opened(self) -> BFCLBackends:
        if self._backends is None:
            raise RuntimeError("call reset(seed) first")
        return self._backends

    async def reset(self, seed: int) -> Task:
        entry = self.entries[seed]
        self._backends = BFCLBackends(entry)
        self._turn = 0
        self._decoded: list[list[list[str]]] = [[]]
        self._documented = {doc["name"] for doc in entry.functions}
        self._documented |= {doc["name"] for docs in entry.missed.values() for doc in docs}
        self.tools = [] if self.style == "text" else openai_tools(entry.functions)
        first = entry.turns[0][0]["content"]
        return Task(instruction=first, hint="", world=self.name, seed=seed, max_steps=MAX_STEPS)

    def opening(self, task: Task, hinted: bool, mode: Mode) -> list[Message]:
        turn = messages_from(self.entry.turns[0], f"BFCL entry {self.entry.id}, turn 0")
        if self.style == "text":
            return [{"role": "system", "content": prompting_system_prompt(self.entry.functions)}, *turn]
        if self.style == "constrained":
            listing = json.dumps([tool["function"] for tool in self.tools], indent=1)
            return [{"role": "system", "content": f"{CONSTRAINED_RULES}\n\nThe functions:\n{listing}"}, *turn]
        return turn

    async def step(self, action: ToolCall | Finish) -> StepResult:
        if not isinstance(action, ToolCall):
            raise TypeError("a BFCL turn ends through respond(), not Finish")
        try:
            call = PromptedCall(call_source(action.name, action.arguments, self._documented))
        except CallRefused as refused:
            call = PromptedCall(action.name, refused=str(refused))
        (result,) = self._run_step([call])  # one step per call: the checker's verdict does not depend on grouping
        return StepResult(observation=result, reward=0.0, terminated=False, truncated=False)

    async def user_turn(self, reply: str) -> UserTurn | None:
        if self.style == "text":  # the prompting protocol: this reply's calls, if it has any, continue the turn
            try:
                calls = decode(reply, self._documented)
            except Undecodable:
                calls = []  # bfcl-eval ends the turn on a reply it cannot decode
            if calls:
                results = self._run_step(calls)
                listed = [{"role": "tool", "name": call.source, "content": result}
                          for call, result in zip(calls, results, strict=True)]  # fmt: skip
                return UserTurn(content=repr(listed), calls_run=len(calls))
        return self._next_turn()

    def _run_step(self, calls: list[PromptedCall]) -> list[str]:
        """One step's calls, run on the entry's backends as bfcl-eval's executor runs them (a call not run here
        gets the error it would raise there), and recorded for the checker; one result string per call."""
        self._decoded[-1].append([call.replayed for call in calls])
        results = iter(self._opened().execute([call.source for call in calls if call.refused is None]))
        return [call.failure if call.refused is not None else next(results) for call in calls]

    def _next_turn(self) -> UserTurn | None:
        """The user's next turn (revealing held-out functions on a miss_func turn), or None after the last."""
        entry = self.entry
        self._turn += 1
        if self._turn == len(entry.turns):
            return None
        self._decoded.append([])
        revealed = entry.missed.get(self._turn)
        if revealed is None:
            return UserTurn(content="\n\n".join(message["content"] for message in entry.turns[self._turn]))
        self._documented |= {doc["name"] for doc in revealed}
        if self.style == "text":
            bfcl_modules()
            from bfcl_eval.constants.default_prompts import DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_PROMPTING

            return UserTurn(content=DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_PROMPTING.format(functions=revealed))
        return UserTurn(content=REVEAL_MESSAGE, tools=openai_tools(revealed))

    async def grade(self) -> Grade:
        backends, decoded = self._opened(), self._decoded
        steps = sum(len(turn) for turn in decoded)
        async with self._scoring:
            self.outcome = await anyio.to_thread.run_sync(backends.score, decoded, steps)
        return Grade(score=float(self.outcome.valid), scorecard=self.outcome.reason or "valid")

    async def close(self) -> None:
        if self._backends is not None:
            self._backends.close()
