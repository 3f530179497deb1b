"""Helpers for tests that talk to the real servers."""

from __future__ import annotations

import sys
from typing import Any

from jsonschema import Draft202012Validator

SPADEWORK = [sys.executable, "-m", "spadework"]


class OpenAPIContract:
    """Checks a response body against the schema an OpenAPI document gives for it."""

    def __init__(self, document: dict[str, Any]) -> None:
        self.document = document

    def check(self, method: str, path: str, status: int, body: Any) -> None:
        operations = self.document["paths"][path]
        responses = operations[method.lower()]["responses"] if method.lower() in operations else {}
        if method.lower() not in operations:  # a method the path does not take: any operation's `default`
            responses = {"default": next(op["responses"]["default"] for op in operations.values() if "responses" in op)}
        listed = str(status) if str(status) in responses else "default"
        assert listed in responses, f"{method} {path} answered {status}, which openapi.json does not list"
        content = responses[listed].get("content")
        if content is None:
            return
        schema = content["application/json"]["schema"]
        Draft202012Validator({"components": self.document["components"], **schema}).validate(body)
