"""Text messages between six people, in an inbox of six at most (so sending first needs a delete)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from benchmarks.acebench.data import Language
from benchmarks.acebench.scenarios.base import BaseApi, is_false
from benchmarks.acebench.scenarios.catalogue import start_data

APP = "MessageApi"


class MessageApi(BaseApi):
    """The inbox is keyed by int message ids. Messages sent in an episode carry no "time", so the time-based
    lookups raise KeyError('time') once one has been sent, as in the reference."""

    def __init__(self, language: Language = "en") -> None:
        super().__init__(language)
        start = start_data(language, APP)
        self.max_capacity: int = start["max_capacity"]
        self.user_list: dict[str, dict[str, Any]] = start["user_list"]
        self.inbox: dict[Any, dict[str, Any]] = {int(key): message for key, message in start["inbox"].items()}
        self.message_id_counter: int = start["message_id_counter"]

    def _user_id(self, name: Any) -> Any:
        return self.user_list[name]["user_id"]

    def send_message(self, sender_name: Any, receiver_name: Any, message: Any) -> dict[str, Any]:
        if is_false(self.logged_in):
            return self._status(False, APP, "send_not_logged_in")
        if is_false(self.wifi):
            return self._status(False, APP, "send_wifi_off")
        if len(self.inbox) >= self.max_capacity:
            return self._status(False, APP, "inbox_full")
        if sender_name not in self.user_list or receiver_name not in self.user_list:
            return self._status(False, APP, "sender_or_receiver_missing")
        sender_id, receiver_id = self._user_id(sender_name), self._user_id(receiver_name)
        self.message_id_counter += 1
        self.inbox[self.message_id_counter] = {"sender_id": sender_id, "receiver_id": receiver_id, "message": message}
        return self._status(True, APP, "sent", receiver_name=receiver_name)

    def delete_message(self, message_id: Any) -> dict[str, Any]:
        if is_false(self.logged_in):
            return self._status(False, APP, "delete_not_logged_in")
        if message_id not in self.inbox:
            return self._status(False, APP, "message_id_missing")
        del self.inbox[message_id]
        return self._status(True, APP, "deleted", message_id=message_id)

    def view_messages_between_users(self, sender_name: Any, receiver_name: Any) -> dict[str, Any]:
        if is_false(self.logged_in):
            return self._status(False, APP, "view_not_logged_in")
        if sender_name not in self.user_list:
            return self._status(False, APP, "sender_missing")
        if receiver_name not in self.user_list:
            return self._status(False, APP, "receiver_missing")
        sender_id, receiver_id = self._user_id(sender_name), self._user_id(receiver_name)
        found = [
            {"id": key, "sender": sender_name, "receiver": receiver_name, "message": message["message"]}
            for key, message in self.inbox.items()
            if message["sender_id"] == sender_id and message["receiver_id"] == receiver_id
        ]
        if not found:
            return self._status(False, APP, "no_messages_between")
        return {"status": True, "messages": found}

    def search_messages(self, user_name: Any, keyword: Any) -> dict[str, Any]:
        """No login check here, unlike the other inbox reads."""
        if user_name not in self.user_list:
            return self._status(False, APP, "user_missing")
        user_id = self._user_id(user_name)
        found = [
            {"id": key, "sender_id": message["sender_id"], "receiver_id": message["receiver_id"],
             "message": message["message"]}
            for key, message in self.inbox.items()
            if (message["sender_id"] == user_id or message["receiver_id"] == user_id)
            and keyword.lower() in message["message"].lower()
        ]  # fmt: skip
        if not found:
            return self._status(False, APP, "no_keyword_match")
        return {"status": True, "messages": found}

    def get_all_message_times_with_ids(self) -> dict[Any, Any]:
        if is_false(self.logged_in):
            return self._status(False, APP, "times_not_logged_in")
        return {key: message["time"] for key, message in self.inbox.items()}

    def get_latest_message_id(self) -> dict[str, Any]:
        return self._extreme_message("latest")

    def get_earliest_message_id(self) -> dict[str, Any]:
        return self._extreme_message("earliest")

    def _extreme_message(self, which: str) -> dict[str, Any]:
        """The first message with the latest (or earliest) day; ties keep the lower position in the inbox."""
        if is_false(self.logged_in):
            return self._status(False, APP, f"{which}_not_logged_in")
        if not self.inbox:
            return self._status(False, APP, "inbox_empty")
        best_id, best_day = None, None
        for key, message in self.inbox.items():
            day = datetime.strptime(message["time"], "%Y-%m-%d")
            if best_day is None or (day > best_day if which == "latest" else day < best_day):
                best_id, best_day = key, day
        return {"status": True, "message": self._say(APP, which, message_id=best_id), "message_id": best_id}
