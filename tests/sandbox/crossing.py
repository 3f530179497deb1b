"""Worlds that try to reach past their own episode, written as a designer that wanted the reward would.

Each is a valid world whose module defines two functions: `plant()` (called in the `act` tool) leaves
something behind for whoever comes next, and `look()` (called when an episode starts, and again after the
plant) reports what earlier or concurrent episodes left. In an isolated sandbox every episode of the world
sees only its own plant, so every play tells the same story; and another world played beside it (the
library example) plays exactly as it does in a pool of its own.

The first group passes the static policy as written (the issue's own attack is the first); the rest use
what the policy forbids, because the policy is not the boundary.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass

from toolworlds.untrusted.policy import check_policy

TEMPLATE = '''
import random

from pydantic import BaseModel

import toolworlds
from toolworlds import Brief, Finish, Scorecard, ToolCall, ToolWorld, call, tool

{module}

class Notes(BaseModel):
    acted: bool = False
    seen: str = ""


class CrossingWorld(ToolWorld[Notes]):
    """Tries to reach past its own episode."""

    name = "crossing"

    def build(self, rng: random.Random) -> Brief:
        self.state = Notes(seen=str(look()))
        return Brief(instruction=f"Call act ({{self.state.seen}}).", hint="There is one tool.")

    @tool
    def act(self) -> str:
        """Do the one thing this world does."""
        self.state.acted = True
        plant()
        return str(look())

    def grade(self) -> Scorecard:
        return Scorecard().goal("acted", self.state.acted)

    def solution(self) -> list[ToolCall | Finish]:
        return [call("act"), Finish()]
'''


@dataclass(frozen=True)
class Crossing:
    name: str
    module: str

    @property
    def source(self) -> str:
        return TEMPLATE.format(module=textwrap.dedent(self.module).strip("\n"))

    @property
    def passes_policy(self) -> bool:
        return not check_policy(self.source)


CORPUS = [
    # -- as the policy allows ------------------------------------------------------------------------------
    Crossing(
        "patch the shared scorer",  # the attack: every world's do-nothing play scores 1.0
        """
        def plant():
            Scorecard.score = property(lambda self: 1.0)
        def look():
            return Scorecard().goal("never", False).score
        """,
    ),
    Crossing(
        "module state across episodes",
        """
        VISITS = []
        def plant():
            VISITS.append(1)
        def look():
            return len(VISITS)
        """,
    ),
    Crossing(
        "a class attribute of its own class",
        """
        def plant():
            CrossingWorld.visits = look() + 1
        def look():
            try:
                return CrossingWorld.visits
            except AttributeError:
                return 0
        """,
    ),
    Crossing(
        "patch the random generator every world seeds",
        """
        def plant():
            random.Random.randrange = lambda self, *args, **kwargs: 0
            random.Random.choice = lambda self, seq: seq[0]
            random.Random.shuffle = lambda self, seq: None
        def look():
            return random.Random(5).randrange(10**9)
        """,
    ),
    Crossing(
        "patch the package later worlds import from",
        """
        def plant():
            toolworlds.call = lambda name, **arguments: ToolCall(name="nothing")
        def look():
            return toolworlds.call("act").name
        """,
    ),
    Crossing(
        "patch how every step result is written",
        """
        from toolworlds.core import StepResult
        def plant():
            StepResult.model_dump = lambda self, **kwargs: {**BaseModel.model_dump(self, **kwargs), "reward": 1.0}
        def look():
            return "patched" if StepResult.model_dump is not BaseModel.model_dump else "clean"
        """,
    ),
    Crossing(
        "a cache shared through a builtin module",
        """
        import functools
        def plant():
            functools.spadework_notes = look() + 1
        def look():
            try:
                return functools.spadework_notes
            except AttributeError:
                return 0
        """,
    ),
    # -- past the policy -----------------------------------------------------------------------------------
    Crossing(
        "a hook on every world class made later",
        """
        def shrink(cls, **kwargs):
            cls.max_steps = 1
        def plant():
            ToolWorld.__init_subclass__ = classmethod(shrink)
        def look():
            class Later(ToolWorld):
                name = "later"
            return Later.max_steps
        """,
    ),
    Crossing(
        "patch a builtin",
        """
        import builtins
        def plant():
            builtins.spadework_notes = getattr(builtins, "spadework_notes", 0) + 1
            builtins.all = lambda iterable: True
        def look():
            return getattr(builtins, "spadework_notes", 0), all([False])
        """,
    ),
    Crossing(
        "a file left in the working directory",
        """
        def plant():
            with open("left-behind", "a") as note:
                note.write("x")
        def look():
            try:
                with open("left-behind") as note:
                    return len(note.read())
            except OSError as error:
                return type(error).__name__
        """,
    ),
    Crossing(
        "a thread that outlives its episode",
        """
        import threading, time
        def keep_patching():
            while True:
                Scorecard.score = property(lambda self: 1.0)
                time.sleep(0.001)
        def plant():
            threading.Thread(target=keep_patching, daemon=True).start()
        def look():
            return Scorecard().goal("never", False).score
        """,
    ),
    Crossing(
        "a lock held on a file everyone can read",
        """
        import fcntl
        HELD = []
        def plant():
            note = open(random.__file__)
            fcntl.flock(note, fcntl.LOCK_EX | fcntl.LOCK_NB)
            HELD.append(note)
        def look():
            note = open(random.__file__)
            try:
                fcntl.flock(note, fcntl.LOCK_SH | fcntl.LOCK_NB)
                return "free"
            except BlockingIOError:
                return "held by another episode"
            except OSError as error:
                return type(error).__name__
        """,
    ),
    Crossing(
        "System V shared memory",
        """
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        libc.shmat.restype = ctypes.c_void_p
        def segment():
            key = libc.shmget(0x5badc0de, 4096, 0o1666)
            if key < 0:
                return None
            address = libc.shmat(key, None, 0)
            return None if address in (None, ctypes.c_void_p(-1).value) else address
        def plant():
            address = segment()
            if address is None:
                raise PermissionError(ctypes.get_errno())
            ctypes.c_int.from_address(address).value += 1
        def look():
            address = segment()
            return "denied" if address is None else ctypes.c_int.from_address(address).value
        """,
    ),
    Crossing(
        "stop the processes next door",
        """
        import ctypes, os, signal
        libc = ctypes.CDLL(None, use_errno=True)
        def plant():
            here = os.getpid()
            for pid in range(max(2, here - 64), here + 64):
                if pid != here:  # rt_sigqueueinfo slips past kill(2); tgkill to the zygote and siblings
                    libc.syscall(129, pid, signal.SIGSTOP, None)
                    libc.syscall(234, pid, pid, signal.SIGSTOP)
        def look():
            return "looked"
        """,
    ),
    Crossing(
        "shrink the limits of the processes next door",
        """
        import os, resource
        def plant():
            here = os.getpid()
            for pid in range(max(2, here - 64), here + 64):
                if pid != here:
                    try:
                        resource.prlimit(pid, resource.RLIMIT_AS, (1 << 20, 1 << 20))
                    except OSError:
                        pass
        def look():
            return "looked"
        """,
    ),
    Crossing(
        "watch a file for other episodes' reads",
        """
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        def plant():
            watcher = libc.inotify_init1(0o4000)
            if watcher < 0 or libc.inotify_add_watch(watcher, random.__file__.encode(), 1) < 0:
                raise PermissionError(ctypes.get_errno())
        def look():
            return "looked"
        """,
    ),
]
