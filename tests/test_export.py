"""`spadework toolworld export`: the files a user outside spadework needs, all valid."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator
from openapi_spec_validator import validate
from typer.testing import CliRunner

from spadework.cli import app
from toolworlds.registry import builtin_worlds

WORLDS = builtin_worlds()


@pytest.mark.parametrize("name", sorted(WORLDS))
def test_export_writes_valid_tools_schemas_and_openapi(name: str, tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["toolworld", "export", name, "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    world = WORLDS[name]

    assert json.loads((tmp_path / "tools.json").read_text()) == world.openai_tools()

    for spec in world.tools():
        for kind in ("input", "output"):
            schema = json.loads((tmp_path / "schemas" / f"{spec.name}.{kind}.json").read_text())
            assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
            Draft202012Validator.check_schema(schema)
        output = json.loads((tmp_path / "schemas" / f"{spec.name}.output.json").read_text())
        Draft202012Validator(output).validate({"error": {"code": "not_found", "message": "no such thing"}})

    document = json.loads((tmp_path / "openapi.json").read_text())
    validate(document)
    assert document["openapi"] == "3.1.0"
    for spec in world.tools():
        operation = document["paths"][f"/sessions/{{session_id}}/tools/{spec.name}"]["post"]
        body = operation["requestBody"]["content"]["application/json"]["schema"]
        assert body == {"$ref": f"#/components/schemas/{spec.name}_arguments"}
        assert set(operation["responses"]) == {"200", "400", "404", "409", "413", "422", "500", "default"}
    for path in ("/sessions", "/sessions/{session_id}/finish", "/sessions/{session_id}/score"):
        assert path in document["paths"]


def test_output_schema_rejects_what_the_tool_cannot_return(tmp_path: Path) -> None:
    CliRunner().invoke(app, ["toolworld", "export", "banking", "--out", str(tmp_path)])
    schema = json.loads((tmp_path / "schemas" / "get_account.output.json").read_text())
    validator = Draft202012Validator(schema)
    assert not validator.is_valid({"account_id": "A-1"})
    assert not validator.is_valid({"error": "a bare string is not the error shape"})
