"""The bank's tools: what an agent can look up and do, and the refusals a real bank would give."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Annotated, ClassVar

from pydantic import BaseModel, Field

from toolworlds.core import ToolError
from toolworlds.records import lookup, search
from toolworlds.reference.banking.state import (
    MAX_DAILY_LIMIT,
    Account,
    Bank,
    Customer,
    Hold,
    Payee,
    Transaction,
    populate,
)
from toolworlds.reference.banking.tasks import FAMILIES
from toolworlds.reference.scenario import Family, ScenarioWorld
from toolworlds.tool import tool

Amount = Annotated[float, Field(gt=0, le=1_000_000)]


# -- what tools return --------------------------------------------------------------------------


class CustomerMatch(BaseModel):
    customer_id: str
    name: str
    email: str


class Session(BaseModel):
    customer_id: str
    name: str


class AccountSummary(BaseModel):
    account_id: str
    kind: str
    nickname: str
    balance: float
    status: str


class AccountDetails(AccountSummary):
    available_balance: float = Field(description="Balance minus active holds: what can be spent now.")
    daily_transfer_limit: float
    transferred_today: float


class Receipt(BaseModel):
    txn_id: str
    from_account_id: str
    to: str
    amount: float
    from_balance_after: float


def _summary(account: Account) -> AccountSummary:
    return AccountSummary.model_validate(account.model_dump())


# -- the world ----------------------------------------------------------------------------------


class BankingWorld(ScenarioWorld[Bank]):
    """A retail bank's back office: accounts, balances, transfers, limits, holds, bills and disputes.

    Rules the bank enforces, and the refusals to handle:
    - every tool but `find_customer` and `authenticate` needs a signed-in customer (`auth_required`);
      three wrong PINs lock the customer out (`invalid_pin`, `locked`);
    - a customer sees only their own accounts (`not_found` otherwise, so nothing leaks);
    - money leaves an account only up to its *available* balance, the balance minus active holds
      (`insufficient_funds`), and only up to its daily transfer limit (`limit_exceeded`);
    - frozen accounts neither send nor receive (`account_frozen`); deposit holds clear by themselves
      (`not_releasable`); a hold is released once (`already_released`), a charge disputed once.
    """

    name = "banking"

    def populate(self, rng: random.Random) -> Bank:
        return populate(rng)

    # -- helpers every tool uses --

    def _customer(self) -> Customer:
        if self.state.signed_in is None:
            raise ToolError("auth_required", "no customer is signed in; call authenticate first")
        return self.state.customers[self.state.signed_in]

    def _own_account(self, account_id: str) -> Account:
        account = self.state.accounts.get(account_id)
        if account is None or account.customer_id != self._customer().customer_id:
            raise ToolError("not_found", f"no account {account_id!r} for the signed-in customer")
        return account

    def _move_out(self, account: Account, amount: float, to: str, description: str) -> Receipt:
        if account.status == "frozen":
            raise ToolError("account_frozen", f"account {account.account_id} is frozen")
        available = self.state.available(account.account_id)
        if amount > available + 1e-9:
            raise ToolError("insufficient_funds", f"{account.account_id} has {available:.2f} available")
        remaining = round(account.daily_transfer_limit - account.transferred_today, 2)
        if amount > remaining + 1e-9:
            raise ToolError("limit_exceeded", f"{account.account_id} may send {remaining:.2f} more today")
        account.balance = round(account.balance - amount, 2)
        account.transferred_today = round(account.transferred_today + amount, 2)
        txn_id = self.state.new_id("TX")
        self.state.transactions[txn_id] = Transaction(
            txn_id=txn_id, account_id=account.account_id, amount=-amount, description=description
        )
        return Receipt(
            txn_id=txn_id, from_account_id=account.account_id, to=to, amount=amount, from_balance_after=account.balance
        )

    # -- tools --

    @tool
    def find_customer(self, name: str) -> list[CustomerMatch]:
        """Search customers by name (case-insensitive substring); no sign-in needed.

        Args:
            name: all or part of the customer's name.
        """
        found = search(self.state.customers.values(), name, lambda c: c.name)
        return [CustomerMatch(customer_id=c.customer_id, name=c.name, email=c.email) for c in found]

    @tool
    def authenticate(self, customer_id: str, pin: str) -> Session:
        """Sign a customer in with their 4-digit PIN; three wrong PINs lock the customer out.

        Args:
            customer_id: the customer's id, e.g. C-1003.
            pin: the customer's PIN as they gave it.
        """
        customer = lookup(self.state.customers, customer_id, "customer")
        if customer.locked:
            raise ToolError("locked", f"customer {customer_id} is locked after too many wrong PINs")
        if pin != customer.pin:
            failures = self.state.pin_failures.get(customer_id, 0) + 1
            self.state.pin_failures[customer_id] = failures
            if failures >= 3:
                customer.locked = True
            raise ToolError("invalid_pin", f"wrong PIN for {customer_id} ({3 - failures} tries left)")
        self.state.pin_failures.pop(customer_id, None)
        self.state.signed_in = customer_id
        return Session(customer_id=customer_id, name=customer.name)

    @tool
    def list_accounts(self) -> list[AccountSummary]:
        """List the signed-in customer's accounts with their ledger balances."""
        return [_summary(a) for a in self.state.accounts_of(self._customer().customer_id)]

    @tool
    def get_account(self, account_id: str) -> AccountDetails:
        """Show one account in full: available balance, daily transfer limit and what was sent today.

        Args:
            account_id: the account's id, e.g. A-1004.
        """
        account = self._own_account(account_id)
        return AccountDetails(**account.model_dump(), available_balance=self.state.available(account_id))

    @tool
    def get_statement(self, account_id: str, limit: Annotated[int, Field(ge=1, le=50)] = 20) -> list[Transaction]:
        """List an account's most recent transactions, newest first.

        Args:
            account_id: the account's id.
            limit: how many transactions to return (1-50).
        """
        self._own_account(account_id)
        lines = [t for t in self.state.transactions.values() if t.account_id == account_id]
        return list(reversed(lines))[:limit]

    @tool
    def transfer(self, from_account_id: str, to_account_id: str, amount: Amount, memo: str = "") -> Receipt:
        """Send money from one of the customer's accounts to any account at the bank.

        Args:
            from_account_id: the customer's account the money leaves.
            to_account_id: the receiving account's id (may belong to someone else).
            amount: dollars to send, with cents.
            memo: a note shown on both statements.
        """
        source = self._own_account(from_account_id)
        target = self.state.accounts.get(to_account_id)
        if target is None:
            raise ToolError("not_found", f"no account {to_account_id!r} at this bank")
        if target.account_id == source.account_id:
            raise ToolError("same_account", "source and destination are the same account")
        if target.status == "frozen":
            raise ToolError("account_frozen", f"account {to_account_id} is frozen and cannot receive money")
        amount = round(amount, 2)
        receipt = self._move_out(source, amount, to_account_id, memo or f"Transfer to {to_account_id}")
        target.balance = round(target.balance + amount, 2)
        txn_id = self.state.new_id("TX")
        self.state.transactions[txn_id] = Transaction(
            txn_id=txn_id, account_id=to_account_id, amount=amount, description=memo or f"From {source.account_id}"
        )
        return receipt

    @tool
    def list_holds(self, account_id: str) -> list[Hold]:
        """List the holds on an account, active and released.

        Args:
            account_id: the account's id.
        """
        self._own_account(account_id)
        return [h for h in self.state.holds.values() if h.account_id == account_id]

    @tool
    def release_hold(self, hold_id: str) -> Hold:
        """Release an authorization hold so the money is available again; deposit holds clear by themselves.

        Args:
            hold_id: the hold's id, e.g. H-1012.
        """
        hold = lookup(self.state.holds, hold_id, "hold")
        self._own_account(hold.account_id)
        if hold.kind == "deposit":
            raise ToolError("not_releasable", f"{hold_id} is a deposit hold; it clears automatically")
        if hold.status == "released":
            raise ToolError("already_released", f"{hold_id} was already released")
        hold.status = "released"
        return hold

    @tool
    def set_transfer_limit(self, account_id: str, daily_limit: Amount) -> AccountDetails:
        """Change how much may leave an account per day (at most 25,000).

        Args:
            account_id: the account's id.
            daily_limit: the new daily limit in dollars.
        """
        account = self._own_account(account_id)
        if daily_limit > MAX_DAILY_LIMIT:
            raise ToolError("limit_too_high", f"daily limits above {MAX_DAILY_LIMIT:,.0f} need a branch visit")
        account.daily_transfer_limit = round(daily_limit, 2)
        return self.get_account(account_id)

    @tool
    def freeze_account(self, account_id: str, reason: str) -> AccountSummary:
        """Freeze an account: nothing can be sent from or to it until it is unfrozen.

        Args:
            account_id: the account's id.
            reason: why, in the customer's words.
        """
        account = self._own_account(account_id)
        if account.status == "frozen":
            raise ToolError("already_frozen", f"{account_id} is already frozen")
        account.status, account.freeze_reason = "frozen", reason
        return _summary(account)

    @tool
    def unfreeze_account(self, account_id: str) -> AccountSummary:
        """Lift a freeze from an account.

        Args:
            account_id: the account's id.
        """
        account = self._own_account(account_id)
        if account.status != "frozen":
            raise ToolError("not_frozen", f"{account_id} is not frozen")
        account.status, account.freeze_reason = "open", None
        return _summary(account)

    @tool
    def list_payees(self) -> list[Payee]:
        """List the billers the signed-in customer has saved."""
        me = self._customer().customer_id
        return [p for p in self.state.payees.values() if p.customer_id == me]

    @tool
    def add_payee(self, name: str, reference: str) -> Payee:
        """Save a biller so bills can be paid to it.

        Args:
            name: the biller's name, e.g. City Water.
            reference: the customer's account number with that biller.
        """
        me = self._customer().customer_id
        if any(p.name.lower() == name.strip().lower() for p in self.list_payees()):
            raise ToolError("duplicate_payee", f"{name!r} is already a payee")
        payee = Payee(payee_id=self.state.new_id("P"), customer_id=me, name=name.strip(), reference=reference)
        self.state.payees[payee.payee_id] = payee
        return payee

    @tool
    def pay_bill(self, from_account_id: str, payee_id: str, amount: Amount) -> Receipt:
        """Pay a saved payee from one of the customer's accounts (counts toward the daily limit).

        Args:
            from_account_id: the account to pay from.
            payee_id: the payee's id, e.g. P-1007.
            amount: dollars to pay.
        """
        source = self._own_account(from_account_id)
        payee = self.state.payees.get(payee_id)
        if payee is None or payee.customer_id != source.customer_id:
            raise ToolError("not_found", f"no payee {payee_id!r} for the signed-in customer")
        return self._move_out(source, round(amount, 2), payee_id, f"Bill payment to {payee.name}")

    @tool
    def dispute_transaction(self, txn_id: str, reason: str) -> Transaction:
        """Open a dispute on a charge the customer does not recognise.

        Args:
            txn_id: the transaction's id, e.g. TX-1020.
            reason: the customer's reason.
        """
        txn = lookup(self.state.transactions, txn_id, "transaction")
        self._own_account(txn.account_id)
        if txn.amount >= 0:
            raise ToolError("not_a_charge", f"{txn_id} is money in; only charges can be disputed")
        if txn.disputed:
            raise ToolError("already_disputed", f"{txn_id} is already disputed")
        txn.disputed, txn.dispute_reason = True, reason
        return txn

    families: ClassVar[Sequence[Family[Bank]]] = FAMILIES
