"""The zygote: a confined fork server that never runs world code, so every episode it forks starts clean.

Run only by `SandboxPool` (`python -m toolworlds.sandbox.zygote`). The first frame it reads is its set-up
(work dir, limits, the descriptor of the hand-over socket); it replies with the confinement it got, then
serves one request at a time until its input closes:

- `compile`: parse a world's source into a code object (parsing runs nothing) and keep it;
- `spawn`: fork an episode process for a compiled world (or a bare probe), and hand the pool that
  process's socket and a pidfd over the hand-over socket; the reply is its pid;
- `forget`: drop a world's code.

World code runs only in the episode processes (`toolworlds.sandbox.episode`), each confined further
before it runs any: no processes of its own, no writes, signals to itself only, no descriptor but its socket.
"""

from __future__ import annotations

import gc
import os
import signal
import socket
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from toolworlds.sandbox.confine import Confinement, Limits, confine
from toolworlds.sandbox.episode import describe, run_episode
from toolworlds.sandbox.framing import FrameError, FrameReader, encode, write_all, write_frame
from toolworlds.untrusted.policy import SEEDED_ONLY

# Imported lazily by pydantic or the standard library once worlds run; after the uid drop the interpreter's
# own files may be unreadable (a Python under /root), so these must be in memory before.
PRELOADED = frozenset({"pydantic.json_schema", "pydantic.functional_validators", "pydantic_core", "encodings.idna",
                       "toolworlds.reference.banking", "toolworlds.core", "unicodedata", "zoneinfo"})  # fmt: skip


def _preload() -> None:
    """Import what worlds may import before the file system closes, so no import can fail half-way."""
    import importlib

    from toolworlds.sandbox.confine import preload_seccomp
    from toolworlds.untrusted.policy import ALLOWED_MODULES

    for name in sorted(ALLOWED_MODULES | PRELOADED):
        importlib.import_module(name)
    preload_seccomp()
    _seal_unseeded_randomness()


def _seal_unseeded_randomness() -> None:
    """The policy gate refuses `random.choice(...)` and `uuid.uuid4()`; an alias it cannot follow (`r = random`)
    meets this: `random`'s module-level draws and `uuid`'s random ids raise, in every sandbox process. A world's
    only randomness is the `rng` its `build` gets (`random.Random(seed)` still works)."""
    import random
    import uuid

    def unseeded(*args: object, **kwargs: object) -> NoReturn:
        raise RuntimeError("unseeded randomness: draw from the rng build() gets, not random's or uuid's own")

    for module, allowed in ((random, SEEDED_ONLY["random"]), (uuid, SEEDED_ONLY["uuid"])):
        for name in dir(module):
            value = getattr(module, name)
            if not name.startswith("_") and name not in allowed and callable(value) and not isinstance(value, type):
                setattr(module, name, unseeded)
    random.SystemRandom = unseeded  # type: ignore[assignment, misc]


class Zygote:
    """The compiled worlds, and the forks made from them."""

    def __init__(self, handover: socket.socket, limits: Limits, report: Confinement, setup: dict[str, Any]) -> None:
        self.handover = handover
        self.limits = limits
        self.report = report
        self.setup = setup
        self.codes: dict[int, types.CodeType] = {}
        self.ops: dict[str, Callable[[dict[str, Any]], Any]] = {
            "compile": self.compile, "spawn": self.spawn, "forget": self.forget,
        }  # fmt: skip

    def compile(self, request: dict[str, Any]) -> None:
        self.codes[request["world"]] = compile(request["source"], request.get("filename", "<world>"), "exec")

    def forget(self, request: dict[str, Any]) -> None:
        self.codes.pop(request["world"], None)

    def spawn(self, request: dict[str, Any]) -> dict[str, int]:
        world_id = request.get("world")
        world = None if world_id is None else (self.codes[world_id], f"world_{world_id}")
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:  # the episode process: never returns
            run_episode(theirs.fileno(), world, self.limits, self.report, self.setup, parent)
        theirs.close()
        pidfd = os.pidfd_open(pid)
        try:
            socket.send_fds(self.handover, [str(request["episode"]).encode()], [ours.fileno(), pidfd])
        finally:
            ours.close()
            os.close(pidfd)
        return {"pid": pid}

    def answer(self, request: dict[str, Any]) -> bytes:
        try:
            return encode({"ok": self.ops[request["op"]](request)})
        except BaseException as error:  # a world's source may fail to parse, or be too deep to parse
            kind = "load_error" if request.get("op") == "compile" else "zygote"
            return encode({"error": {"kind": kind, "message": describe(error)}})


def serve(requests: int, replies: int, handover: int) -> None:
    incoming = FrameReader(requests)
    setup = incoming.next()
    workdir = Path(setup["workdir"])
    _preload()
    limits = Limits(**setup["limits"])
    report = confine(workdir, limits, parent=int(setup["parent"]))
    os.chdir(workdir)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # episode processes are reaped by the kernel; pidfds stay valid
    zygote = Zygote(socket.socket(fileno=handover), limits, report, setup)
    # Everything loaded so far is permanent: an episode's garbage collector never walks (and so never
    # copies the pages of) the preloaded libraries it shares with the zygote.
    gc.collect()
    gc.freeze()
    write_frame(replies, {"ok": {"pid": os.getpid(), "layers": report.layers, "missing": report.missing}})
    while True:
        try:
            request = incoming.next()
        except FrameError:  # the pool closed our input, after killing every episode process it knows
            _outlive_children()
            return

        write_all(replies, zygote.answer(request))


def _outlive_children() -> None:
    """Wait until every episode process is gone: one that outlived us would be a zombie nobody reaps."""
    try:
        while True:
            os.wait()  # with SIGCHLD ignored: blocks until no child is left, then ECHILD
    except ChildProcessError:
        pass


def main() -> None:
    # The protocol moves off fds 0 and 1, which then point at /dev/null (and so do they in every episode).
    requests, replies = os.dup(0), os.dup(1)
    handover = int(sys.argv[1])
    null = os.open(os.devnull, os.O_RDWR)
    for descriptor in (0, 1, 2):
        os.dup2(null, descriptor)
    os.close(null)
    try:
        serve(requests, replies, handover)
    except FrameError:
        pass
    except BaseException as error:  # report a set-up failure the only way we can
        write_frame(replies, {"error": {"kind": "startup", "message": describe(error)}})
        raise SystemExit(3) from None


if __name__ == "__main__":
    main()
