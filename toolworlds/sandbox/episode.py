"""One episode process: a fresh fork of the zygote that loads one world, plays one episode, and dies.

The zygote never runs world code, so every episode starts from the same clean interpreter: whatever one
episode's world does to classes, modules, builtins, caches or threads dies with its process, and no other
episode (of any world) ever sees it. The process talks to the pool directly over the one socket it keeps;
its first frame says whether the world loaded (with the world's declared tools) or why not.
"""

from __future__ import annotations

import os
import signal
import sys
import types
from collections.abc import Callable
from typing import Any

from toolworlds.sandbox.confine import Confinement, Limits, confine_episode
from toolworlds.sandbox.framing import FrameError, FrameReader, encode, write_all

CHANNEL = 3  # the episode's socket, moved here; every other inherited descriptor above 2 is closed


class EpisodeHost:
    """The one world and the one episode this process holds."""

    def __init__(self, max_reply_bytes: int) -> None:
        self.max_reply_bytes = max_reply_bytes
        self.world: Any = None
        self.ops: dict[str, Callable[[dict[str, Any]], Any]] = {
            "reset": self.reset, "step": self.step, "grade": self.grade, "solution": self.solution,
            "snapshot": self.snapshot,
        }  # fmt: skip

    def load(self, code: types.CodeType, module_name: str) -> dict[str, Any]:
        """Run the world's module, find its one `ToolWorld` class, make the episode; what the world declares."""
        from toolworlds.core import ToolWorld

        module = types.ModuleType(module_name)
        module.__file__ = code.co_filename
        sys.modules[module.__name__] = module  # pydantic resolves annotations through sys.modules
        exec(code, module.__dict__)  # untrusted: this process is the sandbox, and it plays only this episode
        found = [
            value
            for value in module.__dict__.values()
            if isinstance(value, type) and issubclass(value, ToolWorld) and value.__module__ == module.__name__
        ]
        if len(found) != 1:
            names = ", ".join(cls.__name__ for cls in found) or "none"
            raise LookupError(f"expected exactly one ToolWorld subclass in the file, found {names}")
        world = found[0]
        if not isinstance(getattr(world, "name", None), str):
            raise TypeError(f"{world.__name__}.name must be a string")
        info = {
            "name": world.name,
            "class_name": world.__name__,
            "description": str(world.description),
            "max_steps": int(world.max_steps),
            "tools": [
                {"name": spec.name, "description": spec.description, "input_schema": spec.input_schema,
                 "output_schema": spec.output_schema}
                for spec in world.tools()
            ],
        }  # fmt: skip
        self.world = world()
        return info

    # A `Task` or `StepResult` is encoded as it is: the JSON encoder serializes pydantic models itself.
    def reset(self, request: dict[str, Any]) -> Any:
        return self.world.reset(int(request["seed"]))

    def step(self, request: dict[str, Any]) -> Any:
        return self.world.step(request["action"])

    def grade(self, request: dict[str, Any]) -> Any:
        card = self.world._checked_grade()
        return {"score": card.score, "scorecard": card.summary()}

    def solution(self, request: dict[str, Any]) -> Any:
        return [action.model_dump(mode="json") for action in self.world.solution()]

    def snapshot(self, request: dict[str, Any]) -> Any:
        return self.world.snapshot()

    def answer(self, request: dict[str, Any]) -> bytes:
        """The encoded reply to one request; nothing a world does makes this raise."""
        try:
            return self.capped(encode({"ok": self.ops[request["op"]](request)}), request.get("op"))
        except BaseException as error:  # world code may raise anything, even SystemExit
            return encode({"error": {"kind": "world_bug", "message": describe(error)}})

    def capped(self, frame: bytes, op: object) -> bytes:
        if len(frame) <= self.max_reply_bytes:
            return frame
        message = f"the reply to {op} is {len(frame):,} bytes, over the {self.max_reply_bytes:,} cap"
        return encode({"error": {"kind": "world_bug", "message": message}})


def describe(error: BaseException) -> str:
    text = f"{type(error).__name__}: {error}"
    return text if len(text) <= 2000 else text[:2000] + "…"


def run_episode(
    channel: int,
    world: tuple[types.CodeType, str] | None,
    limits: Limits,
    zygote: Confinement,
    settings: dict[str, Any],
    parent: int,
) -> None:
    """The forked child's whole life; never returns. `world` is None for a probe that only reports its layers."""
    try:
        os.dup2(channel, CHANNEL, inheritable=False)
        os.closerange(CHANNEL + 1, 1 << 20)  # the zygote's pipes and every other episode's socket
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        report = confine_episode(limits, zygote, parent)
        host = EpisodeHost(int(settings["max_reply_bytes"]))
        try:
            loaded = None if world is None else host.load(*world)
            first = host.capped(encode({"ok": {"world": loaded, "confinement": vars(report)}}), "load")
        except BaseException as error:
            first = encode({"error": {"kind": "load_error", "message": describe(error)}})
        write_all(CHANNEL, first)
        serve(host, float(settings["spin_seconds"]))
    finally:
        os._exit(0)  # never back into the zygote's loop, and no world finaliser runs


def serve(host: EpisodeHost, spin: float) -> None:
    """Answer requests in order until the pool closes the socket (or kills this process).

    The pool asks one thing at a time per episode, so there is nothing to batch: read, answer, write.
    """
    incoming = FrameReader(CHANNEL, spin)
    while True:
        try:
            request = incoming.next()
        except FrameError:
            return
        write_all(CHANNEL, host.answer(request))
