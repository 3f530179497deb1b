"""The bank's hidden state, and how a seed populates it."""

from __future__ import annotations

import random
from typing import Literal

from pydantic import BaseModel, Field

from toolworlds.records import SequentialIds
from toolworlds.reference.people import BILLERS, MERCHANTS, email_for, money, person_names

MAX_DAILY_LIMIT = 25_000.0


# -- records --------------------------------------------------------------------------------------


class Customer(BaseModel):
    customer_id: str
    name: str
    email: str
    pin: str
    locked: bool = False


class Account(BaseModel):
    account_id: str
    customer_id: str
    kind: Literal["checking", "savings"]
    nickname: str
    balance: float
    daily_transfer_limit: float
    transferred_today: float = 0.0
    status: Literal["open", "frozen"] = "open"
    freeze_reason: str | None = None


class Hold(BaseModel):
    hold_id: str
    account_id: str
    merchant: str
    amount: float
    kind: Literal["authorization", "deposit"]
    status: Literal["active", "released"] = "active"


class Transaction(BaseModel):
    txn_id: str
    account_id: str
    amount: float = Field(description="Positive for money in, negative for money out.")
    description: str
    disputed: bool = False
    dispute_reason: str | None = None


class Payee(BaseModel):
    payee_id: str
    customer_id: str
    name: str
    reference: str


class Bank(SequentialIds):
    customers: dict[str, Customer]
    accounts: dict[str, Account]
    holds: dict[str, Hold]
    transactions: dict[str, Transaction]
    payees: dict[str, Payee]
    signed_in: str | None = None
    pin_failures: dict[str, int] = Field(default_factory=dict)

    def available(self, account_id: str) -> float:
        held = sum(h.amount for h in self.holds.values() if h.account_id == account_id and h.status == "active")
        return round(self.accounts[account_id].balance - held, 2)

    def accounts_of(self, customer_id: str) -> list[Account]:
        return [a for a in self.accounts.values() if a.customer_id == customer_id]


# -- the hidden state for a seed ----------------------------------------------------------------


def populate(rng: random.Random) -> Bank:
    bank = Bank(customers={}, accounts={}, holds={}, transactions={}, payees={})
    for name in person_names(rng, 6):
        customer = Customer(
            customer_id=bank.new_id("C"), name=name, email=email_for(name), pin=f"{rng.randrange(10_000):04d}"
        )
        bank.customers[customer.customer_id] = customer
        for kind, nickname in (("checking", "Everyday"), ("savings", rng.choice(["Rainy day", "House fund"]))):
            account = Account(
                account_id=bank.new_id("A"),
                customer_id=customer.customer_id,
                kind=kind,
                nickname=nickname,
                balance=money(rng, 600, 3_000) if kind == "checking" else money(rng, 3_000, 12_000),
                daily_transfer_limit=rng.choice([1_000.0, 2_000.0, 2_500.0]),
                transferred_today=rng.choice([0.0, 0.0, 150.0, 400.0]),
            )
            bank.accounts[account.account_id] = account
            for _ in range(rng.randint(4, 7)):
                add_charge(bank, account.account_id, rng.choice(MERCHANTS), money(rng, 4, 180))
            if kind == "checking":
                add_charge(bank, account.account_id, "Payroll deposit", -money(rng, 1_500, 2_500))
                for _ in range(rng.randint(0, 2)):
                    add_hold(bank, account.account_id, rng.choice(MERCHANTS), money(rng, 10, 120), "authorization")
                if rng.random() < 0.4:
                    add_hold(bank, account.account_id, "Cheque deposit", money(rng, 50, 300), "deposit")
        for biller in rng.sample(BILLERS, 2):
            add_payee(bank, customer.customer_id, biller, f"{rng.randrange(10**7):07d}")
    return bank


def add_charge(bank: Bank, account_id: str, merchant: str, amount: float) -> Transaction:
    """A past card charge (a negative `amount` is money in: a deposit)."""
    txn = Transaction(txn_id=bank.new_id("TX"), account_id=account_id, amount=-amount, description=merchant)
    bank.transactions[txn.txn_id] = txn
    return txn


def add_hold(bank: Bank, account_id: str, merchant: str, amount: float, kind: str) -> Hold:
    hold = Hold(hold_id=bank.new_id("H"), account_id=account_id, merchant=merchant, amount=amount, kind=kind)
    bank.holds[hold.hold_id] = hold
    return hold


def add_payee(bank: Bank, customer_id: str, name: str, reference: str) -> Payee:
    payee = Payee(payee_id=bank.new_id("P"), customer_id=customer_id, name=name, reference=reference)
    bank.payees[payee.payee_id] = payee
    return payee
