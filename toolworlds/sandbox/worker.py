"""A sandbox worker: confines itself, then hosts many untrusted worlds and answers the pool over a pipe.

Run only by `SandboxPool` (`python -m toolworlds.sandbox.worker`). The first frame it reads is its set-up
(work dir, limits); it replies with the confinement it got, then serves one request at a time until its
input closes. Whatever a world does, the reply is a frame: world exceptions become `world_bug` errors, and
only death (which the pool sees as a closed pipe) or silence (which the pool's deadline catches) is left.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

from toolworlds.sandbox.confine import Limits, confine
from toolworlds.sandbox.framing import FrameError, FrameReader, encode, write_all, write_frame

# Imported lazily by pydantic or the standard library once worlds run; after the uid drop the interpreter's
# own files may be unreadable (a Python under /root), so these must be in memory before.
PRELOADED = frozenset({"pydantic.json_schema", "pydantic.functional_validators", "pydantic_core", "encodings.idna",
                       "toolworlds.reference.banking", "unicodedata", "zoneinfo"})  # fmt: skip


def _preload() -> None:
    """Import what worlds may import before the file system closes, so no import can fail half-way."""
    import importlib

    from toolworlds.sandbox.confine import preload_seccomp
    from toolworlds.untrusted.policy import ALLOWED_MODULES

    for name in sorted(ALLOWED_MODULES | PRELOADED):
        importlib.import_module(name)
    preload_seccomp()


# Replies computed in one batch are written together, but never held back longer than this.
FLUSH_SECONDS = 0.001


class WorldHost:
    """The worlds and episodes this worker holds, keyed by the ids the pool chose."""

    def __init__(self, max_reply_bytes: int) -> None:
        from toolworlds.core import ToolWorld

        self._base = ToolWorld
        self.max_reply_bytes = max_reply_bytes
        self.classes: dict[int, type[Any]] = {}
        self.episodes: dict[int, tuple[int, Any]] = {}
        self.ops: dict[str, Callable[[dict[str, Any]], Any]] = {
            "load": self.load, "unload": self.unload, "open": self.open, "close": self.close,
            "reset": self.reset, "step": self.step, "grade": self.grade, "solution": self.solution,
            "snapshot": self.snapshot, "ping": self.ping,
        }  # fmt: skip

    def load(self, request: dict[str, Any]) -> dict[str, Any]:
        module = types.ModuleType(f"world_{request['world']}")
        module.__file__ = request.get("filename", "<world>")
        code = compile(request["source"], module.__file__, "exec")
        sys.modules[module.__name__] = module  # pydantic resolves annotations through sys.modules
        exec(code, module.__dict__)  # untrusted: this whole process is the sandbox
        found = [
            value
            for value in module.__dict__.values()
            if isinstance(value, type) and issubclass(value, self._base) and value.__module__ == module.__name__
        ]
        if len(found) != 1:
            names = ", ".join(cls.__name__ for cls in found) or "none"
            raise LookupError(f"expected exactly one ToolWorld subclass in the file, found {names}")
        world = found[0]
        if not isinstance(getattr(world, "name", None), str):
            raise TypeError(f"{world.__name__}.name must be a string")
        self.classes[request["world"]] = world
        return {
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

    def unload(self, request: dict[str, Any]) -> None:
        world = request["world"]
        self.classes.pop(world, None)
        sys.modules.pop(f"world_{world}", None)  # or a long-lived worker keeps every module it ever loaded
        for env in [env for env, (owner, _) in self.episodes.items() if owner == world]:
            del self.episodes[env]

    def open(self, request: dict[str, Any]) -> None:
        self.episodes[request["env"]] = (request["world"], self.classes[request["world"]]())

    def close(self, request: dict[str, Any]) -> None:
        self.episodes.pop(request["env"], None)

    def _episode(self, request: dict[str, Any]) -> Any:
        return self.episodes[request["env"]][1]

    def reset(self, request: dict[str, Any]) -> Any:
        return self._episode(request).reset(int(request["seed"])).model_dump(mode="json")

    def step(self, request: dict[str, Any]) -> Any:
        return self._episode(request).step(request["action"]).model_dump(mode="json")

    def grade(self, request: dict[str, Any]) -> Any:
        card = self._episode(request)._checked_grade()
        return {"score": card.score, "summary": card.summary()}

    def solution(self, request: dict[str, Any]) -> Any:
        return [action.model_dump(mode="json") for action in self._episode(request).solution()]

    def snapshot(self, request: dict[str, Any]) -> Any:
        return self._episode(request).snapshot()

    def ping(self, request: dict[str, Any]) -> Any:
        return {"pid": os.getpid(), "worlds": len(self.classes), "episodes": len(self.episodes)}

    def answer(self, request: dict[str, Any]) -> bytes:
        """The encoded reply to one request; nothing a world does makes this raise."""
        try:
            frame = encode({"ok": self.ops[request["op"]](request)})
        except BaseException as error:  # world code may raise anything, even SystemExit
            kind = "load_error" if request.get("op") == "load" else "world_bug"
            frame = encode({"error": {"kind": kind, "message": _describe(error)}})
        if len(frame) > self.max_reply_bytes:
            message = f"the reply to {request.get('op')} is {len(frame):,} bytes, over the {self.max_reply_bytes:,} cap"
            frame = encode({"error": {"kind": "world_bug", "message": message}})
        return frame


def _describe(error: BaseException) -> str:
    text = f"{type(error).__name__}: {error}"
    return text if len(text) <= 2000 else text[:2000] + "…"


def serve(requests: int, replies: int) -> None:
    incoming = FrameReader(requests)
    setup = incoming.next()
    workdir = Path(setup["workdir"])
    _preload()
    report = confine(workdir, Limits(**setup["limits"]), parent=int(setup["parent"]))
    os.chdir(workdir)
    tempfile.tempdir = str(workdir)
    host = WorldHost(int(setup["max_reply_bytes"]))
    write_frame(replies, {"ok": {"pid": os.getpid(), "layers": report.layers, "missing": report.missing}})
    incoming.spin = float(setup["spin_seconds"])
    outgoing: list[bytes] = []
    oldest = 0.0
    while True:
        if not incoming.pending() and outgoing:  # about to wait: send what is done first
            write_all(replies, b"".join(outgoing))
            outgoing.clear()
        try:
            request = incoming.next()
        except FrameError:
            return  # the pool closed our input: time to go
        if not outgoing:
            oldest = time.monotonic()
        outgoing.append(host.answer(request))
        if time.monotonic() - oldest > FLUSH_SECONDS:  # a long batch must not hold early replies back
            write_all(replies, b"".join(outgoing))
            outgoing.clear()


def main() -> None:
    # The protocol moves off fds 0 and 1, which then point at /dev/null: a world that prints, or writes to
    # fd 1, cannot corrupt a frame by accident; one that finds the protocol's fd and writes to it on purpose
    # breaks the protocol, and the pool kills the worker for it.
    requests, replies = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDWR)
    for descriptor in (0, 1, 2):
        os.dup2(null, descriptor)
    os.close(null)
    try:
        serve(requests, replies)
    except FrameError:
        pass
    except BaseException as error:  # report a set-up failure the only way we can
        write_frame(replies, {"error": {"kind": "startup", "message": _describe(error)}})
        raise SystemExit(3) from None


if __name__ == "__main__":
    main()
