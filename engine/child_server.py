"""A model server in a child process of its own: `spadework serve` (llama.cpp) or `spadework vllm`.

The engine and the trainer start the server they need as a child, so a crash or a restart never takes them
down, the child dies with its parent, and SIGTERM stops it cleanly. The child reports itself ready with one
line on stdout (`READY_LINE`), or why it could not start with one line on stderr (`ERROR_PREFIX`).
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path
from types import TracebackType
from typing import Any, ClassVar, Protocol, Self
from urllib.parse import urlsplit

import httpx
import structlog

log = structlog.get_logger()

READY_LINE = "serving model"
# A server command writes a startup failure as one line with this prefix on stderr.
ERROR_PREFIX = "spadework serve: error: "


class ServerStartError(RuntimeError):
    """The model server could not start: the message says why (port taken, bad model file, ...)."""


class ChildSettings(Protocol):
    """What `ChildServer` reads of a server's settings (a frozen dataclass: it replaces the port and the model)."""

    __dataclass_fields__: ClassVar[dict[str, Any]]

    @property
    def model(self) -> Path: ...

    @property
    def port(self) -> int: ...

    def arguments(self) -> list[str]: ...


class ChildServer:
    """A model server command in a child process: start, wait until healthy, restart on another model, stop.

    Use as a context manager; `base_url` is what the engine's `--endpoint` takes. A subclass names its
    command (`command`); the child prints `READY_LINE ... on URL` once it listens, or one line starting with
    `ERROR_PREFIX` on stderr when it cannot start.
    """

    name = "model server"  # for its log lines

    def __init__(self, settings: ChildSettings, start_timeout_s: float = 120.0) -> None:
        self.settings = settings
        self.start_timeout_s = start_timeout_s
        self._process: subprocess.Popen[str] | None = None
        self._url: str | None = None
        self._log: Any = None

    @property
    def base_url(self) -> str:
        if self._url is None:
            raise RuntimeError(f"the {self.name} is not running")
        return self._url

    def command(self) -> list[str]:
        """The child's command line: the server in a process of its own."""
        raise NotImplementedError

    def start(self) -> str:
        """Start the child and return its OpenAI base URL once `/health` answers."""
        command = self.command()
        started = time.monotonic()
        # Servers log every request on stderr: to a file, so an unread pipe can never stall the server.
        self._log = tempfile.NamedTemporaryFile(prefix="spadework-serve-", suffix=".log", delete=False)  # noqa: SIM115
        self._process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=self._log, text=True, preexec_fn=stop_with_parent
        )
        self._url = self._await_ready(self._process)
        # A reload comes back on the same port, so clients holding the URL keep working.
        self.settings = replace(self.settings, port=urlsplit(self._url).port or 0)
        log.info(f"{self.name} ready", url=self._url, seconds=round(time.monotonic() - started, 2), log=self._log.name)
        return self._url

    def cpu_seconds(self) -> float:
        """CPU time the server process has used so far (user + system), from /proc: Linux only."""
        if self._process is None:
            raise RuntimeError(f"the {self.name} is not running")
        fields = Path(f"/proc/{self._process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def memory_bytes(self) -> int:
        """Proportional set size (PSS) of the server and every process under it (vLLM runs an engine core and
        workers), from /proc: shared pages are split among their sharers, so the sum is not double counted."""
        if self._process is None:
            raise RuntimeError(f"the {self.name} is not running")
        pending, total = [self._process.pid], 0
        while pending:
            pid = pending.pop()
            try:
                for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                    if line.startswith("Pss:"):
                        total += int(line.split()[1]) * 1024
                for task in Path(f"/proc/{pid}/task").iterdir():
                    pending += [int(child) for child in (task / "children").read_text().split()]
            except OSError:
                continue  # it ended while we looked
        return total

    def reload(self, model: Path) -> str:
        """Serve `model` instead (same port and settings); the old process is stopped first."""
        self.stop()
        self.settings = replace(self.settings, model=model)
        return self.start()

    def stop(self) -> int | None:
        """SIGTERM, then wait (kill after 30 s); returns the child's exit status (0: a clean shutdown)."""
        process, self._process, self._url = self._process, None, None
        if self._log is not None:
            self._log.close()
            Path(self._log.name).unlink(missing_ok=True)
        from toolworlds.hosting.serving import stop_child

        return None if process is None else stop_child(process)

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.stop()

    def _await_ready(self, process: subprocess.Popen[str]) -> str:
        stdout = process.stdout
        assert stdout is not None
        lines: list[str] = []
        threading.Thread(target=lambda: lines.extend(iter(stdout.readline, "")), daemon=True).start()
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            announced = next((line for line in lines if line.startswith(READY_LINE)), None)
            if announced is not None:
                url = announced.rsplit(" on ", 1)[1].strip()
                if healthy(url):
                    return url
            elif process.poll() is not None:
                raise ServerStartError(self._failure(process.returncode))
            time.sleep(0.05)
        process.kill()
        process.wait()
        raise ServerStartError(f"the {self.name} did not become healthy within {self.start_timeout_s:.0f} s")

    def _failure(self, returncode: int) -> str:
        """The child's own one-line reason, not its whole log."""
        text = Path(self._log.name).read_text(errors="replace")
        reasons = [line.removeprefix(ERROR_PREFIX) for line in text.splitlines() if line.startswith(ERROR_PREFIX)]
        reason = reasons[-1] if reasons else f"it exited with {returncode}"
        return f"{reason} (server log: {self._log.name})"


def healthy(base_url: str) -> bool:
    try:
        return httpx.get(base_url.removesuffix("/v1") + "/health", timeout=2.0).status_code == 200
    except httpx.HTTPError:
        return False


def stop_with_parent() -> None:
    """Runs in the child before exec: SIGTERM it when the thread that started it dies (with the process,
    for a server started from the main thread), so a killed run leaves no server behind."""
    if sys.platform == "linux":
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
