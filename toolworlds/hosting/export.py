"""A toolworld as a standalone API: OpenAI tool list, JSON Schemas of every input and output, OpenAPI 3.1.

Nothing here is written by hand per world: every schema comes from the tools' signatures and return
types, and the OpenAPI document describes the session API that `toolworlds.hosting.http` serves.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, JsonValue, TypeAdapter

from toolworlds.core import ACTION_ADAPTER, ErrorObservation, StepResult, ToolWorld
from toolworlds.episode import Described, Tool
from toolworlds.hosting.sessions import PublicTask, ScoreReport
from toolworlds.tool import JSON_SCHEMA_DIALECT, QuietSchema

OPENAPI_REF = "#/components/schemas/{model}"
LOCAL_REF = "#/$defs/{model}"


class CreateSession(BaseModel):
    model_config = ConfigDict(extra="forbid")  # a misspelt option (`hint`) is refused, not silently ignored

    seed: int = Field(description="Which task: the same seed always gives the same task.")
    include_hint: bool = Field(default=False, description="Return the privileged hint with the task.")


class SessionCreated(BaseModel):
    session_id: str
    task: PublicTask


class SessionView(BaseModel):
    session_id: str
    task: PublicTask
    steps: int
    done: bool
    failure: str | None = Field(default=None, description="How the world's own code failed, if the episode ended so.")


class FinishRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    answer: str | None = Field(default=None, description="The answer, when the task asks a question.")


class Snapshot(BaseModel):
    """What `ToolWorld.snapshot` returns."""

    task: dict[str, JsonValue]
    steps: int
    done: bool
    answer: str | None
    state: dict[str, JsonValue]


class Health(BaseModel):
    status: str
    world: str
    sessions: int


def _ref(name: str) -> dict[str, str]:
    return {"$ref": OPENAPI_REF.format(model=name)}


def _schema(source: type[BaseModel] | TypeAdapter[Any], ref_template: str) -> dict[str, Any]:
    adapter = source if isinstance(source, TypeAdapter) else TypeAdapter(source)
    return adapter.json_schema(ref_template=ref_template, schema_generator=QuietSchema)


def _hoist(schema: dict[str, Any], into: dict[str, Any]) -> dict[str, Any]:
    """Move `schema`'s `$defs` into the shared `into`, refusing two different schemas with one name."""
    for name, definition in schema.pop("$defs", {}).items():
        if into.setdefault(name, definition) != definition:
            raise ValueError(f"two different schemas are both named {name!r}; rename one model")
    return schema


def tool_output_schema(spec: Tool, ref_template: str = LOCAL_REF, defs: dict[str, Any] | None = None) -> Any:
    """What a call of `spec` can observe: its result, or the error observation every tool may give."""
    shared = {} if defs is None else defs
    result = _hoist(spec.output_schema_with_refs(ref_template), shared)
    error = _hoist(_schema(ErrorObservation, ref_template), shared)
    shared.setdefault("ErrorObservation", error)
    schema: dict[str, Any] = {"anyOf": [result, {"$ref": ref_template.format(model="ErrorObservation")}]}
    if defs is None:
        schema["$defs"] = shared
    return schema


def standalone_schemas(world: Described | type[ToolWorld[Any]]) -> dict[str, dict[str, Any]]:
    """`<tool>.input.json` and `<tool>.output.json` for every tool: self-contained draft 2020-12 documents."""
    files: dict[str, dict[str, Any]] = {}
    for spec in world.tools():
        for kind, schema in (("input", spec.input_schema), ("output", tool_output_schema(spec))):
            files[f"{spec.name}.{kind}.json"] = {
                "$schema": JSON_SCHEMA_DIALECT,
                "$id": f"urn:spadework:{world.name}:{spec.name}:{kind}",
                "title": f"{world.name}.{spec.name} {kind}",
                **schema,
            }
    return files


def openapi_document(world: Described | type[ToolWorld[Any]]) -> dict[str, Any]:
    """OpenAPI 3.1 for the session API: create a session for a seed, call tools, finish, read the score."""
    components: dict[str, Any] = {}

    def ref(source: type[BaseModel] | TypeAdapter[Any], name: str) -> dict[str, str]:
        components.setdefault(name, _hoist(_schema(source, OPENAPI_REF), components))
        return _ref(name)

    error = ref(ErrorObservation, "ErrorObservation")
    step = ref(StepResult, "StepResult")

    def respond(status: int, description: str, schema: dict[str, Any] | None) -> dict[str, Any]:
        body: dict[str, Any] = {"description": description}
        if schema is not None:
            body["content"] = {"application/json": {"schema": schema}}
        return {str(status): body}

    def errors(*statuses: int) -> dict[str, Any]:
        reasons = {
            400: "The body is not JSON.",
            404: "No such session.",
            409: "The episode has ended (`episode_over`), or ended when the world's code failed (`episode_failed`).",
            413: "The body is larger than the server reads (`--max-body-bytes`).",
            422: "The body does not match the schema; `fields` names each problem.",
            500: "The world's own code failed (`world_error`, naming the method and the error; the episode ends), "
            "or the server did (`server_error`, naming the error).",
            503: "Too many live sessions.",
        }
        return {k: v for status in statuses for k, v in respond(status, reasons[status], error).items()}

    def body(schema: dict[str, Any], required: bool = True) -> dict[str, Any]:
        """A JSON body; an optional one may be left out, which the server reads as `{}`."""
        return {"required": required, "content": {"application/json": {"schema": schema}}}

    session_param = [{"name": "session_id", "in": "path", "required": True, "schema": {"type": "string"}}]
    paths: dict[str, Any] = {
        "/health": {"get": {"operationId": "health", "summary": "Liveness.", "responses": {
            **respond(200, "Alive.", ref(Health, "Health"))}}},
        "/tools": {"get": {"operationId": "list_tools", "summary": "The tools as an OpenAI function list.",
                           "responses": respond(200, "Tools.", {"type": "array", "items": {"type": "object"}})}},
        "/sessions": {"post": {
            "operationId": "create_session", "summary": "Start an episode for a seed; returns the task.",
            "requestBody": body(ref(CreateSession, "CreateSession")),
            "responses": {**respond(201, "Created.", ref(SessionCreated, "SessionCreated")),
                          **errors(400, 413, 422, 500, 503)},
        }},
        "/sessions/{session_id}": {
            "parameters": session_param,
            "get": {"operationId": "get_session", "summary": "The session's task and progress.",
                    "responses": {**respond(200, "The session.", ref(SessionView, "SessionView")), **errors(404)}},
            "delete": {"operationId": "delete_session", "summary": "Forget the session.",
                       "responses": {**respond(204, "Deleted.", None), **errors(404)}},
        },
        "/sessions/{session_id}/step": {"parameters": session_param, "post": {
            "operationId": "step", "summary": "Gym-style step with any action; bad tool calls come back as error "
            "observations, exactly as an in-process agent sees them.",
            "requestBody": body(ref(ACTION_ADAPTER, "Action")),
            "responses": {**respond(200, "The step.", step), **errors(400, 404, 409, 413, 422, 500)},
        }},
        "/sessions/{session_id}/finish": {"parameters": session_param, "post": {
            "operationId": "finish", "summary": "End the episode (with the answer, if the task asked a question).",
            "requestBody": body(ref(FinishRequest, "FinishRequest"), required=False),
            "responses": {**respond(200, "The final step; `reward` is the score.", step),
                          **errors(400, 404, 409, 413, 422, 500)},
        }},
        "/sessions/{session_id}/score": {"parameters": session_param, "get": {
            "operationId": "get_score", "summary": "The score of the state as it is now.",
            "responses": {**respond(200, "The score.", ref(ScoreReport, "ScoreReport")), **errors(404, 500)},
        }},
        "/sessions/{session_id}/snapshot": {"parameters": session_param, "get": {
            "operationId": "get_snapshot", "summary": "Privileged: the whole episode as JSON, hidden state included, "
            "for debugging. Never show it to the agent.",
            "responses": {**respond(200, "The snapshot.", ref(Snapshot, "Snapshot")), **errors(404, 500)},
        }},
    }  # fmt: skip
    for spec in world.tools():
        arguments = f"{spec.name}_arguments"
        components[arguments] = _hoist(spec.input_schema_with_refs(OPENAPI_REF), components)
        step_schema = _hoist(_schema(StepResult, OPENAPI_REF), components)
        step_schema["properties"]["observation"] = tool_output_schema(spec, OPENAPI_REF, components)
        step_schema["title"] = f"{spec.name}_step"
        components[f"{spec.name}_step"] = step_schema
        paths[f"/sessions/{{session_id}}/tools/{spec.name}"] = {
            "parameters": session_param,
            "post": {
                "operationId": f"tool_{spec.name}",
                "summary": spec.description.split("\n", 1)[0],
                "description": spec.description,
                "tags": ["tools"],
                "requestBody": body(_ref(arguments), required=bool(spec.required_arguments)),
                "responses": {
                    **respond(200, "The step: the tool's result or its refusal.", _ref(f"{spec.name}_step")),
                    **errors(400, 409, 413, 422, 500),
                    **respond(404, "No such session (`unknown_session`) or tool (`unknown_tool`).", error),
                },
            },
        }
    paths["/openapi.json"] = {"get": {"operationId": "openapi", "summary": "This document.",
                                      "responses": respond(200, "OpenAPI 3.1.", {"type": "object"})}}  # fmt: skip
    other = respond(405, "A method the path does not take; every error is an `ErrorObservation`.", error)["405"]
    for operations in paths.values():
        for name, operation in operations.items():
            if name != "parameters":
                operation["responses"]["default"] = other
    return {
        "openapi": "3.1.0",
        "info": {
            "title": f"spadework toolworld: {world.name}",
            "version": "1",
            "description": (world.description or "").strip(),
        },
        "paths": paths,
        "components": {"schemas": components},
    }


def export_world(world: Described | type[ToolWorld[Any]], out: Path) -> list[Path]:
    """Write `tools.json`, `schemas/*.json` and `openapi.json` under `out`; return the paths written."""
    documents: dict[str, Any] = {
        "tools.json": world.openai_tools(),
        "openapi.json": openapi_document(world),
        **{f"schemas/{name}": schema for name, schema in standalone_schemas(world).items()},
    }
    written = []
    for relative, document in documents.items():
        path = out / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(document, indent=2, sort_keys=False) + "\n")
        written.append(path)
    return written
