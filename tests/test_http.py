"""The HTTP session API on a real uvicorn server: whole tasks, schema-checked responses, clear errors."""

from __future__ import annotations

import json
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from jsonschema import Draft202012Validator

from tests.servers import SPADEWORK, OpenAPIContract
from toolworlds.core import Finish, ToolCall, replay
from toolworlds.hosting.export import export_world
from toolworlds.hosting.serving import launched
from toolworlds.registry import builtin_worlds

WORLDS = builtin_worlds()


class Client:
    """An HTTP client that checks every response against the exported OpenAPI document and schemas."""

    def __init__(self, url: str, export_dir: Path) -> None:
        self.http = httpx.Client(base_url=url, timeout=30)
        self.contract = OpenAPIContract(json.loads((export_dir / "openapi.json").read_text()))
        self.schemas = export_dir / "schemas"

    def request(self, method: str, path: str, template: str, body: Any = None, raw: bytes | None = None) -> Any:
        response = self.http.request(method, path, json=body if raw is None else None, content=raw)
        payload = response.json() if response.content else None
        self.contract.check(method, template, response.status_code, payload)
        self.last_status = response.status_code
        return payload

    def call_tool(self, session: str, name: str, arguments: dict[str, Any]) -> Any:
        step = self.request(
            "POST", f"/sessions/{session}/tools/{name}", f"/sessions/{{session_id}}/tools/{name}", arguments
        )
        if self.last_status == 200:
            schema = json.loads((self.schemas / f"{name}.output.json").read_text())
            Draft202012Validator(schema).validate(step["observation"])
        return step


@pytest.fixture(scope="module", params=sorted(WORLDS))
def client(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Client]:
    name = request.param
    export_dir = tmp_path_factory.mktemp(f"export-{name}")
    export_world(WORLDS[name], export_dir)
    with launched(name) as url:
        yield Client(url, export_dir)


def _plan(world_name: str, seed: int) -> list[ToolCall | Finish]:
    world = WORLDS[world_name]()
    world.reset(seed)
    return world.solution()


def _world_of(client: Client) -> str:
    return str(client.request("GET", "/health", "/health")["world"])


def _play(client: Client, session: str, plan: list[ToolCall | Finish]) -> dict[str, Any]:
    for action in plan:
        if isinstance(action, ToolCall):
            step = client.call_tool(session, action.name, action.arguments)
            assert client.last_status == 200 and "error" not in step["info"], step
        else:
            last: dict[str, Any] = client.request(
                "POST", f"/sessions/{session}/finish", "/sessions/{session_id}/finish", {"answer": action.answer}
            )
            return last
    raise AssertionError("plan did not finish")


def test_oracle_plays_whole_tasks_over_http(client: Client) -> None:
    name = _world_of(client)
    for seed in range(12):
        created = client.request("POST", "/sessions", "/sessions", {"seed": seed})
        assert client.last_status == 201 and created["task"]["hint"] is None
        session = created["session_id"]
        last = _play(client, session, _plan(name, seed))
        assert last["terminated"] and last["reward"] == 1.0
        score = client.request("GET", f"/sessions/{session}/score", "/sessions/{session_id}/score")
        assert score["score"] == 1.0 and score["done"]
        snapshot = client.request("GET", f"/sessions/{session}/snapshot", "/sessions/{session_id}/snapshot")
        reference = WORLDS[name]()
        replay(reference, seed, _plan(name, seed))
        assert snapshot == json.loads(json.dumps(reference.snapshot()))


def test_sessions_are_isolated(client: Client) -> None:
    name = _world_of(client)
    first = client.request("POST", "/sessions", "/sessions", {"seed": 5, "include_hint": True})["session_id"]
    second = client.request("POST", "/sessions", "/sessions", {"seed": 5})["session_id"]
    assert first != second
    _play(client, first, _plan(name, 5))
    untouched = client.request("GET", f"/sessions/{second}/score", "/sessions/{session_id}/score")
    assert untouched == {"score": 0.0, "done": False, "steps": 0, "scorecard": untouched["scorecard"]}
    assert _play(client, second, _plan(name, 5))["reward"] == 1.0


def test_errors_are_clear_4xx(client: Client) -> None:
    name = _world_of(client)
    session = client.request("POST", "/sessions", "/sessions", {"seed": 1})["session_id"]
    tool = next(spec for spec in WORLDS[name].tools() if spec.input_schema.get("required"))
    template = f"/sessions/{{session_id}}/tools/{tool.name}"

    missing = client.request("POST", f"/sessions/nope/tools/{tool.name}", template, {})
    assert client.last_status == 404 and missing["error"]["code"] == "unknown_session"
    assert "'nope'" in missing["error"]["message"]

    broken = client.request("POST", f"/sessions/{session}/tools/{tool.name}", template, raw=b"{not json")
    assert client.last_status == 400 and broken["error"]["code"] == "invalid_json"
    no_args = next(spec.name for spec in WORLDS[name].tools() if not spec.required_arguments)
    stray = client.request("POST", f"/sessions/{session}/tools/{no_args}", f"/sessions/{{session_id}}/tools/{no_args}",
                           raw=b"\x0c")  # fmt: skip
    assert client.last_status == 400 and stray["error"]["code"] == "invalid_json", "a form feed is not JSON whitespace"

    not_object = client.request("POST", f"/sessions/{session}/tools/{tool.name}", template, [1, 2])
    assert client.last_status == 422 and "JSON object" in not_object["error"]["message"]

    required = tool.input_schema["required"][0]
    wrong = client.request("POST", f"/sessions/{session}/tools/{tool.name}", template, {required: {"a": 1}})
    assert client.last_status == 422
    assert wrong["error"]["fields"][0]["field"] == required and required in wrong["error"]["message"]

    bad_seed = client.request("POST", "/sessions", "/sessions", {"seed": "three"})
    assert client.last_status == 422 and bad_seed["error"]["fields"][0]["field"] == "seed"

    unknown_tool = client.http.post(f"/sessions/{session}/tools/teleport", json={})
    assert unknown_tool.status_code == 404 and unknown_tool.json()["error"]["code"] == "unknown_tool"

    progress = client.request("GET", f"/sessions/{session}", "/sessions/{session_id}")
    assert progress["steps"] == 0, "requests refused at the door do not spend the agent's steps"


def test_generic_step_reports_bad_calls_as_observations(client: Client) -> None:
    session = client.request("POST", "/sessions", "/sessions", {"seed": 2})["session_id"]
    template = "/sessions/{session_id}/step"
    step = client.request("POST", f"/sessions/{session}/step", template, {"kind": "tool_call", "name": "teleport"})
    assert client.last_status == 200 and step["observation"]["error"]["code"] == "unknown_tool"
    bad = client.request("POST", f"/sessions/{session}/step", template, {"kind": "jump"})
    assert client.last_status == 422 and bad["error"]["code"] == "invalid_request"
    done = client.request("POST", f"/sessions/{session}/step", template, {"kind": "finish"})
    assert done["terminated"] and done["reward"] == 0.0
    again = client.request("POST", f"/sessions/{session}/finish", "/sessions/{session_id}/finish", {})
    assert client.last_status == 409 and again["error"]["code"] == "episode_over"
    client.request("DELETE", f"/sessions/{session}", "/sessions/{session_id}")
    assert client.last_status == 204
    client.request("GET", f"/sessions/{session}", "/sessions/{session_id}")
    assert client.last_status == 404


def test_served_documents_match_the_export(client: Client) -> None:
    name = _world_of(client)
    assert client.http.get("/openapi.json").json() == client.contract.document
    assert client.http.get("/tools").json() == WORLDS[name].openai_tools()


def test_a_taken_port_fails_with_one_clear_line() -> None:
    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", 0))
        blocker.listen()
        port = blocker.getsockname()[1]
        result = subprocess.run(
            [*SPADEWORK, "toolworld", "serve", "banking", "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert result.returncode != 0
    assert f"port {port} on 127.0.0.1 is already in use" in result.stderr


def test_hostile_bodies_get_json_errors_with_fitting_statuses(client: Client) -> None:
    session = client.request("POST", "/sessions", "/sessions", {"seed": 1})["session_id"]
    wrong = client.request("PUT", f"/sessions/{session}/score", "/sessions/{session_id}/score")  # documented
    assert client.last_status == 405 and wrong["error"]["code"] == "method_not_allowed"
    document = client.request("GET", "/openapi.json", "/openapi.json")
    assert client.last_status == 200 and document["openapi"] == "3.1.0"
    real = client.request("GET", "/tools", "/tools")[0]["function"]["name"]  # its path documents a tool's 404s
    no_tool = client.request("POST", f"/sessions/{session}/tools/teleport", f"/sessions/{{session_id}}/tools/{real}")
    assert client.last_status == 404 and no_tool["error"]["code"] == "unknown_tool"
    template = "/sessions/{session_id}/step"
    nested = client.request("POST", f"/sessions/{session}/step", template, raw=b"[" * 100_000)
    assert client.last_status == 400 and nested["error"]["code"] == "invalid_json"
    assert "nested too deeply" in nested["error"]["message"]
    big = b'{"kind": "finish", "answer": "' + b"x" * 2_000_000 + b'"}'
    refused = client.request("POST", f"/sessions/{session}/step", template, raw=big)
    assert client.last_status == 413 and refused["error"]["code"] == "body_too_large"
    streamed = client.http.post(f"/sessions/{session}/step", content=iter([b"[" + b" " * 600_000] * 2))
    assert streamed.status_code == 413 and streamed.json()["error"]["code"] == "body_too_large"  # no length given
    progress = client.request("GET", f"/sessions/{session}", "/sessions/{session_id}")
    assert progress["steps"] == 0 and not progress["done"], "a refused body changes nothing"


class GradeRaises(WORLDS["banking"]):  # type: ignore[misc, valid-type]
    """A world whose scorer has a bug."""

    def grade(self) -> Any:
        raise KeyError("balance")


def test_a_world_that_raises_ends_its_episode_in_a_defined_state() -> None:
    from starlette.testclient import TestClient

    from toolworlds.hosting.http import create_app

    with TestClient(create_app(GradeRaises, max_body_bytes=3_000_000)) as http:
        session = http.post("/sessions", json={"seed": 1}).json()["session_id"]
        scored = http.get(f"/sessions/{session}/score")
        assert scored.status_code == 500 and scored.json()["error"]["code"] == "world_error"
        message = scored.json()["error"]["message"]
        assert message.startswith("the world's grade raised KeyError: 'balance' (in grade, test_http.py line "), message
        tool = next(spec.name for spec in GradeRaises.tools() if not spec.required_arguments)
        after = http.post(f"/sessions/{session}/tools/{tool}", json={})
        assert after.status_code == 409 and after.json()["error"]["code"] == "episode_failed"
        assert "grade raised KeyError" in after.json()["error"]["message"]
        viewed = http.get(f"/sessions/{session}").json()
        assert viewed["done"] is True and viewed["failure"].startswith("the world's grade raised KeyError")
        other = http.post("/sessions", json={"seed": 2}).json()["session_id"]
        finished = http.post(f"/sessions/{other}/finish", json={})
        assert finished.status_code == 500 and "step raised KeyError: 'balance' (in grade" in finished.text
        roomy = http.post(
            f"/sessions/{other}/step", content=b'{"kind": "finish", "answer": "' + b"x" * 2_000_000 + b'"}'
        )
        assert roomy.status_code == 409, "a limit raised with --max-body-bytes lets a 2 MB body through"


def test_an_unexpected_error_is_a_json_500_and_the_connection_stays_open() -> None:
    """Starlette's handler for `Exception` re-raised after answering, and uvicorn then reset the connection:
    a pooled client's next request failed after every 500."""
    with launched("tests/worlds/flawed.py:NaNState") as url, httpx.Client(base_url=url) as http:
        session = http.post("/sessions", json={"seed": 1}).json()["session_id"]
        for _ in range(5):
            broken = http.get(f"/sessions/{session}/snapshot")
            assert broken.status_code == 500 and broken.json()["error"]["code"] == "server_error"
            assert "ValueError" in broken.json()["error"]["message"]
            assert http.get("/health").status_code == 200  # on the same connection
