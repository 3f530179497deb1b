"""The pool's handles on its sandbox processes: one request at a time, and deadlines kept by a watchdog.

A request takes the channel's turn, writes its frame and reads replies in order until its own; a caller
cancelled while waiting leaves its request in flight, and the next caller drops that reply first. No task
waits per process: the pool's watchdog asks every process whether its oldest unanswered request is past its
deadline (`overdue`), and kills it if so; whoever waits then finds the channel closed and fails.

Two kinds of process: a `Zygote` (a confined fork server the pool starts, over pipes) and an
`EpisodeProcess` (one episode, forked by a zygote, over the socket the zygote handed the pool, killed
through its pidfd).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import deque
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import anyio

from toolworlds.core import WorldBugError
from toolworlds.sandbox.confine import Limits
from toolworlds.sandbox.framing import HEADER, decode, encode


class SandboxError(WorldBugError):
    """A sandboxed world failed; `reason` says how (the engine records it as an infrastructure failure)."""

    reason = "sandbox"
    fatal = True


class WorldTimeout(SandboxError):
    reason = "timeout"


class WorkerCrashed(SandboxError):
    reason = "crash"


class EpisodeLost(SandboxError):
    """The process this request needed was gone, or was killed for a request ahead of it."""

    reason = "worker_lost"


class SandboxStartError(RuntimeError):
    """A sandbox process could not start, or lacks a confinement layer the settings require."""


@dataclass(frozen=True)
class WorkerSettings:
    """What every sandbox process is told at start-up."""

    limits: Limits = field(default_factory=Limits)
    max_reply_bytes: int = 256 << 10  # a process refuses bigger replies itself; the pool kills one that lies
    # After answering, an episode polls this long for its next request before it sleeps, as long as its
    # last request came that soon: on a VM an idle vCPU takes hundreds of microseconds to wake (see
    # benchmarks/perf/sandbox_step.py), and a busy pool asks each episode again only milliseconds later.
    spin_seconds: float = 0.0003
    startup_seconds: float = 30.0


@dataclass
class _InFlight:
    """A request the process has not answered yet (its caller may have stopped waiting)."""

    op: str
    deadline: float
    sent: float


class SandboxProcess:
    """A channel to one confined process: one request at a time, read by the caller that made it.

    A caller cancelled while its request runs only abandons the reply: the request stays in flight, and
    the next caller reads and drops that reply before its own. The pool's watchdog (`overdue`) keeps every
    deadline, so waiting costs no timer per call, and no reader task per process.
    """

    kind = "sandbox process"

    def __init__(self, reads: int, writes: int, max_reply_bytes: int) -> None:
        self.max_reply_bytes = max_reply_bytes
        self.alive = True
        self.ended = ""
        self._input = writes
        self._output = reads
        # Raw non-blocking descriptors woken by anyio.wait_readable: the event loop's stream transports
        # cost several times more per round trip, and a step is a few hundred bytes.
        os.set_blocking(self._input, False)
        os.set_blocking(self._output, False)
        self._buffer = bytearray()
        self._outgoing = bytearray()
        self._in_flight: deque[_InFlight] = deque()
        self._turn = anyio.Lock(fast_acquire=True)
        self._last_reply = 0.0
        self._overdue = ""

    async def request(self, message: dict[str, Any], deadline: float) -> Any:
        """Send one request and wait for its reply; raises the `SandboxError` that ended the process."""
        async with self._turn:
            if not self.alive:
                raise EpisodeLost(f"the {self.kind} was {self.ended} before {message['op']}")
            mine = _InFlight(message["op"], deadline, time.monotonic())
            self._in_flight.append(mine)
            self._outgoing += encode(message)
            await self._write()
            return await self._reply_to(mine)

    async def _write(self) -> None:
        """Write every queued byte, waiting while the channel is full (a 64 KB world source)."""
        while self._outgoing:
            try:
                written = os.write(self._input, self._outgoing)
            except BlockingIOError:
                written = 0
            except OSError:  # a dead process: reading its reply finds the channel closed
                self._outgoing.clear()
                return
            del self._outgoing[:written]
            if self._outgoing:
                try:
                    await anyio.wait_writable(self._input)
                except anyio.ClosedResourceError:
                    return

    async def _reply_to(self, mine: _InFlight) -> Any:
        """Read replies in order, dropping abandoned ones, until `mine`; a dead process fails it."""
        while True:
            head = self._in_flight[0]
            try:
                frame = self._buffered_frame()
                if frame is _INCOMPLETE:
                    await self._fill()
                    continue
            except anyio.ClosedResourceError:  # closed while we waited: the episode was closed under us
                raise EpisodeLost(f"the {self.kind} was closed during {mine.op}") from None
            except (anyio.EndOfStream, OSError):
                failure = self._ended_by(head)
                await self.kill()
                raise (failure if head is mine else EpisodeLost(f"{failure}; before {mine.op}")) from None
            except (_ProtocolBroken, ValueError) as error:
                failure = WorkerCrashed(f"the {self.kind} broke the protocol during {head.op}: {error}")
                await self.kill()
                raise failure from None
            self._in_flight.popleft()
            self._last_reply = time.monotonic()
            if head is mine:
                return frame

    def _ended_by(self, head: _InFlight) -> SandboxError:
        if self._overdue:
            return WorldTimeout(f"{self._overdue}; the {self.kind} was killed by SIGKILL")
        return WorkerCrashed(f"the {self.kind} died during {head.op}")

    def overdue(self, now: float) -> bool:
        """Kill the process if its oldest unanswered request has run past its deadline (the watchdog asks).

        A request runs from when it was sent, or from the reply before it, whichever is later. Whoever
        waits for a reply then finds the channel closed, and fails as a timeout.
        """
        if not self.alive or not self._in_flight or self._overdue:
            return False
        head = self._in_flight[0]
        if now - max(head.sent, self._last_reply) <= head.deadline:
            return False
        self._overdue = f"{head.op} ran past its {head.deadline:g} s deadline"
        self._signal()
        return True

    async def kill(self) -> str:
        """Kill the process (and what it started) and wait until it is gone; returns how it ended, in words."""
        if not self.alive:
            return self.ended
        self.alive = False
        with anyio.CancelScope(shield=True):
            self.ended = await self._terminate()
        return self.ended

    def _signal(self) -> None:
        """Send SIGKILL to the process (and whatever belongs to it), without waiting."""
        raise NotImplementedError

    async def _terminate(self) -> str:
        raise NotImplementedError

    def _buffered_frame(self) -> Any:
        """The next whole frame already read, decoded, or `_INCOMPLETE`; replies often arrive in batches."""
        if len(self._buffer) < HEADER.size:
            return _INCOMPLETE
        (size,) = HEADER.unpack_from(self._buffer)
        if size > self.max_reply_bytes:
            raise _ProtocolBroken(f"a {size:,}-byte reply, over the {self.max_reply_bytes:,} cap")
        if len(self._buffer) < HEADER.size + size:
            return _INCOMPLETE
        body = bytes(self._buffer[HEADER.size : HEADER.size + size])
        del self._buffer[: HEADER.size + size]
        return decode(body)

    async def _fill(self) -> None:
        """Wait until the process has written something, and read all of it.

        Waiting comes first: a reply is hardly ever back the moment its request is written."""
        while True:
            await anyio.wait_readable(self._output)
            try:
                chunk = os.read(self._output, 1 << 16)
            except BlockingIOError:
                continue
            if not chunk:
                raise anyio.EndOfStream
            self._buffer += chunk
            return


class Zygote(SandboxProcess):
    """The fork server: `spawn` starts one; its `spawn` requests fork episodes, handed over by `take_handover`."""

    kind = "zygote"

    def __init__(
        self, process: subprocess.Popen[bytes], workdir: Path, handover: socket.socket, settings: WorkerSettings
    ) -> None:
        assert process.stdin is not None and process.stdout is not None
        super().__init__(process.stdout.fileno(), process.stdin.fileno(), settings.max_reply_bytes)
        self.process = process
        self.workdir = workdir
        self.handover = handover
        self.compiled: set[int] = set()
        self.forking = 0
        self._handed: dict[int, tuple[int, int]] = {}

    @classmethod
    async def spawn(cls, root: Path, settings: WorkerSettings) -> Zygote:
        """Start a zygote and wait for its confinement report."""
        workdir = Path(tempfile.mkdtemp(prefix="zygote-", dir=root))
        environment = {"PATH": os.defpath, "LANG": "C.UTF-8", "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1"}
        if "PYTHONPATH" in os.environ:  # how this interpreter finds spadework; not a secret
            environment["PYTHONPATH"] = os.environ["PYTHONPATH"]
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            process = subprocess.Popen(
                [sys.executable, "-s", "-m", "toolworlds.sandbox.zygote", str(theirs.fileno())],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                cwd=workdir,
                env=environment,  # nothing of ours (API keys, tokens) is inherited
                pass_fds=[theirs.fileno()],
                start_new_session=True,  # its own process group, so one killpg takes every episode it forked
            )
        finally:
            theirs.close()
        ours.setblocking(False)
        zygote = cls(process, workdir, ours, settings)
        setup = {"op": "setup", "workdir": str(workdir), "parent": os.getpid(), **asdict(settings)}
        try:
            with anyio.fail_after(settings.startup_seconds):
                reply = await zygote.request(setup, settings.startup_seconds)
        except (TimeoutError, SandboxError) as error:
            ended = await zygote.kill()
            raise SandboxStartError(f"a sandbox zygote failed to start ({ended}): {error!r}") from None
        if not isinstance(reply, dict) or "ok" not in reply:
            await zygote.kill()
            detail = reply.get("error") if isinstance(reply, dict) else reply
            raise SandboxStartError(f"a sandbox zygote failed to start: {detail}")
        return zygote

    def take_handover(self, episode: int) -> tuple[int, int]:
        """The socket and pidfd the zygote sent for `episode` (sent before its reply to that `spawn`).

        Replies wake their callers in any order, so hand-overs read for another episode wait for it.
        """
        while episode not in self._handed:
            if not self._receive_handover():
                raise WorkerCrashed(f"the zygote replied to spawn {episode} without handing it over")
        return self._handed.pop(episode)

    def _receive_handover(self) -> bool:
        """Read one waiting hand-over into `_handed`; False when none is waiting."""
        try:
            message, descriptors, _, _ = socket.recv_fds(self.handover, 64, 2)
        except BlockingIOError:
            return False
        if len(descriptors) != 2 or not message.isdigit():
            for descriptor in descriptors:
                os.close(descriptor)
            raise WorkerCrashed(f"the zygote handed over {message!r} with {len(descriptors)} descriptors")
        self._handed[int(message)] = (descriptors[0], descriptors[1])
        return True

    def _end_unclaimed(self) -> None:
        """Kill every episode process handed over that no caller took (its caller was cancelled while the
        zygote forked it): nobody else would ever end it, and the zygote waits for all its children."""
        with contextlib.suppress(WorkerCrashed, OSError):
            while self._receive_handover():
                pass
        for channel, pidfd in self._handed.values():
            with contextlib.suppress(ProcessLookupError, OSError):
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
            for descriptor in (channel, pidfd):
                with contextlib.suppress(OSError):
                    os.close(descriptor)
        self._handed.clear()

    async def stop(self, grace: float = 5.0) -> str:
        """Close the zygote's input and let it exit once its episode processes are gone (the pool kills them
        first); kill its whole session if it is not gone within `grace` seconds."""
        if self.alive and self.process.stdin is not None:
            with contextlib.suppress(OSError):
                self.process.stdin.close()
            with anyio.move_on_after(grace):
                while self.process.poll() is None:
                    self._end_unclaimed()  # forks it finishes meanwhile are handed over too
                    await anyio.sleep(0.002)
        return await self.kill()

    def _signal(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)

    async def _terminate(self) -> str:
        self._signal()
        while self.process.poll() is None:
            await anyio.sleep(0.002)
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                stream.close()
        self.handover.close()
        shutil.rmtree(self.workdir, ignore_errors=True)
        code = self.process.returncode
        return f"killed by {signal.Signals(-code).name}" if code < 0 else f"exited with status {code}"


class EpisodeProcess(SandboxProcess):
    """One episode's process, reached over the socket its zygote handed over; killed through its pidfd."""

    kind = "episode process"

    def __init__(self, channel: int, pidfd: int, pid: int, max_reply_bytes: int, load_deadline: float) -> None:
        super().__init__(channel, channel, max_reply_bytes)
        self.pidfd = pidfd
        self.pid = pid
        # The process speaks first, unasked: whether it loaded the world (the watchdog times the load).
        self._loading = _InFlight("load", load_deadline, time.monotonic())
        self._in_flight.append(self._loading)

    async def first_frame(self) -> Any:
        """The load report: the world's declared tools, or why it did not load."""
        async with self._turn:
            return await self._reply_to(self._loading)

    def close(self) -> None:
        """End the episode now: SIGKILL, no finaliser of the world runs; the zygote's kernel reaps it."""
        if self.alive:
            self.alive = False
            self._signal()
            self._release()
            self.ended = "closed"

    def _signal(self) -> None:
        with contextlib.suppress(ProcessLookupError, OSError):
            signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)

    def _release(self) -> None:
        anyio.notify_closing(self._output)  # a caller waiting on the socket wakes, not on a reused number
        for descriptor in (self._output, self.pidfd):
            with contextlib.suppress(OSError):
                os.close(descriptor)

    async def _terminate(self) -> str:
        self._signal()
        with anyio.move_on_after(5):
            await anyio.wait_readable(self.pidfd)  # readable once the process has exited
        self._release()
        return "killed by SIGKILL"


_INCOMPLETE = object()


class _ProtocolBroken(Exception):
    pass
