"""An airline: users with cash and bank balances, a fixed flight table, and reservations.

The reference's rules are kept as they are, oddities included, because the end state is compared against
answers produced by them: authentication failure is not caught before booking (the error dict has no
membership level, so booking raises KeyError('membership_level')), an unknown flight number raises TypeError,
seats can go below zero, a cancellation refunds into cash and leaves the reservation in place, and its clock
is fixed at 2024-07-14 06:00.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, ClassVar

from benchmarks.acebench.data import Language
from benchmarks.acebench.scenarios.catalogue import phrase, start_data, term

APP = "Travel"
BAG_FEE = 50  # per checked bag over the free allowance
CANCEL_FEE = 0.1  # of the fare, when cancelling less than a day ahead
NOW = datetime(2024, 7, 14, 6, 0, 0)  # cancel_reservation's clock
TIME_FORMAT = "%Y-%m-%d %H:%M:%S"
FLIGHT_FIELDS = (
    "flight_no", "origin", "destination", "depart_time", "arrival_time", "status", "seats_available",
    "economy_price", "business_price",
)  # fmt: skip


class Travel:
    """Not a phone app: it has no Wi-Fi, ignores its initial config, and all its methods are callable, helpers
    such as `update_balance` and `process_refund` included (the reference exposes every public method)."""

    ONLY_IN: ClassVar[dict[str, Language]] = {}

    def __init__(self, language: Language = "en") -> None:
        self._language: Language = language
        start = start_data(language, APP)
        self.users: dict[str, dict[str, Any]] = start["users"]
        self.flights: list[dict[str, Any]] = start["flights"]
        self.reservations: list[dict[str, Any]] = start["reservations"]
        self._free_bags: dict[str, dict[str, int]] = start["free_bags"]
        self._economy = term(language, APP, "economy")
        self._business = term(language, APP, "business")
        self._airline_reason = term(language, APP, "airline_cancellation_reason")

    def _load_scenario(self, scenario: dict[str, Any]) -> None:
        """Travel takes nothing from the config."""

    def _say(self, key: str, **fields: Any) -> str:
        return phrase(self._language, APP, key, **fields)

    def _error(self, key: str) -> dict[str, Any]:
        return {"status": "error", "message": self._say(key)}

    def _fare(self, flight: dict[str, Any], cabin: Any) -> Any:
        """Anything but the economy cabin's name is charged the business fare."""
        return flight["economy_price"] if cabin == self._economy else flight["business_price"]

    def _reservation(self, user_id: Any, reservation_id: Any) -> dict[str, Any] | None:
        matches = (r for r in self.reservations if r["reservation_id"] == reservation_id and r["user_id"] == user_id)
        return next(matches, None)

    def _flight(self, flight_no: Any, available_only: bool = False) -> dict[str, Any] | None:
        """The first flight with that number (CZ1765 and MH2616 each appear twice in the table)."""
        matches = (
            f
            for f in self.flights
            if f["flight_no"] == flight_no and (not available_only or f["status"] == "available")
        )
        return next(matches, None)

    def _available_legs(self, origin: Any, destination: Any) -> list[dict[str, Any]]:
        return [
            flight
            for flight in self.flights
            if flight["origin"] == origin and flight["destination"] == destination and flight["status"] == "available"
        ]

    def get_flight_details(self, origin: Any = None, destination: Any = None) -> Any:
        flights = self.flights
        if origin:
            flights = [flight for flight in flights if flight["origin"] == origin]
        if destination:
            flights = [flight for flight in flights if flight["destination"] == destination]
        if len(flights) == 0:
            return self._say("no_direct_flights")
        return [{name: flight[name] for name in FLIGHT_FIELDS} for flight in flights]

    def get_user_details(self, user_id: Any, password: Any) -> dict[str, Any]:
        user = self.users.get(user_id)
        if user and user["password"] == password:
            return {key: value for key, value in user.items() if key != "password"}
        return self._error("bad_credentials")

    def get_reservation_details(self, reservation_id: Any = None, user_id: Any = None) -> Any:
        if reservation_id:
            chosen = [r for r in self.reservations if r["reservation_id"] == reservation_id]
        elif user_id:
            chosen = [r for r in self.reservations if r["user_id"] == user_id]
        else:
            return self._error("reservation_query_missing")
        return [{**reservation, "flight_info": self._flight(reservation["flight_no"])} for reservation in chosen]

    def authenticate_user(self, user_id: Any, password: Any) -> dict[str, Any]:
        """The user record itself (password included) or an error dict, which is just as truthy."""
        user = self.users.get(user_id)
        if user and user["password"] == password:
            return user
        return self._error("bad_credentials")

    def get_baggage_allowance(self, membership_level: Any, cabin_class: Any) -> Any:
        return self._free_bags.get(membership_level, {}).get(cabin_class, 0)

    def find_transfer_flights(self, origin_city: Any, transfer_city: Any, destination_city: Any) -> Any:
        """Pairs of available legs via the transfer city where the first lands before the second leaves."""
        pairs = []
        for first in self._available_legs(origin_city, transfer_city):
            lands = datetime.strptime(first["arrival_time"], TIME_FORMAT)
            for second in self._available_legs(transfer_city, destination_city):
                if lands < datetime.strptime(second["depart_time"], TIME_FORMAT):
                    pairs.append({"first_leg": first, "second_leg": second})
        return pairs if pairs else self._say("no_transfer_flights")

    def calculate_baggage_fee(self, membership_level: Any, cabin_class: Any, baggage_count: Any) -> Any:
        """Raises KeyError for an unknown level or cabin (the allowance lookup is strict here)."""
        free = self._free_bags[membership_level][cabin_class]
        return max(baggage_count - free, 0) * BAG_FEE

    def update_balance(self, user: Any, payment_method: Any, amount: Any) -> bool:
        """Adds `amount` to the user's cash or bank balance unless that would go negative; other methods: no-op."""
        for method, field in (("cash", "cash_balance"), ("bank", "bank_balance")):
            if payment_method == method:
                if user[field] + amount < 0:
                    return False
                user[field] += amount
                break
        return True

    def reserve_flight(
        self, user_id: Any, password: Any, flight_no: Any, cabin: Any, payment_method: Any, baggage_count: Any
    ) -> str:
        user = self.authenticate_user(user_id, password)
        if not user:
            return self._say("auth_failed")
        flight = self._flight(flight_no, available_only=True)
        if flight is None:
            raise TypeError("'NoneType' object is not subscriptable")  # the reference indexes the missing flight
        total_cost = self._fare(flight, cabin)
        total_cost += self.calculate_baggage_fee(user["membership_level"], cabin, baggage_count)
        if payment_method not in ["cash", "bank"]:
            return self._say("invalid_payment")
        field = "cash_balance" if payment_method == "cash" else "bank_balance"
        account: Any = self.users.get(user_id)
        if total_cost > account[field]:
            return self._say(f"{payment_method}_insufficient")
        account[field] -= total_cost
        flight["seats_available"] -= 1
        reservation_id = f"res_{len(self.reservations) + 1}"
        self.reservations.append(
            {"reservation_id": reservation_id, "user_id": user_id, "flight_no": flight_no,
             "payment_method": payment_method, "cabin": cabin, "baggage": baggage_count}
        )  # fmt: skip
        return self._say("booked", reservation_id=reservation_id, total_cost=total_cost)

    def modify_flight(
        self,
        user_id: Any,
        reservation_id: Any,
        new_flight_no: Any = None,
        new_cabin: Any = None,
        add_baggage: Any = 0,
        new_payment_method: Any = None,
    ) -> str:
        """Changes are applied in order (flight, cabin, bags); a cabin change is kept even when it cannot be
        paid, and the price difference uses the fares of the flight the reservation had before."""
        reservation = self._reservation(user_id, reservation_id)
        if not reservation:
            return self._say("reservation_not_found")
        current_flight = self._flight(reservation["flight_no"])
        if not current_flight:
            return self._say("flight_not_found")
        payment_method = new_payment_method if new_payment_method else reservation["payment_method"]
        user = self.users[user_id]
        if not user:
            return self._say("user_not_found")
        notes = []
        if new_flight_no and new_flight_no != reservation["flight_no"]:
            new_flight = self._flight(new_flight_no)
            same_route = new_flight and all(new_flight[end] == current_flight[end] for end in ("origin", "destination"))
            if not same_route:
                return self._say("flight_change_failed")
            reservation["flight_no"] = new_flight_no
            notes.append(self._say("flight_changed"))
        if new_cabin and new_cabin != reservation.get("cabin"):
            difference = self.calculate_price_difference(current_flight, reservation["cabin"], new_cabin)
            reservation["cabin"] = new_cabin
            if difference > 0:
                paid = self.update_balance(user, payment_method, -difference)
                notes.append(self._say("cabin_paid", amount=difference) if paid else self._say("cabin_unpaid"))
            elif difference < 0:
                self.update_balance(user, payment_method, -difference)
                notes.append(self._say("cabin_refunded", amount=-difference))
        if add_baggage > 0:
            free = self.get_baggage_allowance(user["membership_level"], reservation["cabin"])
            total_bags = reservation.get("baggage", 0) + add_baggage
            cost = max(0, total_bags - free) * BAG_FEE
            if cost > 0:
                paid = self.update_balance(user, payment_method, -cost)
                notes.append(self._say("baggage_paid", amount=cost) if paid else self._say("baggage_unpaid"))
            reservation["baggage"] = total_bags
        return " ".join(notes) if notes else self._say("modified_free")

    def cancel_reservation(self, user_id: Any, reservation_id: Any, reason: Any) -> str:
        user = self.users.get(user_id, None)
        if not user:
            return self._say("invalid_user")
        reservation = self._reservation(user_id, reservation_id)
        if not reservation:
            return self._say("invalid_reservation")
        flight = self._flight(reservation["flight_no"])
        if not flight:
            return self._say("invalid_flight")
        departs = datetime.strptime(flight["depart_time"], TIME_FORMAT)
        if departs < NOW:
            return self._say("segment_used")
        fare = self._fare(flight, reservation["cabin"])
        if reason == self._airline_reason:
            self.process_refund(user, fare)
            return self._say("airline_cancelled", refund=fare)
        if departs - NOW > timedelta(days=1):
            self.process_refund(user, fare)
            return self._say("free_cancellation", refund=fare)
        fee = fare * CANCEL_FEE
        self.process_refund(user, fare - fee)
        return self._say("fee_cancellation", fee=fee, refund=fare - fee)

    def process_refund(self, user: Any, amount: Any) -> None:
        """Into cash, whatever was paid with. The reference then prints the user's name, so a record without
        "user_name" raises KeyError after the balance has changed."""
        user["cash_balance"] += amount
        _ = user["user_name"]  # what the reference's print reads

    def calculate_price_difference(self, flight: Any, old_cabin: Any, new_cabin: Any) -> Any:
        fares = {self._economy: flight["economy_price"], self._business: flight["business_price"]}
        return fares.get(new_cabin, 0) - fares.get(old_cabin, 0)
