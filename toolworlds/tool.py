"""The `@tool` decorator: a method's signature and docstring become its JSON Schema.

A tool is written once, as a plain method with type hints and a Google-style docstring. Everything else
(the argument validator, the input and output JSON Schemas, the OpenAI function entry) is derived from it,
so the schema an agent sees can never drift from the code that runs.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal, TypeVar

import docstring_parser
import jsonschema_rs
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError as SchemaError
from jsonschema.exceptions import best_match
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, create_model
from pydantic.json_schema import GenerateJsonSchema
from typing_extensions import TypedDict  # the one pydantic can read before Python 3.12

F = TypeVar("F", bound=Callable[..., Any])

_TOOL_MARK = "__spadework_tool__"
JSON_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"


class QuietSchema(GenerateJsonSchema):
    """Pydantic's generator without per-field titles: they repeat the property name and cost tokens."""

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False


class ArgumentProblem(BaseModel):
    """One thing wrong with one argument, named so an agent can fix it."""

    field: str
    problem: str


def tool(method: F) -> F:
    """Mark a method of a `ToolWorld` as a tool the agent may call."""
    setattr(method, _TOOL_MARK, True)
    return method


def is_tool(obj: object) -> bool:
    return callable(obj) and getattr(obj, _TOOL_MARK, False) is True


@dataclass(frozen=True)
class ToolSpec:
    """Everything known about one tool, derived from its method."""

    name: str
    description: str
    arguments: type[BaseModel]
    returns: TypeAdapter[Any]
    method_name: str

    # Cached: generating a schema costs ~0.2 ms, and the engine sends the tool list with every request.
    # The dicts are shared, so callers must not mutate them.
    @cached_property
    def input_schema(self) -> dict[str, Any]:
        return self.input_schema_with_refs("#/$defs/{model}")

    @cached_property
    def output_schema(self) -> dict[str, Any]:
        return self.output_schema_with_refs("#/$defs/{model}")

    def input_schema_with_refs(self, ref_template: str) -> dict[str, Any]:
        """The input schema, with `$ref`s built from `ref_template` (OpenAPI wants its own)."""
        schema = self.arguments.model_json_schema(ref_template=ref_template, schema_generator=QuietSchema)
        schema.pop("title", None)
        return schema

    def output_schema_with_refs(self, ref_template: str) -> dict[str, Any]:
        return self.returns.json_schema(ref_template=ref_template, schema_generator=QuietSchema)

    def openai_function(self) -> OpenAITool:
        """The entry for an OpenAI-style `tools` list."""
        return openai_function(self.name, self.description, self.input_schema)

    def validate(self, arguments: object) -> tuple[BaseModel | None, list[ArgumentProblem]]:
        """Parse arguments; on failure return the problems, one per named field."""
        if not isinstance(arguments, dict):
            kind = type(arguments).__name__
            return None, [ArgumentProblem(field="(arguments)", problem=f"must be a JSON object, got {kind}")]
        # The JSON Schema the agent was shown is the contract, so it decides what is valid ("5" is not an
        # integer, 20.0 is); pydantic then converts, and checks what a schema cannot say. The compiled Rust
        # validator answers "valid?" in a fraction of a microsecond; only arguments it refuses pay for the
        # Python validator, which names every problem (and has the last word).
        not_text = _not_unicode(arguments)
        if not_text is not None:  # a lone surrogate (`"\\ud83d"`, half an emoji): no text can hold it
            return None, [ArgumentProblem(field=not_text, problem="is not valid Unicode text (a lone surrogate)")]
        problems = [] if self._input_is_valid(arguments) else schema_problems(self._input_validator, arguments)
        if problems:
            return None, problems
        try:
            return self.arguments.model_validate(arguments), []
        except ValidationError as error:
            return None, problems_in(error)

    @cached_property
    def required_arguments(self) -> tuple[str, ...]:
        return tuple(self.input_schema.get("required", ()))

    @cached_property
    def _input_validator(self) -> Draft202012Validator:
        return Draft202012Validator(self.input_schema)

    @cached_property
    def _input_is_valid(self) -> Callable[[object], bool]:
        # Formats are annotations in Draft 2020-12 and the Python validator checks none: neither does this.
        validator = jsonschema_rs.validator_for(self.input_schema, validate_formats=False)
        return validator.is_valid

    def dump_result(self, value: object) -> Any:
        """The JSON form of a tool's return value, as its output schema describes it."""
        return self.returns.dump_python(value, mode="json")


def _not_unicode(value: object, path: str = "") -> str | None:
    """Where in a decoded JSON value a string (or key) is not valid Unicode text, or None. JSON's escapes can
    spell a lone surrogate, which no UTF-8 encoder (the validators', the store's, a server's) accepts."""
    if isinstance(value, str):
        try:
            value.encode()
        except UnicodeEncodeError:
            return path or "(arguments)"
    elif isinstance(value, dict):
        for key, item in value.items():
            where = f"{path}.{key}" if path else str(key)
            found = _not_unicode(key, where) or _not_unicode(item, where)
            if found is not None:
                return found.encode(errors="backslashreplace").decode()
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found = _not_unicode(item, f"{path}[{index}]")
            if found is not None:
                return found
    return None


class OpenAIFunction(TypedDict):
    name: str
    description: str
    parameters: dict[str, Any]  # the tool's input JSON Schema


class OpenAITool(TypedDict):
    """A tool as offered to a model: one entry of OpenAI's `tools` list."""

    type: Literal["function"]
    function: OpenAIFunction


def openai_function(name: str, description: str, parameters: dict[str, Any]) -> OpenAITool:
    """One entry of an OpenAI-style `tools` list: for a `ToolSpec`, and for a sandboxed world's schemas."""
    return {"type": "function", "function": {"name": name, "description": description, "parameters": parameters}}


# How an agent ends an episode (a `Finish` action), offered beside a world's own tools wherever it plays.
FINISH_TOOL = "finish"
FINISH_FUNCTION: OpenAITool = openai_function(
    FINISH_TOOL,
    "End the task. Give `answer` when the task asks a question.",
    {
        "type": "object",
        "properties": {"answer": {"type": "string", "description": "The answer to the task's question."}},
        "additionalProperties": False,
    },
)


def schema_problems(validator: Draft202012Validator, arguments: dict[str, Any]) -> list[ArgumentProblem]:
    """What a tool's input schema finds wrong with `arguments`, one problem per argument."""
    problems: dict[str, ArgumentProblem] = {}
    for error in validator.iter_errors(arguments):
        for problem in _named(error):
            problems.setdefault(problem.field, problem)  # one per field: a bad enum is also a bad type
    return list(problems.values())


def listing(problems: list[ArgumentProblem]) -> str:
    """Problems as one line for an error message: `amount: ...; to_account_id: ...`."""
    return "; ".join(f"{problem.field}: {problem.problem}" for problem in problems)


def problems_in(error: ValidationError) -> list[ArgumentProblem]:
    """One named problem per failed field of a pydantic validation error."""
    return [_describe(e) for e in error.errors(include_url=False)]


def _named(error: SchemaError) -> list[ArgumentProblem]:
    """A JSON Schema validation error as problems that each name one argument."""
    where = ".".join(str(part) for part in error.absolute_path)
    prefix = f"{where}." if where else ""
    if error.validator == "required" and isinstance(error.instance, dict):
        required = error.validator_value if isinstance(error.validator_value, list) else []
        missing = [name for name in required if name not in error.instance]
        return [ArgumentProblem(field=prefix + name, problem="required argument is missing") for name in missing]
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        known = error.schema.get("properties", {}) if isinstance(error.schema, dict) else {}
        return [
            ArgumentProblem(field=prefix + name, problem="unknown argument")
            for name in error.instance
            if name not in known
        ]
    if error.validator in ("anyOf", "oneOf") and error.context:
        error = best_match(error.context)
    return [ArgumentProblem(field=where or "(arguments)", problem=error.message)]


def _describe(error: Any) -> ArgumentProblem:
    field = ".".join(str(part) for part in error["loc"]) or "(arguments)"
    kind = error["type"]
    if kind == "missing":
        problem = "required argument is missing"
    elif kind == "extra_forbidden":
        problem = "unknown argument"
    else:
        problem = f"{error['msg']} (got {error['input']!r})"
    return ArgumentProblem(field=field, problem=problem)


# Pydantic string rules that change a value rather than check it: the schema would promise one thing and
# validation do another (measured: " " passes `minLength: 1`, then fails once stripped).
_SILENT_TRANSFORMS = ("strip_whitespace", "to_lower", "to_upper")


def build_spec(method: Callable[..., Any]) -> ToolSpec:
    """Derive a `ToolSpec` from a method; raise `TypeError` naming what is missing."""
    name = method.__name__
    where = f"tool {method.__qualname__}"
    doc = docstring_parser.parse(inspect.getdoc(method) or "")
    if not doc.short_description:
        raise TypeError(f"{where}: needs a docstring; its first line is the description the agent reads")
    described = {param.arg_name: (param.description or "").strip() for param in doc.params}
    hints = typing.get_type_hints(method, include_extras=True)
    if "return" not in hints:
        raise TypeError(f"{where}: needs a return annotation; it becomes the output schema")

    fields: dict[str, Any] = {}
    for param in list(inspect.signature(method).parameters.values())[1:]:
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise TypeError(f"{where}: *args/**kwargs cannot be described by a schema")
        if param.name not in hints:
            raise TypeError(f"{where}: argument '{param.name}' needs a type annotation")
        if not described.get(param.name):
            raise TypeError(f"{where}: argument '{param.name}' needs a line under 'Args:' in the docstring")
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[param.name] = (hints[param.name], Field(default, description=described[param.name]))

    description = doc.short_description
    if doc.long_description:
        description = f"{description}\n\n{doc.long_description}"
    arguments = create_model(f"{name}_arguments", __config__=ConfigDict(extra="forbid"), **fields)
    for field, info in arguments.model_fields.items():
        hidden = [key for key in _SILENT_TRANSFORMS for rule in info.metadata if getattr(rule, key, None)]
        if hidden:
            raise TypeError(
                f"{where}: argument '{field}' uses {hidden[0]}, which its JSON Schema cannot show the agent; "
                "validate with a pattern and normalise inside the tool instead"
            )
    return ToolSpec(
        name=name,
        description=description,
        arguments=arguments,
        returns=TypeAdapter(hints["return"]),
        method_name=method.__name__,
    )
