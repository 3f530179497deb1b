"""Find a toolworld class by name: built-ins, installed plugins, `path/to/file.py:Class` or `path/to/spec.json`."""

from __future__ import annotations

import importlib
import importlib.util
import sys
import traceback
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from toolworlds.core import ToolWorld
from toolworlds.spec import SpecError
from toolworlds.spec_compile import compile_spec_file

WorldClass = type[ToolWorld[Any]]
PLUGIN_GROUP = "spadework.toolworlds"


class UnknownWorldError(LookupError):
    pass


def builtin_worlds() -> dict[str, WorldClass]:
    from toolworlds.reference.banking import BankingWorld
    from toolworlds.reference.orders import OrdersWorld
    from toolworlds.reference.ticketing import TicketingWorld

    return {world.name: world for world in (BankingWorld, TicketingWorld, OrdersWorld)}


def available_worlds() -> dict[str, WorldClass]:
    """Built-in worlds plus those other packages register under the `spadework.toolworlds` entry point."""
    worlds = builtin_worlds()
    for entry in entry_points(group=PLUGIN_GROUP):
        worlds.setdefault(entry.name, _check(entry.load(), f"entry point {entry.name!r}"))
    return worlds


def registered_names() -> set[str]:
    """The names `load_world` knows without a path: the built-in worlds and the plugins' (none loaded)."""
    return set(builtin_worlds()) | {entry.name for entry in entry_points(group=PLUGIN_GROUP)}


def load_world(spec: str) -> WorldClass:
    """A registered name, `package.module:Class`, `path/to/file.py:Class`, or a spec file `path/to/world.json`."""
    worlds = available_worlds()
    if spec in worlds:
        return worlds[spec]
    if spec.endswith(".json"):
        return _compiled(Path(spec))
    if ":" not in spec:
        known = ", ".join(sorted(worlds))
        raise UnknownWorldError(f"no toolworld named {spec!r}; known: {known} (or give module:Class)")
    location, _, attribute = spec.rpartition(":")
    module = _import_file(Path(location)) if location.endswith(".py") else _import_module(location)
    if not hasattr(module, attribute):
        raise UnknownWorldError(f"{location} has no attribute {attribute!r}")
    return _check(getattr(module, attribute), spec)


def is_model_written(spec: str) -> bool:
    """A bare `.py` path names model-written code (run only in the sandbox); `file.py:Class` a trusted world."""
    return spec.endswith(".py") and ":" not in spec


def world_in_file(path: Path) -> WorldClass:
    """The one ToolWorld subclass a trusted `.py` file defines (imported in this process)."""
    module = _import_file(path)
    found = [v for v in vars(module).values() if isinstance(v, type) and issubclass(v, ToolWorld)
             and v.__module__ == module.__name__]  # fmt: skip
    if len(found) != 1:
        raise UnknownWorldError(f"{path} defines {len(found)} ToolWorld subclasses; name one as {path}:Class")
    return found[0]


def _compiled(path: Path) -> WorldClass:
    """A spec file compiled in this process: trusted code reading data, so no sandbox is needed."""
    if not path.is_file():
        raise UnknownWorldError(f"no such file: {path}")
    try:
        return compile_spec_file(path)
    except SpecError as error:
        raise UnknownWorldError(f"{path} is not a valid toolworld spec: {error}") from error


def _import_file(path: Path) -> Any:
    if not path.is_file():
        raise UnknownWorldError(f"no such file: {path}")
    name = f"spadework_user_world_{path.stem}"
    module_spec = importlib.util.spec_from_file_location(name, path)
    if module_spec is None or module_spec.loader is None:
        raise UnknownWorldError(f"cannot import {path}")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[name] = module
    try:
        module_spec.loader.exec_module(module)
    except Exception as error:  # the file's own code: a syntax error, an import it lacks, a raise at import
        del sys.modules[name]
        raise UnknownWorldError(f"{path} could not be imported: {_first_line(error)}") from error
    return module


def _import_module(location: str) -> Any:
    try:
        return importlib.import_module(location)
    except ModuleNotFoundError as error:
        if error.name is not None and (location + ".").startswith(
            error.name + "."
        ):  # the module named, not one it imports
            raise UnknownWorldError(
                f"no module named {location!r} (a world is NAME, module:Class or file.py)"
            ) from None
        raise UnknownWorldError(f"{location} could not be imported: {_first_line(error)}") from error
    except Exception as error:
        raise UnknownWorldError(f"{location} could not be imported: {_first_line(error)}") from error


def _first_line(error: BaseException) -> str:
    """`SyntaxError: invalid syntax (world.py, line 3)`: the error, where the code that raised it is."""
    frames = [frame for frame in traceback.extract_tb(error.__traceback__) if "importlib" not in frame.filename]
    where = f" ({Path(frames[-1].filename).name}, line {frames[-1].lineno})" if frames else ""
    return f"{type(error).__name__}: {error}{where}"


def _check(candidate: object, where: str) -> WorldClass:
    if not (isinstance(candidate, type) and issubclass(candidate, ToolWorld)):
        raise UnknownWorldError(f"{where} is not a ToolWorld subclass")
    return candidate
