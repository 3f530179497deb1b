"""The phone every phone app runs on: Wi-Fi and device login, which the apps check before they act."""

from __future__ import annotations

from typing import Any, ClassVar

from benchmarks.acebench.data import Language
from benchmarks.acebench.scenarios.catalogue import phrase


def is_false(flag: Any) -> bool:
    """The reference tests `flag == False`, so 0 counts as off and None does not; `not flag` would differ."""
    return bool(flag == False)  # noqa: E712


class BaseApi:
    """Wi-Fi and the device login. Every phone app is one of these and keeps its own copy of both flags, which is
    why the executor sends `turn_on_wifi` to every app of an episode and not just to one."""

    ONLY_IN: ClassVar[dict[str, Language]] = {}  # method -> the one language whose class has it

    def __init__(self, language: Language = "en") -> None:
        self._language: Language = language
        self.wifi: Any = False
        self.logged_in: Any = True

    def _load_scenario(self, scenario: dict[str, Any]) -> None:
        """Applied twice per episode: with the app's own config, then with the BaseApi one (which wins)."""
        self.wifi = scenario.get("wifi", False)
        self.logged_in = scenario.get("logged_in", True)

    def _say(self, app: str, key: str, **fields: Any) -> str:
        return phrase(self._language, app, key, **fields)

    def _status(self, ok: bool, app: str, key: str, **fields: Any) -> dict[str, Any]:
        return {"status": ok, "message": self._say(app, key, **fields)}

    def turn_on_wifi(self) -> dict[str, Any]:
        self.wifi = True
        return self._status(True, "BaseApi", "wifi_on")

    def login_device(self) -> dict[str, Any]:
        self.logged_in = True
        return self._status(True, "BaseApi", "device_logged_in")
