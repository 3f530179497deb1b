"""tau2's telecom domain: plans, customers, lines, bills and devices, and the 13 tools the agent has over them.

The models keep the official field names, types and order: results are their `model_dump`, so a date, an enum
or a float shows exactly as the official shows it, and the database hash covers the same values. The tools
follow the official ones step for step, quirks included: "today" is 2025-02-25, a data refuel is charged to the
customer's first draft bill (a new one, with a random id, where there is none) and accepts a suspended line,
a payment request does not check that the bill is unpaid, and a check that fails part-way leaves what was done.
The task scripts' own functions (initialization actions, assertions, the environment's sync) are here too,
under their official names, so a task's initial state and its checks run as the official ones do.
"""

from __future__ import annotations

import datetime
import tomllib
import uuid
from collections import defaultdict
from enum import Enum
from functools import cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from benchmarks.tau2.toolkit import Toolkit, tool

DB_PATH = Path(__file__).with_name("data") / "telecom" / "db.toml"
DEFAULT_START_DATE = datetime.date(2025, 1, 1)


def get_now() -> datetime.datetime:
    """The official fixed "now"."""
    return datetime.datetime(2025, 2, 25, 12, 8, 0)


def get_today() -> datetime.date:
    """The official fixed "today"."""
    return datetime.date(2025, 2, 25)


class BaseModelNoExtra(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Address(BaseModelNoExtra):
    street: str
    city: str
    state: str
    zip_code: str


class Plan(BaseModelNoExtra):
    plan_id: str
    name: str
    data_limit_gb: float
    price_per_month: float
    data_refueling_price_per_gb: float


# The enums are str mixins as in the official (not StrEnum): the same JSON and hash, and the same str() of a
# member ("LineStatus.ACTIVE") wherever one is written out.
class DeviceType(str, Enum):  # noqa: UP042
    PHONE = "phone"
    ROUTER = "router"
    TABLET = "tablet"
    WATCH = "watch"
    OTHER = "other"


class Device(BaseModelNoExtra):
    device_id: str
    device_type: DeviceType
    model: str
    imei: str | None = None
    is_esim_capable: bool
    activated: bool = False
    activation_date: datetime.datetime | None = None
    last_esim_transfer_date: datetime.datetime | None = None


class LineStatus(str, Enum):  # noqa: UP042
    ACTIVE = "Active"
    SUSPENDED = "Suspended"
    PENDING_ACTIVATION = "Pending Activation"
    CLOSED = "Closed"


class Line(BaseModelNoExtra):
    line_id: str
    phone_number: str
    status: LineStatus = LineStatus.PENDING_ACTIVATION
    plan_id: str
    device_id: str | None = None
    data_used_gb: float = 0.0
    data_refueling_gb: float = 0.0
    roaming_enabled: bool = False
    contract_end_date: datetime.date | None = None
    last_plan_change_date: datetime.date | None = None
    last_sim_replacement_date: datetime.date | None = None
    suspension_start_date: datetime.date | None = None


class LineItem(BaseModelNoExtra):
    description: str
    amount: float
    date: datetime.date
    item_type: str


class BillStatus(str, Enum):  # noqa: UP042
    DRAFT = "Draft"
    ISSUED = "Issued"
    AWAITING_PAYMENT = "Awaiting Payment"
    PAID = "Paid"
    OVERDUE = "Overdue"
    DISPUTED = "Disputed"


class Bill(BaseModelNoExtra):
    bill_id: str
    customer_id: str
    period_start: datetime.date
    period_end: datetime.date
    issue_date: datetime.date
    total_due: float
    due_date: datetime.date
    line_items: list[LineItem] = Field(default_factory=list)
    status: BillStatus = BillStatus.DRAFT


class AccountStatus(str, Enum):  # noqa: UP042
    ACTIVE = "Active"
    SUSPENDED = "Suspended"
    PENDING_VERIFICATION = "Pending Verification"
    CLOSED = "Closed"


class PaymentMethodType(str, Enum):  # noqa: UP042
    CREDIT_CARD = "Credit Card"
    DEBIT_CARD = "Debit Card"
    PAYPAL = "PayPal"


class PaymentMethod(BaseModelNoExtra):
    method_type: PaymentMethodType
    account_number_last_4: str
    expiration_date: str  # MM/YYYY


class Customer(BaseModelNoExtra):
    customer_id: str
    full_name: str
    date_of_birth: str  # YYYY-MM-DD, compared as text
    email: str
    phone_number: str
    address: Address
    account_status: AccountStatus = AccountStatus.PENDING_VERIFICATION
    payment_methods: list[PaymentMethod] = Field(default_factory=list)
    line_ids: list[str] = Field(default_factory=list)
    bill_ids: list[str] = Field(default_factory=list)
    # The official default is a date, not a datetime (defaults are not validated); every stored customer has one.
    created_at: datetime.datetime = DEFAULT_START_DATE  # type: ignore[assignment]
    last_extension_date: datetime.date | None = None
    goodwill_credit_used_this_year: float = 0.0


class TelecomDB(BaseModelNoExtra):
    """The telecom database (the official `TelecomDB`)."""

    plans: list[Plan] = Field(default_factory=list)
    customers: list[Customer] = Field(default_factory=list)
    lines: list[Line] = Field(default_factory=list)
    bills: list[Bill] = Field(default_factory=list)
    devices: list[Device] = Field(default_factory=list)

    def get_statistics(self) -> dict[str, Any]:
        return {
            "num_plans": len(self.plans),
            "num_customers": len(self.customers),
            "num_lines": len(self.lines),
            "num_bills": len(self.bills),
            "num_devices": len(self.devices),
            "num_payment_methods": sum(len(customer.payment_methods) for customer in self.customers),
        }


@cache
def _db_data() -> dict[str, Any]:
    """The vendored db.toml, parsed once (never mutated: validation copies every list it keeps). Python's
    `tomllib` reads it exactly as the official `toml` does: its dates are quoted text, which the models parse."""
    return tomllib.loads(DB_PATH.read_text("utf-8"))


def load_telecom_db() -> TelecomDB:
    """A fresh copy of the domain's initial database."""
    return TelecomDB.model_validate(_db_data())


class IDGenerator:
    """Numbered ids per kind (the official helper the toolkit holds; no tool uses it)."""

    def __init__(self) -> None:
        self.id_counter: defaultdict[str, int] = defaultdict(int)

    def get_id(self, id_type: str, id_name: str | None = None) -> str:
        self.id_counter[id_type] += 1
        id_name = id_name or id_type
        return f"{id_name}_{self.id_counter[id_type]}"


class TelecomTools(Toolkit):
    """The telecom agent's tools (the official `TelecomTools`), with the task scripts' functions."""

    db: TelecomDB

    def __init__(self, db: TelecomDB) -> None:
        super().__init__(db)
        self.id_generator = IDGenerator()

    @tool(mutates=False)
    def get_customer_by_phone(self, phone_number):  # type: ignore[no-untyped-def]
        for customer in self.db.customers:
            if customer.phone_number == phone_number:
                return customer
            for line_id in customer.line_ids:  # a missing line raises here, as in the official
                if self._get_line_by_id(line_id).phone_number == phone_number:
                    return customer
        raise ValueError(f"Customer with phone number {phone_number} not found")

    @tool(mutates=False)
    def get_customer_by_id(self, customer_id):  # type: ignore[no-untyped-def]
        for customer in self.db.customers:
            if customer.customer_id == customer_id:
                return customer
        raise ValueError(f"Customer with ID {customer_id} not found")

    @tool(mutates=False)
    def get_customer_by_name(self, full_name, dob):  # type: ignore[no-untyped-def]
        return [
            customer
            for customer in self.db.customers
            if customer.full_name.lower() == full_name.lower() and customer.date_of_birth == dob
        ]

    def _get_line_by_phone(self, phone_number: str) -> Line:
        for line in self.db.lines:
            if line.phone_number == phone_number:
                return line
        raise ValueError(f"Line with phone number {phone_number} not found")

    def _get_line_by_id(self, line_id: str) -> Line:
        for line in self.db.lines:
            if line.line_id == line_id:
                return line
        raise ValueError(f"Line with ID {line_id} not found")

    def _get_plan_by_id(self, plan_id: str) -> Plan:
        for plan in self.db.plans:
            if plan.plan_id == plan_id:
                return plan
        raise ValueError(f"Plan with ID {plan_id} not found")

    def _get_device_by_id(self, device_id: str) -> Device:
        for device in self.db.devices:
            if device.device_id == device_id:
                return device
        raise ValueError(f"Device with ID {device_id} not found")

    def _get_bill_by_id(self, bill_id: str) -> Bill:
        for bill in self.db.bills:
            if bill.bill_id == bill_id:
                return bill
        raise ValueError(f"Bill with ID {bill_id} not found")

    def _get_target_line(self, customer_id: str, line_id: str) -> Line:
        """The line, which must be one of the customer's."""
        customer: Customer = self.get_customer_by_id(customer_id)
        if line_id not in customer.line_ids:
            raise ValueError(f"Line {line_id} not found for customer {customer_id}")
        return self._get_line_by_id(line_id)

    def get_available_plan_ids(self) -> list[str]:
        return [plan.plan_id for plan in self.db.plans]

    @tool(mutates=False)
    def get_details_by_id(self, id):  # type: ignore[no-untyped-def]
        if id.startswith("L"):
            return self._get_line_by_id(id)
        if id.startswith("D"):
            return self._get_device_by_id(id)
        if id.startswith("B"):
            return self._get_bill_by_id(id)
        if id.startswith("C"):
            return self.get_customer_by_id(id)
        if id.startswith("P"):
            return self._get_plan_by_id(id)
        raise ValueError(f"Unknown ID format or type: {id}")

    @tool(mutates=True)
    def suspend_line(self, customer_id, line_id, reason):  # type: ignore[no-untyped-def]
        line = self._get_target_line(customer_id, line_id)
        if line.status != LineStatus.ACTIVE:
            raise ValueError("Line must be active to suspend")
        line.status = LineStatus.SUSPENDED
        line.suspension_start_date = get_today()
        return {"message": "Line suspended successfully. $5/month holding fee will apply.", "line": line}

    @tool(mutates=True)
    def resume_line(self, customer_id, line_id):  # type: ignore[no-untyped-def]
        line = self._get_target_line(customer_id, line_id)
        if line.status not in (LineStatus.SUSPENDED, LineStatus.PENDING_ACTIVATION):
            raise ValueError("Line must be suspended to resume")
        line.status = LineStatus.ACTIVE
        line.suspension_start_date = None
        return {"message": "Line resumed successfully", "line": line}

    @tool(mutates=False)
    def get_bills_for_customer(self, customer_id, limit=12):  # type: ignore[no-untyped-def]
        customer = self.get_customer_by_id(customer_id)
        bills = [self._get_bill_by_id(bill_id) for bill_id in customer.bill_ids]
        return sorted(bills, key=lambda bill: bill.issue_date, reverse=True)[:limit]

    @tool(mutates=True)
    def send_payment_request(self, customer_id, bill_id):  # type: ignore[no-untyped-def]
        customer = self.get_customer_by_id(customer_id)
        if self._get_bills_awaiting_payment(customer):
            raise ValueError("A bill is already awaiting payment for this customer")
        if bill_id not in customer.bill_ids:
            raise ValueError(f"Bill {bill_id} not found for customer {customer_id}")
        bill = self._get_bill_by_id(bill_id)
        bill.status = BillStatus.AWAITING_PAYMENT  # a paid bill too
        return f"Payment request sent to the customer for bill {bill.bill_id}"

    def _get_bills_awaiting_payment(self, customer: Customer) -> list[Bill]:
        bills = [self._get_bill_by_id(bill_id) for bill_id in customer.bill_ids]
        return [bill for bill in bills if bill.status == BillStatus.AWAITING_PAYMENT]

    def _set_bill_to_paid(self, bill_id: str) -> str:
        """What the environment's sync does once the user has paid (the official says it returns None)."""
        self._get_bill_by_id(bill_id).status = BillStatus.PAID
        return f"Bill {bill_id} set to paid"

    def _apply_one_time_charge(self, customer_id: str, amount: float, description: str) -> None:
        """Add a charge (a credit, where negative) to the customer's first draft bill, made for next month
        (id `B` and 8 random hex digits) where there is none."""
        customer: Customer = self.get_customer_by_id(customer_id)
        draft_bill = None
        for bill_id in customer.bill_ids:
            bill = self._get_bill_by_id(bill_id)
            if bill.status == BillStatus.DRAFT:
                draft_bill = bill
                break
        if draft_bill is None:
            next_month = (get_today().replace(day=1) + datetime.timedelta(days=32)).replace(day=1)
            following = next_month.replace(
                month=next_month.month + 1 if next_month.month < 12 else 1,
                year=next_month.year if next_month.month < 12 else next_month.year + 1,
            )
            new_bill_id = f"B{uuid.uuid4().hex[:8]}"
            draft_bill = Bill(
                bill_id=new_bill_id,
                customer_id=customer_id,
                period_start=next_month,
                period_end=following - datetime.timedelta(days=1),
                issue_date=next_month,
                total_due=0,
                due_date=next_month + datetime.timedelta(days=14),
                status=BillStatus.DRAFT,
            )
            self.db.bills.append(draft_bill)
            customer.bill_ids.append(new_bill_id)
        item_type = "Credit" if amount < 0 else "Charge"
        draft_bill.line_items.append(
            LineItem(description=description, amount=amount, date=get_today(), item_type=item_type)
        )
        draft_bill.total_due += amount

    @tool(mutates=False)
    def get_data_usage(self, customer_id, line_id):  # type: ignore[no-untyped-def]
        line = self._get_target_line(customer_id, line_id)
        plan = self._get_plan_by_id(line.plan_id)
        today = get_today()
        # December's cycle would end in the same year's January: unreachable with the fixed "today"
        cycle_end_date = datetime.date(today.year, today.month + 1 if today.month < 12 else 1, 1)
        return {
            "line_id": line_id,
            "data_used_gb": line.data_used_gb,
            "data_limit_gb": plan.data_limit_gb,
            "data_refueling_gb": line.data_refueling_gb,
            "cycle_end_date": cycle_end_date - datetime.timedelta(days=1),
        }

    def set_data_usage(self, customer_id: str, line_id: str, data_used_gb: float) -> str:
        """An initialization action: the line's data used this cycle (stored as given, not validated)."""
        line = self._get_target_line(customer_id, line_id)
        line.data_used_gb = data_used_gb
        return f"Data usage set to {data_used_gb} GB for line {line_id}"

    @tool(mutates=True)
    def enable_roaming(self, customer_id, line_id):  # type: ignore[no-untyped-def]
        line = self._get_target_line(customer_id, line_id)
        if line.roaming_enabled:
            return "Roaming was already enabled"
        line.roaming_enabled = True
        return "Roaming enabled successfully"

    @tool(mutates=True)
    def disable_roaming(self, customer_id, line_id):  # type: ignore[no-untyped-def]
        line = self._get_target_line(customer_id, line_id)
        if not line.roaming_enabled:
            return "Roaming was already disabled"
        line.roaming_enabled = False
        return "Roaming disabled successfully"

    @tool(mutates=False)
    def transfer_to_human_agents(self, summary):  # type: ignore[no-untyped-def]
        return "Transfer successful"

    @tool(mutates=True)
    def refuel_data(self, customer_id, line_id, gb_amount):  # type: ignore[no-untyped-def]
        line = self._get_target_line(customer_id, line_id)  # any status: the official's check is commented out
        if gb_amount <= 0:
            raise ValueError("Refuel amount must be positive")
        plan = self._get_plan_by_id(line.plan_id)
        charge_amount = gb_amount * plan.data_refueling_price_per_gb
        line.data_refueling_gb += gb_amount  # unvalidated: an int amount on a line at 0.0 stays a float
        price = plan.data_refueling_price_per_gb
        self._apply_one_time_charge(customer_id, charge_amount, f"Data refueling: {gb_amount} GB at ${price}/GB")
        return {
            "message": f"Successfully added {gb_amount} GB of data for line {line_id} for ${charge_amount:.2f}",
            "new_data_refueling_gb": line.data_refueling_gb,
            "charge": charge_amount,
        }

    def suspend_line_for_overdue_bill(self, customer_id: str, line_id: str, new_bill_id: str,
                                      contract_ended: bool) -> str:  # fmt: skip
        """An initialization action: last month's plan charge as an overdue bill, and the line suspended for it
        (the line need not be the customer's)."""
        line = self._get_line_by_id(line_id)
        if line.status != LineStatus.ACTIVE:
            raise ValueError("Line must be active to suspend for unpaid bill")
        amount = self._get_plan_by_id(line.plan_id).price_per_month
        if amount <= 0:
            raise ValueError("Amount must be positive for overdue bill")
        customer: Customer = self.get_customer_by_id(customer_id)
        bills = [self._get_bill_by_id(bill_id) for bill_id in customer.bill_ids]  # a missing one raises first
        if any(bill.status == BillStatus.OVERDUE for bill in bills):
            raise ValueError("Customer already has an overdue bill")
        last_day_of_last_month = get_today().replace(day=1) - datetime.timedelta(days=1)
        first_day_of_last_month = last_day_of_last_month.replace(day=1)
        overdue_bill = Bill(
            bill_id=new_bill_id,
            customer_id=customer_id,
            period_start=first_day_of_last_month,
            period_end=last_day_of_last_month,
            issue_date=first_day_of_last_month,
            total_due=0,
            due_date=first_day_of_last_month + datetime.timedelta(days=14),
            status=BillStatus.OVERDUE,
        )
        item_type = "Charge" if amount > 0 else "Credit"
        item = LineItem(description=f"Charge for line {line.line_id}", amount=amount, date=get_today(),
                        item_type=item_type)  # fmt: skip
        overdue_bill.line_items.append(item)
        overdue_bill.total_due += amount
        self.db.bills.append(overdue_bill)
        customer.bill_ids.append(new_bill_id)
        line.status = LineStatus.SUSPENDED
        line.suspension_start_date = get_today()
        if contract_ended:
            line.contract_end_date = last_day_of_last_month
        return f"Line {line_id} suspended for unpaid bill {new_bill_id}. Contract ended: {contract_ended}"

    def assert_data_refueling_amount(self, customer_id: str, line_id: str, expected_amount: float) -> bool:
        line = self._get_target_line(customer_id, line_id)
        return abs(line.data_refueling_gb - expected_amount) < 1e-6

    def assert_line_status(self, customer_id: str, line_id: str, expected_status: LineStatus) -> bool:
        return self._get_target_line(customer_id, line_id).status == expected_status

    def assert_overdue_bill_exists(self, customer_id: str, overdue_bill_id: str) -> bool:
        customer: Customer = self.get_customer_by_id(customer_id)
        if overdue_bill_id not in customer.bill_ids:
            raise ValueError(f"Overdue bill {overdue_bill_id} not found")
        if self._get_bill_by_id(overdue_bill_id).status != BillStatus.OVERDUE:
            raise ValueError(f"Overdue bill {overdue_bill_id} is not overdue")
        return True

    def assert_no_overdue_bill(self, overdue_bill_id: str) -> bool:
        """True where the bill is gone or paid."""
        try:
            bill = self._get_bill_by_id(overdue_bill_id)
        except ValueError:
            return True
        return bill.status == BillStatus.PAID
