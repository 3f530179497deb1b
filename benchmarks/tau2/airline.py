"""tau2's airline domain: flights, users and reservations, and the 14 tools the agent has over them.

The models keep the official field names, types and order: results are their `model_dump`, so a price is an
int and a gift card's balance a float exactly where the official shows them so, and the database hash covers
the same values. The tools follow the official ones step for step, quirks included (a cancellation does not
free seats, a flight change does not take seats, new ids come from fixed lists, "now" is 2024-05-15 15:00).
"""

from __future__ import annotations

from copy import deepcopy
from typing import Literal

from pydantic import BaseModel, ConfigDict

from benchmarks.tau2.toolkit import Toolkit, calculate, tool

FlightType = Literal["round_trip", "one_way"]
CabinClass = Literal["business", "economy", "basic_economy"]
Insurance = Literal["yes", "no"]
NOW = "2024-05-15T15:00:00"
AIRPORTS = (
    ("SFO", "San Francisco"), ("JFK", "New York"), ("LAX", "Los Angeles"), ("ORD", "Chicago"), ("DFW", "Dallas"),
    ("DEN", "Denver"), ("SEA", "Seattle"), ("ATL", "Atlanta"), ("MIA", "Miami"), ("BOS", "Boston"),
    ("PHX", "Phoenix"), ("IAH", "Houston"), ("LAS", "Las Vegas"), ("MCO", "Orlando"), ("EWR", "Newark"),
    ("CLT", "Charlotte"), ("MSP", "Minneapolis"), ("DTW", "Detroit"), ("PHL", "Philadelphia"), ("LGA", "LaGuardia"),
)  # fmt: skip


class AirportCode(BaseModel):
    iata: str
    city: str


class Name(BaseModel):
    first_name: str
    last_name: str


class Address(BaseModel):
    address1: str
    address2: str | None = None
    city: str
    country: str
    state: str
    zip: str


class Payment(BaseModel):
    payment_id: str
    amount: int


class CreditCard(BaseModel):
    source: Literal["credit_card"]
    id: str
    brand: str
    last_four: str


class GiftCard(BaseModel):
    source: Literal["gift_card"]
    id: str
    amount: float


class Certificate(BaseModel):
    source: Literal["certificate"]
    id: str
    amount: float


class Passenger(BaseModel):
    first_name: str
    last_name: str
    dob: str


class FlightDateStatusAvailable(BaseModel):
    status: Literal["available"]
    available_seats: dict[CabinClass, int]
    prices: dict[CabinClass, int]


class FlightDateStatusLanded(BaseModel):
    status: Literal["landed"]
    actual_departure_time_est: str
    actual_arrival_time_est: str


class FlightDateStatusCancelled(BaseModel):
    status: Literal["cancelled"]


class FlightDateStatusDelayed(BaseModel):
    status: Literal["delayed"]
    estimated_departure_time_est: str
    estimated_arrival_time_est: str


class FlightDataStatusFlying(BaseModel):
    status: Literal["flying"]
    actual_departure_time_est: str
    estimated_arrival_time_est: str


class FlightDataStatusOnTime(BaseModel):
    status: Literal["on time"]
    estimated_departure_time_est: str
    estimated_arrival_time_est: str


FlightDateStatus = (
    FlightDateStatusAvailable
    | FlightDateStatusLanded
    | FlightDateStatusCancelled
    | FlightDateStatusDelayed
    | FlightDataStatusFlying
    | FlightDataStatusOnTime
)


class Flight(BaseModel):
    flight_number: str
    origin: str
    destination: str
    scheduled_departure_time_est: str
    scheduled_arrival_time_est: str
    dates: dict[str, FlightDateStatus]


class DirectFlight(BaseModel):
    flight_number: str
    origin: str
    destination: str
    status: Literal["available"]
    scheduled_departure_time_est: str
    scheduled_arrival_time_est: str
    date: str | None = None
    available_seats: dict[CabinClass, int]
    prices: dict[CabinClass, int]


class ReservationFlight(BaseModel):
    flight_number: str
    origin: str
    destination: str
    date: str
    price: int


class FlightInfo(BaseModel):
    flight_number: str
    date: str


class User(BaseModel):
    user_id: str
    name: Name
    address: Address
    email: str
    dob: str
    payment_methods: dict[str, CreditCard | GiftCard | Certificate]
    saved_passengers: list[Passenger]
    membership: Literal["gold", "silver", "regular"]
    reservations: list[str]


class Reservation(BaseModel):
    reservation_id: str
    user_id: str
    origin: str
    destination: str
    flight_type: FlightType
    cabin: CabinClass
    flights: list[ReservationFlight]
    passengers: list[Passenger]
    payment_history: list[Payment]
    created_at: str
    total_baggages: int
    nonfree_baggages: int
    insurance: Insurance
    status: Literal["cancelled"] | None = None


class FlightDB(BaseModel):
    model_config = ConfigDict(extra="forbid")

    flights: dict[str, Flight]
    users: dict[str, User]
    reservations: dict[str, Reservation]


class AirlineTools(Toolkit):
    """The airline agent's tools (the official `AirlineTools`)."""

    db: FlightDB

    def _get_user(self, user_id: str) -> User:
        if user_id not in self.db.users:
            raise ValueError(f"User {user_id} not found")
        return self.db.users[user_id]

    def _get_reservation(self, reservation_id: str) -> Reservation:
        if reservation_id not in self.db.reservations:
            raise ValueError(f"Reservation {reservation_id} not found")
        return self.db.reservations[reservation_id]

    def _get_flight(self, flight_number: str) -> Flight:
        if flight_number not in self.db.flights:
            raise ValueError(f"Flight {flight_number} not found")
        return self.db.flights[flight_number]

    def _get_flight_instance(self, flight_number: str, date: str) -> FlightDateStatus:
        flight = self._get_flight(flight_number)
        if date not in flight.dates:
            raise ValueError(f"Flight {flight_number} not found on date {date}")
        return flight.dates[date]

    def _get_new_reservation_id(self) -> str:
        for reservation_id in ("HATHAT", "HATHAU", "HATHAV"):
            if reservation_id not in self.db.reservations:
                return reservation_id
        raise ValueError("Too many reservations")

    def _search_direct_flight(self, date: str, origin: str | None = None, destination: str | None = None,
                              leave_after: str | None = None) -> list[DirectFlight]:  # fmt: skip
        results = []
        for flight in self.db.flights.values():
            if (
                (origin is None or flight.origin == origin)
                and (destination is None or flight.destination == destination)
                and (date in flight.dates)
                and (flight.dates[date].status == "available")
                and (leave_after is None or flight.scheduled_departure_time_est >= leave_after)
            ):
                instance = flight.dates[date]
                assert isinstance(instance, FlightDateStatusAvailable)
                results.append(
                    DirectFlight(
                        flight_number=flight.flight_number,
                        origin=flight.origin,
                        destination=flight.destination,
                        status="available",
                        scheduled_departure_time_est=flight.scheduled_departure_time_est,
                        scheduled_arrival_time_est=flight.scheduled_arrival_time_est,
                        available_seats=instance.available_seats,
                        prices=instance.prices,
                    )
                )
        return results

    def _payment_for_update(self, user: User, payment_id: str, total_price: int) -> Payment | None:
        if payment_id not in user.payment_methods:
            raise ValueError("Payment method not found")
        method = user.payment_methods[payment_id]
        if method.source == "certificate":
            raise ValueError("Certificate cannot be used to update reservation")
        elif isinstance(method, GiftCard) and method.amount < total_price:
            raise ValueError("Gift card balance is not enough")
        if isinstance(method, GiftCard):
            method.amount -= total_price
        return Payment(payment_id=payment_id, amount=total_price) if total_price != 0 else None

    @tool(mutates=True)
    def book_reservation(self, user_id, origin, destination, flight_type, cabin, flights, passengers,  # type: ignore[no-untyped-def]
                         payment_methods, total_baggages, nonfree_baggages, insurance) -> Reservation:  # fmt: skip
        if all(isinstance(flight, dict) for flight in flights):
            flights = [FlightInfo(**flight) for flight in flights]
        if all(isinstance(passenger, dict) for passenger in passengers):
            passengers = [Passenger(**passenger) for passenger in passengers]
        if all(isinstance(method, dict) for method in payment_methods):
            payment_methods = [Payment(**method) for method in payment_methods]
        user = self._get_user(user_id)
        reservation_id = self._get_new_reservation_id()
        reservation = Reservation(
            reservation_id=reservation_id,
            user_id=user_id,
            origin=origin,
            destination=destination,
            flight_type=flight_type,
            cabin=cabin,
            flights=[],
            passengers=deepcopy(passengers),
            payment_history=deepcopy(payment_methods),
            created_at=NOW,
            total_baggages=total_baggages,
            nonfree_baggages=nonfree_baggages,
            insurance=insurance,
        )
        total_price = 0
        instances: list[FlightDateStatusAvailable] = []
        for info in flights:
            flight_number = info.flight_number
            flight = self._get_flight(flight_number)
            instance = self._get_flight_instance(flight_number=flight_number, date=info.date)
            if not isinstance(instance, FlightDateStatusAvailable):
                raise ValueError(f"Flight {flight_number} not available on date {info.date}")
            if instance.available_seats[cabin] < len(passengers):
                raise ValueError(f"Not enough seats on flight {flight_number}")
            price = instance.prices[cabin]
            leg = ReservationFlight(origin=flight.origin, destination=flight.destination, flight_number=flight_number,
                                    date=info.date, price=price)  # fmt: skip
            reservation.flights.append(leg)
            instances.append(instance)
            total_price += price * len(passengers)
        if insurance == "yes":
            total_price += 30 * len(passengers)
        total_price += 50 * nonfree_baggages
        for method in payment_methods:
            if method.payment_id not in user.payment_methods:
                raise ValueError(f"Payment method {method.payment_id} not found")
            held = user.payment_methods[method.payment_id]
            if isinstance(held, (GiftCard, Certificate)) and held.amount < method.amount:
                raise ValueError(f"Not enough balance in payment method {method.payment_id}")
        total_payment = sum(method.amount for method in payment_methods)
        if total_payment != total_price:
            raise ValueError(f"Payment amount does not add up, total price is {total_price}, but paid {total_payment}")
        for method in payment_methods:
            held = user.payment_methods[method.payment_id]
            if isinstance(held, GiftCard):
                held.amount -= method.amount
            elif isinstance(held, Certificate):
                user.payment_methods.pop(method.payment_id)
        for instance in instances:
            instance.available_seats[cabin] -= len(passengers)
        self.db.reservations[reservation_id] = reservation
        self.db.users[user_id].reservations.append(reservation_id)
        return reservation

    @tool(mutates=False)
    def calculate(self, expression):  # type: ignore[no-untyped-def]
        return calculate(expression)

    @tool(mutates=True)
    def cancel_reservation(self, reservation_id):  # type: ignore[no-untyped-def]
        reservation = self._get_reservation(reservation_id)
        refunds = [Payment(payment_id=payment.payment_id, amount=-payment.amount)
                   for payment in reservation.payment_history]  # fmt: skip
        reservation.payment_history.extend(refunds)
        reservation.status = "cancelled"
        return reservation

    @tool(mutates=False)
    def get_reservation_details(self, reservation_id):  # type: ignore[no-untyped-def]
        return self._get_reservation(reservation_id)

    @tool(mutates=False)
    def get_user_details(self, user_id):  # type: ignore[no-untyped-def]
        return self._get_user(user_id)

    @tool(mutates=False)
    def list_all_airports(self):  # type: ignore[no-untyped-def]
        return [AirportCode(iata=iata, city=city) for iata, city in AIRPORTS]

    @tool(mutates=False)
    def search_direct_flight(self, origin, destination, date):  # type: ignore[no-untyped-def]
        return self._search_direct_flight(date=date, origin=origin, destination=destination)

    @tool(mutates=False)
    def search_onestop_flight(self, origin, destination, date):  # type: ignore[no-untyped-def]
        results = []
        for first in self._search_direct_flight(date=date, origin=origin, destination=None):
            first.date = date
            next_date = f"2024-05-{int(date[-2:]) + 1}" if "+1" in first.scheduled_arrival_time_est else date
            for second in self._search_direct_flight(date=next_date, origin=first.destination,
                                                     destination=destination,
                                                     leave_after=first.scheduled_arrival_time_est):  # fmt: skip
                second.date = next_date
                results.append([first, second])
        return results

    @tool(mutates=True)
    def send_certificate(self, user_id, amount):  # type: ignore[no-untyped-def]
        user = self._get_user(user_id)
        for payment_id in (f"certificate_{number}" for number in (3221322, 3221323, 3221324)):
            if payment_id not in user.payment_methods:
                user.payment_methods[payment_id] = Certificate(id=payment_id, amount=amount, source="certificate")
                return f"Certificate {payment_id} added to user {user_id} with amount {amount}."
        raise ValueError("Too many certificates")

    @tool(mutates=False)
    def transfer_to_human_agents(self, summary):  # type: ignore[no-untyped-def]
        return "Transfer successful"

    @tool(mutates=True)
    def update_reservation_baggages(self, reservation_id, total_baggages, nonfree_baggages, payment_id):  # type: ignore[no-untyped-def]
        reservation = self._get_reservation(reservation_id)
        user = self._get_user(reservation.user_id)
        total_price = 50 * max(0, nonfree_baggages - reservation.nonfree_baggages)
        payment = self._payment_for_update(user, payment_id, total_price)
        if payment is not None:
            reservation.payment_history.append(payment)
        reservation.total_baggages = total_baggages
        reservation.nonfree_baggages = nonfree_baggages
        return reservation

    @tool(mutates=True)
    def update_reservation_flights(self, reservation_id, cabin, flights, payment_id):  # type: ignore[no-untyped-def]
        if all(isinstance(flight, dict) for flight in flights):
            flights = [FlightInfo(**flight) for flight in flights]
        reservation = self._get_reservation(reservation_id)
        user = self._get_user(reservation.user_id)
        total_price = 0
        kept: list[ReservationFlight] = []
        for info in flights:
            same = next((held for held in reservation.flights if held.flight_number == info.flight_number
                         and held.date == info.date and cabin == reservation.cabin), None)  # fmt: skip
            if same:
                total_price += same.price * len(reservation.passengers)
                kept.append(same)
                continue
            flight = self._get_flight(info.flight_number)
            instance = self._get_flight_instance(flight_number=info.flight_number, date=info.date)
            if not isinstance(instance, FlightDateStatusAvailable):
                raise ValueError(f"Flight {info.flight_number} not available on date {info.date}")
            if instance.available_seats[cabin] < len(reservation.passengers):
                raise ValueError(f"Not enough seats on flight {info.flight_number}")
            new = ReservationFlight(flight_number=info.flight_number, date=info.date, price=instance.prices[cabin],
                                    origin=flight.origin, destination=flight.destination)  # fmt: skip
            total_price += new.price * len(reservation.passengers)
            kept.append(new)
        total_price -= sum(flight.price for flight in reservation.flights) * len(reservation.passengers)
        payment = self._payment_for_update(user, payment_id, total_price)
        if payment is not None:
            reservation.payment_history.append(payment)
        reservation.flights = kept
        reservation.cabin = cabin
        return reservation

    @tool(mutates=True)
    def update_reservation_passengers(self, reservation_id, passengers):  # type: ignore[no-untyped-def]
        if all(isinstance(passenger, dict) for passenger in passengers):
            passengers = [Passenger(**passenger) for passenger in passengers]
        reservation = self._get_reservation(reservation_id)
        if len(passengers) != len(reservation.passengers):
            raise ValueError("Number of passengers does not match")
        reservation.passengers = deepcopy(passengers)
        return reservation

    @tool(mutates=False)
    def get_flight_status(self, flight_number, date):  # type: ignore[no-untyped-def]
        return self._get_flight_instance(flight_number, date).status
