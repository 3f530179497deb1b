"""One episode's apps, and running calls on them the way ACEBench's executor (`execute_agent_func_call`) does.

What the reference does, and this reproduces:
* every involved class is built fresh and loaded twice, with its own entry of `initial_config` and then with the
  `BaseApi` entry, so the BaseApi config is what every phone app ends up with;
* a method name goes to every app that has it, in `involved_classes` order (`turn_on_wifi` turns Wi-Fi on in
  each phone app), and the call's result is the last app's;
* a name no app has repeats the previous result of the batch, or, first in a batch, fails with the
  UnboundLocalError the reference's loop raises;
* multi_turn: the first exception aborts the batch (earlier calls keep their effects) and the whole reply is the
  literal "Error during execution: {str(e)}" (its f-prefix is missing upstream), and that turn does not count as
  one that produced state; multi_step: the error text is that call's result and the batch goes on;
* results become text after the whole batch ran (a dict as JSON, anything else with `str`), so a result that is
  live app data shows the batch's last word on it; the agent is then shown each text JSON-decoded where it
  decodes.
Unlike the reference, instances live on this object, not in module globals (there they are keyed by model and
task number only, so two runs of one task in a process share their apps).
"""

from __future__ import annotations

import copy
import inspect
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from benchmarks.acebench.calls import Call, CallSyntaxError, batch_text, call_text, parse_calls
from benchmarks.acebench.data import AceTask, DataError
from benchmarks.acebench.prompts import undecodable_reply
from benchmarks.acebench.scenarios import SAVED_ATTRIBUTES, SCENARIO_CLASSES, Scenario

ERROR_PREFIX = "Error during execution: "
MULTI_TURN_ERROR = "Error during execution: {str(e)}"  # verbatim: the reference forgot the f-prefix
UNBOUND_RESULT = "cannot access local variable 'func_call_result' where it is not associated with a value"

__all__ = [
    "ERROR_PREFIX",
    "MULTI_TURN_ERROR",
    "AceBackends",
    "Call",
    "CallSyntaxError",
    "batch_text",
    "call_text",
    "parse_calls",
]


class _Unset:
    """No call of the batch has produced a result yet."""


UNSET = _Unset()


class AceBackends:
    """The apps of one episode of one task, and its record of whether the reference would dump their state."""

    def __init__(self, task: AceTask) -> None:
        self.task = task
        self._instances: dict[str, Scenario] = {name: _build(name, task) for name in task.involved_classes}
        self._routes = _routes(self._instances, task)
        self._collected = False  # has a turn returned the instances (so that the reference records them)?

    @property
    def instances(self) -> Mapping[str, Scenario]:
        return self._instances

    def targets(self, name: str) -> list[str]:
        """The classes a call of `name` runs on, in order."""
        return [route.app for route in self._routes.get(name, [])]

    def execute(self, calls: Sequence[Call]) -> list[str]:
        """Run one agent turn's calls; one result text per call, or multi_turn's single abort text."""
        results: list[Any] = []
        last: Any = UNSET
        for name, arguments in calls:
            try:
                for route in self._routes.get(name, []):
                    last = route.method(**copy.deepcopy(arguments))  # fresh values per app, as `eval` of source gives
                if last is UNSET:
                    raise UnboundLocalError(UNBOUND_RESULT)
                results.append(last)
            except Exception as error:
                if self.task.kind == "multi_turn":
                    return [MULTI_TURN_ERROR]
                results.append(f"{ERROR_PREFIX}{error}")
        self._collected = True
        return [_as_text(result) for result in results]

    def execution_message(self, results: list[str]) -> list[Any]:
        """What the agent is shown for a turn's results: each text JSON-decoded where it decodes. multi_turn's
        abort text arrives upstream as a bare string and is iterated, so the agent sees it one character a time."""
        items: list[str] = list(MULTI_TURN_ERROR) if self._aborted(results) else results
        shown: list[Any] = []
        for item in items:
            try:
                shown.append(json.loads(item))
            except (ValueError, RecursionError):
                shown.append(item)
        return shown

    def respond(self, text: str) -> list[Any] | str:
        """The execution role's reply to an agent message routed to it: parse, run, show. multi_step answers text it
        cannot parse with its fixed request to stop asking (and runs nothing); multi_turn never routes such text
        here (see `prompts.agent_recipient`), so it raises CallSyntaxError."""
        try:
            calls = parse_calls(text)
        except CallSyntaxError:
            if self.task.kind == "multi_step":
                return undecodable_reply(self.task.language)
            raise
        return self.execution_message(self.execute(calls))

    def state(self) -> dict[str, dict[str, Any]]:
        """Each app's saved attributes after a JSON round trip (int keys become strings), like the ground truth.
        Empty until a turn has produced state: the reference records no apps from aborted multi_turn turns or
        from multi_step text it could not parse, so an episode without such a turn has no end state at all."""
        if not self._collected:
            return {}
        dump = {name: _saved(name, instance) for name, instance in self._instances.items()}
        try:
            text = json.dumps(dump)
        except (TypeError, ValueError):  # the reference would fail writing its result file; keep what can be kept
            text = json.dumps(_jsonable(dump))
        loaded: dict[str, dict[str, Any]] = json.loads(text)
        return loaded

    def _aborted(self, results: list[str]) -> bool:
        return self.task.kind == "multi_turn" and results == [MULTI_TURN_ERROR]


def _build(name: str, task: AceTask) -> Scenario:
    if name not in SCENARIO_CLASSES:
        raise DataError(f"{task.key}: involved class {name!r} is not one of {', '.join(SCENARIO_CLASSES)}")
    instance = SCENARIO_CLASSES[name](task.language)
    config = task.initial_config
    instance._load_scenario(copy.deepcopy(config.get(name, {})))
    instance._load_scenario(copy.deepcopy(config.get("BaseApi", {})))
    return instance


class Route(NamedTuple):
    app: str
    method: Callable[..., Any]


def _routes(instances: Mapping[str, Scenario], task: AceTask) -> dict[str, list[Route]]:
    """Public method name -> the bound methods of every app that has one, in `involved_classes` order."""
    routes: dict[str, list[Route]] = {}
    for app, instance in instances.items():
        for name, method in inspect.getmembers(instance, predicate=inspect.ismethod):
            if name.startswith("_") or instance.ONLY_IN.get(name, task.language) != task.language:
                continue
            routes.setdefault(name, []).append(Route(app, method))
    return routes


def _saved(name: str, instance: Scenario) -> dict[str, Any]:
    attributes = vars(instance)
    return {attribute: attributes[attribute] for attribute in SAVED_ATTRIBUTES[name] if attribute in attributes}


def _as_text(result: Any) -> str:
    if type(result) is str:
        return result
    if type(result) is dict:
        try:
            return json.dumps(result)
        except Exception:  # the reference falls back to str() on anything json cannot write
            return str(result)
    return str(result)


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {key if isinstance(key, str | int | float | bool) or key is None else repr(key): _jsonable(item)
                for key, item in value.items()}  # fmt: skip
    if isinstance(value, list | tuple):
        return [_jsonable(item) for item in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return repr(value)
