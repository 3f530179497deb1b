"""A food-delivery platform: user accounts with balances, six merchants and their menus, and orders."""

from __future__ import annotations

from typing import Any

from benchmarks.acebench.data import Language
from benchmarks.acebench.scenarios.base import BaseApi, is_false
from benchmarks.acebench.scenarios.catalogue import start_data

APP = "FoodPlatform"


class FoodPlatform(BaseApi):
    """Two behaviours differ by language, as in the reference: an order that costs exactly the balance goes
    through in en and is refused in zh (`>` vs `>=`), and zh `search_orders` calls `.lower()` on an order's item
    dicts, so it raises AttributeError whenever it has to look past the merchant name of an order with items."""

    def __init__(self, language: Language = "en") -> None:
        super().__init__(language)
        start = start_data(language, APP)
        self.users: dict[str, dict[str, Any]] = start["users"]
        self.merchant_list: dict[str, dict[str, Any]] = start["merchant_list"]
        self.logged_in_users: Any = start["logged_in_users"]
        self.orders: list[dict[str, Any]] = start["orders"]

    def _load_scenario(self, scenario: dict[str, Any]) -> None:
        """Also sets the logged-in users, so the second (BaseApi) config of an episode resets them to []."""
        super()._load_scenario(scenario)
        self.logged_in_users = scenario.get("logged_in_users", [])

    def login_food_platform(self, username: Any, password: Any) -> dict[str, Any]:
        if is_false(self.wifi):
            return self._status(False, APP, "wifi_off")
        if username not in self.users:
            return self._status(False, APP, "user_missing")
        if self.users[username]["password"] != password:
            return self._status(False, APP, "wrong_password")
        if username in self.logged_in_users:
            return self._status(False, APP, "already_logged_in", username=username)
        self.logged_in_users.append(username)
        return self._status(True, APP, "logged_in", username=username)

    def view_logged_in_users(self) -> dict[str, Any]:
        if not self.logged_in_users:
            return self._status(False, APP, "nobody_logged_in")
        return {"status": True, "logged_in_users": self.logged_in_users}

    def check_balance(self, user_name: Any) -> Any:
        """A bare number (0.0 for an unknown user; the reference also prints a line nobody reads)."""
        if user_name in self.users:
            return self.users[user_name]["balance"]
        return 0.0

    def add_food_delivery_order(self, username: Any, merchant_name: Any, items: Any) -> dict[str, Any]:
        if username not in self.logged_in_users:
            return self._status(False, APP, "not_logged_in", username=username)
        if merchant_name not in self.merchant_list:
            return self._status(False, APP, "merchant_missing")
        total_price = 0.0
        ordered = []
        for item in items:
            product_name, quantity = item.get("product"), item.get("quantity", 1)
            if not isinstance(quantity, int) or quantity <= 0:
                return self._status(False, APP, "invalid_quantity", quantity=quantity, product_name=product_name)
            entry = next(
                (dish for dish in self.merchant_list[merchant_name]["menu"] if dish["product"] == product_name), None
            )
            if entry is None:
                return self._status(
                    False, APP, "product_missing", product_name=product_name, merchant_name=merchant_name
                )
            total_price += entry["price"] * quantity
            ordered.append({"product": product_name, "quantity": quantity, "price_per_unit": entry["price"]})
        balance = self.users[username]["balance"]
        if total_price > balance or (self._language == "zh" and total_price == balance):
            return self._status(False, APP, "insufficient_balance")
        self.users[username]["balance"] -= total_price
        self.orders.append(
            {"user_name": username, "merchant_name": merchant_name, "items": ordered, "total_price": total_price}
        )
        return self._status(True, APP, "ordered", merchant_name=merchant_name, total_price=total_price)

    def get_products(self, merchant_name: Any) -> Any:
        """The menu list itself, or a status dict for an unknown merchant."""
        merchant = self.merchant_list.get(merchant_name)
        if merchant:
            return merchant["menu"]
        return self._status(False, APP, "unknown_merchant", merchant_name=merchant_name)

    def view_orders(self, user_name: Any) -> dict[str, Any]:
        mine = [order for order in self.orders if order["user_name"] == user_name]
        if not mine:
            return self._status(False, APP, "no_orders")
        return {"status": True, "orders": mine}

    def search_orders(self, keyword: Any) -> dict[str, Any]:
        found = [order for order in self.orders if self._order_matches(order, keyword)]
        if not found:
            return self._status(False, APP, "no_matching_orders")
        return {"status": True, "orders": found}

    def _order_matches(self, order: dict[str, Any], keyword: Any) -> bool:
        if keyword.lower() in order["merchant_name"].lower():
            return True
        if self._language == "zh":  # the zh reference lowers the item dict itself
            return any(keyword.lower() in item.lower() for item in order.get("items", []))
        return any(keyword.lower() in item["product"].lower() for item in order.get("items", []))
