"""`toolworld play` and `export` take a model-written FILE.py and run it only in the sandbox, with the same
results as the trusted path for the same code."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from spadework.cli import app

LIBRARY = "toolworlds/examples/library.py"
runner = CliRunner(env={"NO_COLOR": "1", "COLUMNS": "200"})


@pytest.mark.parametrize("policy", ["oracle", "random"])
def test_a_sandboxed_play_matches_the_trusted_play(policy: str) -> None:
    sandboxed = runner.invoke(app, ["toolworld", "play", LIBRARY, "--seed", "3", "--policy", policy, "--json"])
    trusted = runner.invoke(app, ["toolworld", "play", f"{LIBRARY}:LibraryWorld", "--seed", "3", "--policy", policy,
                                  "--json"])  # fmt: skip
    assert sandboxed.exit_code == 0 and trusted.exit_code == 0, sandboxed.output
    assert json.loads(sandboxed.stdout) == json.loads(trusted.stdout)
    if policy == "oracle":
        assert json.loads(sandboxed.stdout)["score"] == 1.0


def test_a_sandboxed_export_writes_the_same_files(tmp_path: Path) -> None:
    for spec, out in ((LIBRARY, "sandboxed"), (f"{LIBRARY}:LibraryWorld", "trusted")):
        assert runner.invoke(app, ["toolworld", "export", spec, "--out", str(tmp_path / out)]).exit_code == 0
    files = sorted(p.relative_to(tmp_path / "trusted") for p in (tmp_path / "trusted").rglob("*.json"))
    assert len(files) == 6
    for relative in files:
        assert (tmp_path / "sandboxed" / relative).read_text() == (tmp_path / "trusted" / relative).read_text()


def test_a_missing_or_broken_file_is_a_usage_error(tmp_path: Path) -> None:
    missing = runner.invoke(app, ["toolworld", "play", str(tmp_path / "absent.py")])
    assert missing.exit_code == 2 and "no such file" in missing.output
    broken = tmp_path / "broken.py"
    broken.write_text("import os\nos.system('true')\n")
    failed = runner.invoke(app, ["toolworld", "export", str(broken), "--out", str(tmp_path / "x")])
    assert failed.exit_code == 2 and "does not load in the sandbox" in failed.output


def test_a_sandboxed_world_serves_the_session_api() -> None:
    from starlette.testclient import TestClient

    from toolworlds.untrusted.worlds import describe, sandboxed_app

    path = Path(LIBRARY)
    with TestClient(sandboxed_app(path, describe(path))) as client:
        created = client.post("/sessions", json={"seed": 3, "include_hint": True})
        assert created.status_code == 201
        session = created.json()["session_id"]
        assert created.json()["task"]["hint"]
        wanted = created.json()["task"]["instruction"].split("'")[1]
        found = client.post(f"/sessions/{session}/tools/search", json={"title": wanted}).json()
        book = found["observation"][0]["book_id"]
        assert client.post(f"/sessions/{session}/tools/borrow", json={}).status_code == 422  # schema says required
        assert client.post(f"/sessions/{session}/tools/borrow", json={"book_id": book}).status_code == 200
        finished = client.post(f"/sessions/{session}/finish").json()
        assert finished["reward"] == 1.0 and finished["terminated"]
        assert client.post(f"/sessions/{session}/finish").status_code == 409
        assert client.get(f"/sessions/{session}/score").json() == {
            "score": 1.0, "done": True, "steps": 3, "scorecard": "+ borrowed the book"}  # fmt: skip
        assert client.get(f"/sessions/{session}/snapshot").json()["state"]["books"][book]["on_loan"] is True
        assert client.get("/openapi.json").json()["info"]["title"] == "spadework toolworld: library"


def braced_world(tmp_path: Path) -> Path:
    """The library world as a small model writes it: a literal `\\boxed{done}` in an f-string, which fails at
    run time (`NameError: name 'done' is not defined`) unless the repair gate escapes the braces."""
    source = Path(LIBRARY).read_text()
    original = "instruction=f\"Borrow '{self.wanted}' for me.\""
    assert original in source
    path = tmp_path / "braced.py"
    path.write_text(source.replace(original, "instruction=f\"Borrow '{self.wanted}', then say \\\\boxed{done}.\""))
    return path


def test_every_command_runs_the_code_validate_judged(tmp_path: Path) -> None:
    from starlette.testclient import TestClient

    from toolworlds.untrusted.worlds import describe, sandboxed_app

    world = braced_world(tmp_path)
    fixed = tmp_path / "fixed.py"
    validated = runner.invoke(app, ["toolworld", "validate", str(world), "--seeds", "2", "--write-source", str(fixed)])
    assert validated.exit_code == 0, validated.output
    assert "escaped literal braces" in validated.output and "{{done}}" in fixed.read_text()
    played = runner.invoke(app, ["toolworld", "play", str(world), "--seed", "3", "--policy", "oracle", "--json"])
    assert played.exit_code == 0, played.output
    transcript = json.loads(played.stdout)
    assert transcript["score"] == 1.0 and "\\boxed{done}" in json.dumps(transcript)
    with TestClient(sandboxed_app(world, describe(world))) as client:
        created = client.post("/sessions", json={"seed": 3})
        assert created.status_code == 201, created.text
        assert created.json()["task"]["instruction"].endswith("then say \\boxed{done}.")


def test_one_slow_call_ends_its_own_episode_and_the_server_goes_on_serving(tmp_path: Path) -> None:
    """A served world was quarantined by one call past the step deadline: every other session failed and no new
    one could start, while /health said ok. A server ends only that episode."""
    from starlette.testclient import TestClient

    from toolworlds.untrusted.worlds import describe, sandboxed_app

    source = Path(LIBRARY).read_text()
    tool = '''    @tool
    def stall(self) -> str:
        """Think for a long time."""
        while True:
            pass

    @tool
    def search('''
    path = tmp_path / "stalls.py"
    path.write_text(source.replace("    @tool\n    def search(", tool, 1))
    with TestClient(sandboxed_app(path, describe(path))) as client:
        first, second = (client.post("/sessions", json={"seed": seed}).json()["session_id"] for seed in (1, 2))
        stalled = client.post(f"/sessions/{first}/tools/stall", json={})
        assert stalled.status_code == 500 and stalled.json()["error"]["code"] == "world_error"
        assert "WorldTimeout" in stalled.json()["error"]["message"]
        assert client.post(f"/sessions/{first}/finish").status_code == 409  # that episode ended, failed
        assert client.post(f"/sessions/{second}/tools/search", json={"title": "a"}).status_code == 200
        assert client.post("/sessions", json={"seed": 3}).status_code == 201
