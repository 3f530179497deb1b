"""`spadework vllm` and `VLLMServer` without vLLM installed: what a user sees when it is missing or fails to start,
and the start, ready and stop protocol, against a stand-in interpreter in place of vLLM's environment (the real
server is tested in test_vllm.py, `just test-vllm`)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import httpx
import pytest

from engine.child_server import ServerStartError
from engine.vllm_server import INSTALLED_MARKER, VLLMServer, VLLMSettings
from tests.servers import SPADEWORK

# Stands in for `python -m vllm.entrypoints.openai.api_server ...`: /health on the port it is given, until SIGTERM.
STAND_IN = textwrap.dedent(
    """
    import http.server, signal, sys
    arguments = sys.argv[1:]
    port = int(arguments[arguments.index("--port") + 1])
    print("stand-in for", arguments[1], "serving", arguments[arguments.index("--model") + 1], flush=True)

    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200 if self.path == "/health" else 404)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", port), Health)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    server.serve_forever()
    """
)


def fake_home(tmp_path: Path, body: str) -> Path:
    """A vLLM environment whose interpreter runs `body` (a shell script's lines)."""
    home = tmp_path / "vllm-home"
    (home / "bin").mkdir(parents=True)
    python = home / "bin" / "python"
    python.write_text(f"#!/bin/sh\n{body}\n")
    python.chmod(0o755)
    (home / INSTALLED_MARKER).write_text("stand-in\n")
    return home


def checkpoint(tmp_path: Path) -> Path:
    directory = tmp_path / "checkpoint"
    directory.mkdir()
    (directory / "config.json").write_text("{}")
    return directory


def test_a_missing_vllm_names_the_command_that_installs_it(tmp_path: Path) -> None:
    env = {"SPADEWORK_VLLM_HOME": str(tmp_path / "nowhere"), "PATH": "/usr/bin:/bin"}
    completed = subprocess.run([*SPADEWORK, "vllm", "--model", str(checkpoint(tmp_path)), "--port", "0"],
                               capture_output=True, text=True, timeout=60, env=env)  # fmt: skip
    assert completed.returncode == 2
    assert "vLLM is not installed in" in completed.stderr and "just vllm" in completed.stderr


def test_a_directory_that_is_not_a_checkpoint_is_refused(tmp_path: Path) -> None:
    completed = subprocess.run([*SPADEWORK, "vllm", "--model", str(tmp_path)], capture_output=True, text=True,
                               timeout=60)  # fmt: skip
    assert completed.returncode == 2 and "holds no config.json" in completed.stderr


def test_vllm_failing_at_start_is_one_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPADEWORK_VLLM_HOME", str(fake_home(tmp_path, "echo 'no such model' >&2; exit 3")))
    with pytest.raises(ServerStartError, match="vLLM exited with 3 while starting"):
        VLLMServer(VLLMSettings(model=checkpoint(tmp_path)), start_timeout_s=60).start()


def test_the_server_reports_ready_and_stops_on_sigterm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    script = tmp_path / "stand_in.py"
    script.write_text(STAND_IN)
    home = fake_home(tmp_path, f'exec {sys.executable} {script} "$@"')
    monkeypatch.setenv("SPADEWORK_VLLM_HOME", str(home))
    model = checkpoint(tmp_path)
    server = VLLMServer(VLLMSettings(model=model, max_lora_rank=8), start_timeout_s=60)
    url = server.start()
    assert url.startswith("http://127.0.0.1:") and url.endswith("/v1")
    assert httpx.get(url.removesuffix("/v1") + "/health", timeout=5).status_code == 200
    assert server.settings.port == int(url.rsplit(":", 1)[1].removesuffix("/v1"))  # a restart keeps the port
    assert server.stop() == 0, "SIGTERM reaches vLLM and the wrapper exits cleanly"
    with pytest.raises(httpx.HTTPError):
        httpx.get(url.removesuffix("/v1") + "/health", timeout=2)
