"""ACEBench Agent tasks as engine conversations: the reference's dialogue loop, driven by the engine's samples.

The loop (`common_inference.multi_turn_inference` / `multi_step_inference`, see `prompts`): messages go
between user, agent and execution, each produced by whoever the last message was for; it ends when a message
from the third on says "finish conversation" or after 40 messages. The engine samples the agent; this
environment plays the other two (the apps through `AceBackends`, the user through a `benchmarks.parties.Party`).

Two protocols (`Protocol`):
- `prompt`, the benchmark's own: every step the agent gets one system prompt and one user prompt holding the
  API list and the whole history as text lines, and answers `[ApiName(key='v')]` or text. The environment
  reads every reply itself (`reads_replies`), so routing and the call syntax are the reference's. Comparable.
- `fc`: native tool calling. The docs go as OpenAI `tools`; each call runs as its own batch; text goes to the
  user (multi_turn) or gets the fixed "do not ask me" reply (multi_step). Not comparable to the leaderboard.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Literal

from benchmarks import schemas
from benchmarks.acebench.checker import check_end_state, process_accuracy
from benchmarks.acebench.data import AceTask
from benchmarks.acebench.executor import AceBackends, call_text
from benchmarks.acebench.prompts import (
    MAX_MESSAGES,
    Message,
    Role,
    agent_recipient,
    agent_system_prompt,
    agent_user_prompt,
    conversation_over,
    history_line,
    next_speaker,
    render_history,
    simulator_messages,
)
from benchmarks.parties import Party
from engine.conversation import Conversation, UserTurn
from engine.messages import Message as ChatMessage
from engine.messages import OpenAITool
from engine.settings import Mode
from toolworlds.core import Finish, StepResult, Task, ToolCall
from toolworlds.episode import Grade

Protocol = Literal["prompt", "fc"]
WORLD = "acebench"


class AceConversation(Conversation):
    """One task per episode; the episode's seed is the task's index in `tasks`."""

    description = "ACEBench Agent"

    def __init__(self, tasks: Sequence[AceTask], protocol: Protocol, simulator: Party | None,
                 max_messages: int = MAX_MESSAGES) -> None:  # fmt: skip
        self.tasks, self.protocol, self.simulator = tasks, protocol, simulator
        self.max_messages = max_messages  # the benchmark's is 40; fewer makes a run cheaper and not comparable
        self.name = WORLD
        self.reads_replies = protocol == "prompt"
        self.tools: list[OpenAITool] = []
        self.dialogue: list[Message] = []  # the reference's message history; [0] opens it
        self.executed: list[str] = []  # agent messages that went to execution, verbatim (process accuracy)
        self._task: AceTask | None = None
        self._backends: AceBackends | None = None
        self._seed = 0
        self._over = False

    @property
    def task(self) -> AceTask:
        if self._task is None:
            raise RuntimeError("call reset(seed) first")
        return self._task

    @property
    def backends(self) -> AceBackends:
        if self._backends is None:
            raise RuntimeError("call reset(seed) first")
        return self._backends

    async def reset(self, seed: int) -> Task:
        task = self._task = self.tasks[seed]
        self._seed = seed
        self._backends = AceBackends(task)
        self.dialogue, self.executed, self._over = [], [], False
        self.tools = schemas.openai_tools(task.functions) if self.protocol == "fc" else []
        if task.kind == "multi_turn":
            opening = await self._simulator().reply(seed, simulator_messages(task, []))
        else:
            opening = task.question
        self.dialogue.append(Message("user", "agent", opening))
        return Task(instruction=opening, hint="", world=self.name, seed=seed, max_steps=self.max_messages)

    def opening(self, task: Task, hinted: bool, mode: Mode) -> list[ChatMessage]:
        if self.protocol == "prompt":
            return self._prompt()
        return [
            # fc is spadework's own protocol: the task's language throughout (the reference's Chinese multi_step
            # prompt is a quirk of its prompt protocol, kept there only)
            {"role": "system", "content": agent_system_prompt(self.task, self.task.language)},
            {"role": "user", "content": task.instruction},
        ]

    def prompt(self, messages: list[ChatMessage]) -> list[ChatMessage]:
        return self._prompt() if self.protocol == "prompt" else messages

    def _prompt(self) -> list[ChatMessage]:
        """The reference agent's request: its system prompt, then the API list and the history as one message."""
        task = self.task
        history = render_history(task.kind, self.dialogue)
        return [{"role": "system", "content": agent_system_prompt(task)},
                {"role": "user", "content": agent_user_prompt(task, history)}]  # fmt: skip

    async def step(self, action: ToolCall | Finish) -> StepResult:
        """fc: one native call, run as a batch of one, recorded as the reference records a call message."""
        if not isinstance(action, ToolCall):
            raise TypeError("an ACEBench turn ends through respond(), not Finish")
        text = call_text(action.name, dict(action.arguments))
        self._add(Message("agent", "execution", text))
        self.executed.append(text)
        shown = self.backends.execution_message(self.backends.execute([(action.name, dict(action.arguments))]))
        self._add(Message("execution", "agent", shown))
        observation = shown[0] if len(shown) == 1 else shown  # JSON already: decoded results, or their text
        return StepResult(observation=observation, reward=0.0, terminated=False, truncated=False)

    async def user_turn(self, reply: str) -> UserTurn | None:
        """The agent said `reply`: route it, let execution and the user answer, until it is the agent's turn."""
        if self._over:
            return None
        kind = self.task.kind
        recipient: Role
        if self.protocol == "prompt":
            recipient = agent_recipient(kind, reply)
        else:  # fc: calls came natively, so this is text: to the user, or (multi_step) to the fixed reply
            recipient = "execution" if kind == "multi_step" else "user"
        start = len(self.dialogue)
        self._add(Message("agent", recipient, reply))
        while not self._over:
            speaker = next_speaker(kind, len(self.dialogue) - 1, self.dialogue[-1])
            if speaker == "agent":
                return UserTurn(content=self._said(self.dialogue[start + 1 :]))
            if speaker == "execution":
                said = self.dialogue[-1].content
                self.executed.append(said)
                self._add(Message("execution", "agent", self.backends.respond(said)))
            else:
                chat = simulator_messages(self.task, self.dialogue)
                self._add(Message("user", "agent", await self._simulator().reply(self._seed, chat)))
        return None

    def _said(self, messages: Sequence[Message]) -> str:
        """What the agent is told back. `prompt`: the new history lines (a record only: the model is shown the
        re-rendered prompt); `fc`: the messages themselves, which is what the model reads."""
        if self.protocol == "prompt":
            return "".join(history_line(self.task.kind, message) for message in messages)
        return "\n\n".join(str(message.content) for message in messages)

    def _add(self, message: Message) -> None:
        """Append a message the loop produced; it ends the dialogue if it says the stop phrase or is the last one
        allowed (the 40th)."""
        self.dialogue.append(message)
        index = len(self.dialogue) - 2  # the loop's index: the opening message is not one it produced
        if conversation_over(index, message.content) or index + 1 >= self.max_messages:
            self._over = True

    def _simulator(self) -> Party:
        if self.simulator is None:
            raise RuntimeError("multi_turn tasks need a user simulator")
        return self.simulator

    async def grade(self) -> Grade:
        task, state = self.task, self.backends.state()
        verdict = check_end_state(state, task.ground_truth)
        process = process_accuracy(self.executed, task.milestones, verdict.ok)
        card = {
            "end_state": verdict.ok,
            "process": process,
            "messages": len(self.dialogue),
            "errors": verdict.errors[:5],
        }
        return Grade(score=float(verdict.ok), scorecard=json.dumps(card, ensure_ascii=False))

    async def close(self) -> None:
        self._backends = None
