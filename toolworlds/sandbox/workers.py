"""The parent's handle on one confined worker process: pipelined requests, and a reader that keeps time.

Requests are written as soon as they are made and answered in order, so a worker with many episodes
reads several requests per wake-up instead of paying a round trip for each. One reader task per worker
matches replies to requests and enforces deadlines: the request at the head of the queue has been running
since the previous reply arrived (or since it was sent), and if it outlives its deadline the reader kills
the worker's process group. The head request fails as the culprit; the rest fail as collateral.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
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
    """Another world's request killed the worker this request was waiting on."""

    reason = "worker_lost"


class SandboxStartError(RuntimeError):
    """A worker could not start, or lacks a confinement layer the settings require."""


@dataclass(frozen=True)
class WorkerSettings:
    """What a worker is told at start-up."""

    limits: Limits = field(default_factory=Limits)
    max_reply_bytes: int = 256 << 10  # a worker refuses bigger replies itself; the pool kills one that lies
    # After answering, a worker polls this long for the next request before it sleeps: on a VM an idle
    # vCPU takes hundreds of microseconds to wake (see benchmarks/sandbox_step.py).
    spin_seconds: float = 0.0003
    startup_seconds: float = 30.0


@dataclass
class _Pending:
    op: str
    deadline: float
    sent: float
    done: anyio.Event = field(default_factory=anyio.Event)
    reply: Any = None
    failure: SandboxError | None = None

    def resolve(self, reply: Any = None, failure: SandboxError | None = None) -> None:
        self.reply, self.failure = reply, failure
        self.done.set()


class WorkerProcess:
    """One confined child process. Start it with `spawn`, run `read_replies` in a task, then `request`."""

    def __init__(self, process: subprocess.Popen[bytes], workdir: Path, max_reply_bytes: int) -> None:
        assert process.stdin is not None and process.stdout is not None
        self.process = process
        self.workdir = workdir
        self.max_reply_bytes = max_reply_bytes
        self.confinement: dict[str, Any] = {}
        self.loaded: set[int] = set()
        self.episodes = 0
        self.alive = True
        self.ended = ""
        self._input = process.stdin.fileno()
        self._output = process.stdout.fileno()
        # Raw non-blocking descriptors woken by anyio.wait_readable: the event loop's stream transports
        # cost several times more per round trip, and a step is a few hundred bytes.
        os.set_blocking(self._input, False)
        os.set_blocking(self._output, False)
        self._buffer = bytearray()
        self._pending: deque[_Pending] = deque()
        self._has_pending = anyio.Event()
        self._outgoing = bytearray()
        self._backlog = anyio.Event()

    @classmethod
    async def spawn(cls, root: Path, settings: WorkerSettings) -> WorkerProcess:
        """Start a worker and wait for its confinement report."""
        workdir = Path(_make_workdir(root))
        environment = {"PATH": os.defpath, "LANG": "C.UTF-8", "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1"}
        if "PYTHONPATH" in os.environ:  # how this interpreter finds spadework; not a secret
            environment["PYTHONPATH"] = os.environ["PYTHONPATH"]
        process = subprocess.Popen(
            [sys.executable, "-s", "-m", "toolworlds.sandbox.worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            cwd=workdir,
            env=environment,  # nothing of ours (API keys, tokens) is inherited
            start_new_session=True,  # its own process group, so one killpg takes everything it started
        )
        worker = cls(process, workdir, settings.max_reply_bytes)
        setup = {"workdir": str(workdir), "parent": os.getpid(), **asdict(settings)}
        try:
            with anyio.fail_after(settings.startup_seconds):
                await worker._send(setup)
                reply = await worker._receive_frame()
        except (TimeoutError, OSError, anyio.EndOfStream, _ProtocolBroken) as error:
            ended = await worker.kill()
            raise SandboxStartError(f"a sandbox worker failed to start ({ended}): {error!r}") from None
        if not isinstance(reply, dict) or "ok" not in reply:
            await worker.kill()
            detail = reply.get("error") if isinstance(reply, dict) else reply
            raise SandboxStartError(f"a sandbox worker failed to start: {detail}")
        worker.confinement = reply["ok"]
        return worker

    async def request(self, message: dict[str, Any], deadline: float) -> Any:
        """Send one request and wait for its reply; raises the `SandboxError` that ended the worker."""
        if not self.alive:
            raise EpisodeLost(f"the worker was {self.ended} before {message['op']}")
        # No await between queueing and writing: a request is on the wire (or in the outgoing buffer, in
        # order) as soon as it is queued, so a caller cancelled later only abandons its reply.
        pending = _Pending(message["op"], deadline, time.monotonic())
        self._pending.append(pending)
        self._has_pending.set()
        self._outgoing += encode(message)
        self._flush()
        await pending.done.wait()
        if pending.failure is not None:
            raise pending.failure
        return pending.reply

    def _flush(self) -> None:
        """Write what the pipe takes now; a full pipe leaves the rest to `write_backlog`."""
        if not self._outgoing:
            return
        try:
            written = os.write(self._input, self._outgoing)
        except BlockingIOError:
            written = 0
        except OSError:  # a dead worker: the reader sees its closed pipe and fails every pending request
            self._outgoing.clear()
            return
        del self._outgoing[:written]
        if self._outgoing:
            self._backlog.set()

    async def write_backlog(self) -> None:
        """Finish writing frames a full pipe refused (a 64 KB world source, a burst of requests)."""
        while self.alive:
            if not self._outgoing:
                self._backlog = anyio.Event()
                await self._backlog.wait()
                continue
            await anyio.wait_writable(self._input)
            self._flush()

    async def read_replies(self) -> None:
        """Match replies to requests until the worker ends; kill it when the head request overruns."""
        last_reply = time.monotonic()
        while self.alive:
            if not self._pending:
                self._has_pending = anyio.Event()
                await self._has_pending.wait()
                continue
            head = self._pending[0]
            try:
                reply = self._buffered_frame()
                if reply is _INCOMPLETE:
                    started = max(head.sent, last_reply)
                    with anyio.fail_after(max(0.0, started + head.deadline - time.monotonic())):
                        await self._fill()
                    continue
            except TimeoutError:
                await self._fail(WorldTimeout, f"{head.op} ran past its {head.deadline:g} s deadline")
                return
            except (anyio.EndOfStream, OSError):
                await self._fail(WorkerCrashed, f"the worker died during {head.op}")
                return
            except (_ProtocolBroken, ValueError) as error:
                await self._fail(WorkerCrashed, f"the worker broke the protocol during {head.op}: {error}")
                return
            last_reply = time.monotonic()
            self._pending.popleft().resolve(reply=reply)

    async def _fail(self, kind: type[SandboxError], what: str) -> None:
        ended = await self.kill()
        head = self._pending.popleft()
        head.resolve(failure=kind(f"{what}; the worker was {ended}"))
        while self._pending:
            self._pending.popleft().resolve(failure=EpisodeLost(f"another world's {head.op} killed the worker"))

    async def kill(self) -> str:
        """Kill the worker's whole process group and reap it; returns how it ended, in words."""
        if not self.alive:
            return self.ended
        self.alive = False
        self._has_pending.set()
        self._backlog.set()
        with anyio.CancelScope(shield=True):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            while self.process.poll() is None:
                await anyio.sleep(0.002)
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                stream.close()
        shutil.rmtree(self.workdir, ignore_errors=True)
        code = self.process.returncode
        self.ended = f"killed by {signal.Signals(-code).name}" if code < 0 else f"exited with status {code}"
        return self.ended

    async def _send(self, message: Any) -> None:
        view = memoryview(encode(message))
        while view:
            try:
                view = view[os.write(self._input, view) :]
            except BlockingIOError:
                await anyio.wait_writable(self._input)

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
        """Read whatever the worker has written, waiting until there is something."""
        while True:
            try:
                chunk = os.read(self._output, 1 << 16)
            except BlockingIOError:
                await anyio.wait_readable(self._output)
                continue
            if not chunk:
                raise anyio.EndOfStream
            self._buffer += chunk
            return

    async def _receive_frame(self) -> Any:
        while (frame := self._buffered_frame()) is _INCOMPLETE:
            await self._fill()
        return frame


_INCOMPLETE = object()


class _ProtocolBroken(Exception):
    pass


def _make_workdir(root: Path) -> str:
    import tempfile

    return tempfile.mkdtemp(prefix="worker-", dir=root)
