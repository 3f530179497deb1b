"""Reminders keyed by int ids, six at most. The zh class has two methods the en one lacks."""

from __future__ import annotations

from typing import Any, ClassVar

from benchmarks.acebench.data import Language
from benchmarks.acebench.scenarios.base import BaseApi, is_false
from benchmarks.acebench.scenarios.catalogue import start_data

APP = "ReminderApi"


class ReminderApi(BaseApi):
    """`mark_as_notified` and `search_reminders` exist only in the reference's zh class; neither is in any task's
    API docs, but an agent can still call them there, so they are kept (zh only)."""

    ONLY_IN: ClassVar[dict[str, Language]] = {"mark_as_notified": "zh", "search_reminders": "zh"}

    def __init__(self, language: Language = "en") -> None:
        super().__init__(language)
        start = start_data(language, APP)
        self.max_capacity: int = start["max_capacity"]
        self.reminder_list: dict[Any, dict[str, Any]] = {int(key): item for key, item in start["reminder_list"].items()}
        self.reminder_id_counter: int = start["reminder_id_counter"]

    def view_reminder_by_title(self, title: Any) -> dict[str, Any]:
        if is_false(self.logged_in):
            return self._status(False, APP, "view_not_logged_in")
        for reminder in self.reminder_list.values():
            if reminder["title"] == title:
                return {"status": True, "reminder": reminder}
        return self._status(False, APP, "title_missing", title=title)

    def add_reminder(self, title: Any, description: Any, time: Any) -> dict[str, Any]:
        if is_false(self.logged_in):
            return self._status(False, APP, "add_not_logged_in")
        if len(self.reminder_list) >= self.max_capacity:
            return self._status(False, APP, "full")
        self.reminder_id_counter += 1
        reminder_id = self.reminder_id_counter
        self.reminder_list[reminder_id] = {
            "reminder_id": reminder_id, "title": title, "description": description, "time": time, "notified": False
        }  # fmt: skip
        return self._status(True, APP, "added", title=title)

    def delete_reminder(self, reminder_id: Any) -> dict[str, Any]:
        if is_false(self.logged_in):
            return self._status(False, APP, "delete_not_logged_in")
        if reminder_id not in self.reminder_list:
            return self._status(False, APP, "id_missing")
        del self.reminder_list[reminder_id]
        return self._status(True, APP, "deleted", reminder_id=reminder_id)

    def view_all_reminders(self) -> dict[str, Any]:
        """No login check, unlike the other reminder methods."""
        if not self.reminder_list:
            return self._status(False, APP, "none")
        fields = ("title", "description", "time", "notified")
        return {
            "status": True,
            "reminders": [{name: item[name] for name in fields} for item in self.reminder_list.values()],
        }

    def mark_as_notified(self, reminder_id: Any) -> dict[str, Any]:
        if reminder_id not in self.reminder_list:
            return self._status(False, APP, "id_missing")
        self.reminder_list[reminder_id]["notified"] = True
        return self._status(True, APP, "marked", reminder_id=reminder_id)

    def search_reminders(self, keyword: Any) -> dict[str, Any]:
        """A match formats its time with `.strftime`, but times are strings here, so any match raises
        AttributeError, as the reference's does."""
        found = []
        for item in self.reminder_list.values():
            if keyword.lower() in item["title"].lower() or keyword.lower() in item["description"].lower():
                found.append(
                    {"title": item["title"], "description": item["description"],
                     "time": item["time"].strftime("%Y-%m-%d %H:%M")}
                )  # fmt: skip
        if not found:
            return self._status(False, APP, "no_keyword_match")
        return {"status": True, "reminders": found}
