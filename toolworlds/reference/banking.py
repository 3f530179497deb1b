"""Mock retail banking: customers sign in with a PIN, then move money, pay bills, manage holds and disputes.

Rules a real bank would enforce, and the refusals the agent must handle:
- every tool but `find_customer` and `authenticate` needs a signed-in customer (`auth_required`);
  three wrong PINs lock the customer out (`invalid_pin`, `locked`);
- a customer sees only their own accounts (`not_found` otherwise, so nothing leaks);
- money leaves an account only up to its *available* balance, the balance minus active holds
  (`insufficient_funds`), and only up to its daily transfer limit (`limit_exceeded`);
- frozen accounts neither send nor receive (`account_frozen`); deposit holds clear by themselves
  (`not_releasable`); a hold is released once (`already_released`), a charge disputed once.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Annotated, ClassVar, Literal

from pydantic import BaseModel, Field

from toolworlds.core import Finish, ToolCall, ToolError, call
from toolworlds.records import lookup, search
from toolworlds.reference.people import BILLERS, MERCHANTS, email_for, money, person_names
from toolworlds.reference.scenario import Family, Goal, ScenarioWorld
from toolworlds.scoring import Scorecard, copy_of, mentions_amount
from toolworlds.tool import tool

Amount = Annotated[float, Field(gt=0, le=1_000_000)]
MAX_DAILY_LIMIT = 25_000.0


# -- state --------------------------------------------------------------------------------------


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


class Bank(BaseModel):
    customers: dict[str, Customer]
    accounts: dict[str, Account]
    holds: dict[str, Hold]
    transactions: dict[str, Transaction]
    payees: dict[str, Payee]
    signed_in: str | None = None
    pin_failures: dict[str, int] = Field(default_factory=dict)
    next_id: int = 1000

    def new_id(self, prefix: str) -> str:
        self.next_id += 1
        return f"{prefix}-{self.next_id}"

    def available(self, account_id: str) -> float:
        held = sum(h.amount for h in self.holds.values() if h.account_id == account_id and h.status == "active")
        return round(self.accounts[account_id].balance - held, 2)

    def accounts_of(self, customer_id: str) -> list[Account]:
        return [a for a in self.accounts.values() if a.customer_id == customer_id]


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
    """A retail bank's back office: accounts, balances, transfers, limits, holds, bills and disputes."""

    name = "banking"
    description = __doc__ or ""
    max_steps = 30

    def populate(self, rng: random.Random) -> Bank:
        return _populate(rng)

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

    families: ClassVar[Sequence[Family[Bank]]] = ()  # filled in at the end of the module


# -- the hidden state for a seed ----------------------------------------------------------------


def _populate(rng: random.Random) -> Bank:
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
                _charge(bank, account.account_id, rng.choice(MERCHANTS), money(rng, 4, 180))
            if kind == "checking":
                _charge(bank, account.account_id, "Payroll deposit", -money(rng, 1_500, 2_500))
                for _ in range(rng.randint(0, 2)):
                    _hold(bank, account.account_id, rng.choice(MERCHANTS), money(rng, 10, 120), "authorization")
                if rng.random() < 0.4:
                    _hold(bank, account.account_id, "Cheque deposit", money(rng, 50, 300), "deposit")
        for biller in rng.sample(BILLERS, 2):
            _payee(bank, customer.customer_id, biller, f"{rng.randrange(10**7):07d}")
    return bank


def _charge(bank: Bank, account_id: str, merchant: str, amount: float) -> Transaction:
    """A past card charge (a negative `amount` is money in: a deposit)."""
    txn = Transaction(txn_id=bank.new_id("TX"), account_id=account_id, amount=-amount, description=merchant)
    bank.transactions[txn.txn_id] = txn
    return txn


def _hold(bank: Bank, account_id: str, merchant: str, amount: float, kind: str) -> Hold:
    hold = Hold(hold_id=bank.new_id("H"), account_id=account_id, merchant=merchant, amount=amount, kind=kind)
    bank.holds[hold.hold_id] = hold
    return hold


def _payee(bank: Bank, customer_id: str, name: str, reference: str) -> Payee:
    payee = Payee(payee_id=bank.new_id("P"), customer_id=customer_id, name=name, reference=reference)
    bank.payees[payee.payee_id] = payee
    return payee


# -- task families ------------------------------------------------------------------------------
# Each returns the instruction, the hint, the reference plan and the grader of one variant. Families
# that start signed-out make the agent find the customer and authenticate; the hint names the route
# (which tools, in what order, what to watch for) but never the ids or amounts the task asks for.


def _pick(bank: Bank, rng: random.Random) -> tuple[Customer, Account, Account]:
    customer = rng.choice(list(bank.customers.values()))
    checking, savings = bank.accounts_of(customer.customer_id)
    return customer, checking, savings


def _sign_in(customer: Customer) -> list[ToolCall | Finish]:
    return [
        call("find_customer", name=customer.name),
        call("authenticate", customer_id=customer.customer_id, pin=customer.pin),
    ]


def _intro(customer: Customer) -> str:
    return f"Hi, I'm {customer.name} and my PIN is {customer.pin}."


def _paid(bank: Bank, account_id: str, amount: float, biller: str) -> bool:
    """Whether a bill payment of `amount` to `biller` left `account_id`."""
    return any(
        t.account_id == account_id and abs(t.amount + amount) < 0.005 and t.description == f"Bill payment to {biller}"
        for t in bank.transactions.values()
    )


def freeze_stolen(bank: Bank, rng: random.Random) -> Goal[Bank]:
    customer, checking, _ = _pick(bank, rng)
    bank.signed_in = customer.customer_id
    before = copy_of(bank)
    target = checking.account_id

    def grade(state: Bank, answer: str | None) -> Scorecard:
        card = Scorecard().goal("account frozen", state.accounts[target].status == "frozen")
        return card.untouched(before, state, {f"accounts/{target}"})

    return Goal(
        f"{customer.name} is signed in. The debit card for account {target} was stolen an hour ago: freeze "
        "that account right away.",
        "A freeze is a single tool call on the account id you were given.",
        [call("freeze_account", account_id=target, reason="card stolen"), Finish()],
        grade,
    )


def available_balance(bank: Bank, rng: random.Random) -> Goal[Bank]:
    customer, checking, _ = _pick(bank, rng)
    if not any(h.account_id == checking.account_id for h in bank.holds.values()):
        _hold(bank, checking.account_id, rng.choice(MERCHANTS), money(rng, 20, 90), "authorization")
    bank.signed_in = customer.customer_id
    before = copy_of(bank)
    expected = bank.available(checking.account_id)

    def grade(state: Bank, answer: str | None) -> Scorecard:
        card = Scorecard().goal("stated the available balance", mentions_amount(answer, expected))
        return card.untouched(before, state, set())

    return Goal(
        f"{customer.name} is signed in. How much can I spend right now from my {checking.nickname} account? "
        "Reply with the amount.",
        "The ledger balance is not what can be spent: pending holds reduce it. The account details show both.",
        [call("list_accounts"), call("get_account", account_id=checking.account_id), Finish(answer=f"{expected:.2f}")],
        grade,
    )


def own_transfer(bank: Bank, rng: random.Random) -> Goal[Bank]:
    customer, checking, savings = _pick(bank, rng)
    source, target = (savings, checking) if rng.random() < 0.5 else (checking, savings)
    room = min(bank.available(source.account_id), source.daily_transfer_limit - source.transferred_today)
    amount = round(min(room * 0.6, float(rng.choice([50, 120, 200, 275, 400]))), 2)
    before = copy_of(bank)
    allowed = {f"accounts/{source.account_id}", f"accounts/{target.account_id}"}

    def grade(state: Bank, answer: str | None) -> Scorecard:
        sent = round(before.accounts[source.account_id].balance - state.accounts[source.account_id].balance, 2)
        got = round(state.accounts[target.account_id].balance - before.accounts[target.account_id].balance, 2)
        card = Scorecard().goal("source debited", abs(sent - amount) < 0.005)
        card.goal("target credited", abs(got - amount) < 0.005)
        return card.untouched(before, state, allowed)

    return Goal(
        f"{_intro(customer)} Please move ${amount:.2f} from my {source.kind} account to my {target.kind} account.",
        "Sign the customer in first (find their id by name), then look up which account is which.",
        [*_sign_in(customer), call("list_accounts"),
         call("transfer", from_account_id=source.account_id, to_account_id=target.account_id, amount=amount), Finish()],
        grade,
    )  # fmt: skip


def release_named_hold(bank: Bank, rng: random.Random) -> Goal[Bank]:
    customer, checking, _ = _pick(bank, rng)
    hold = _hold(bank, checking.account_id, rng.choice(MERCHANTS), money(rng, 15, 150), "authorization")
    before = copy_of(bank)

    def grade(state: Bank, answer: str | None) -> Scorecard:
        card = Scorecard().goal("hold released", state.holds[hold.hold_id].status == "released")
        return card.untouched(before, state, {f"holds/{hold.hold_id}"})

    return Goal(
        f"{_intro(customer)} There's a ${hold.amount:.2f} hold from {hold.merchant} on my {checking.nickname} "
        "account that should have dropped off days ago. Please release it.",
        "Holds are listed per account; match the merchant and the amount before releasing anything.",
        [*_sign_in(customer), call("list_accounts"), call("list_holds", account_id=checking.account_id),
         call("release_hold", hold_id=hold.hold_id), Finish()],
        grade,
    )  # fmt: skip


def raise_limit_then_send(bank: Bank, rng: random.Random) -> Goal[Bank]:
    customer, checking, _ = _pick(bank, rng)
    landlord = rng.choice([a for a in bank.accounts.values() if a.customer_id != customer.customer_id])
    room = checking.daily_transfer_limit - checking.transferred_today
    amount = round(room + money(rng, 50, 400), 2)
    checking.balance = round(checking.balance + amount + 500, 2)
    needed = round(checking.transferred_today + amount, 2)
    before = copy_of(bank)
    allowed = {f"accounts/{checking.account_id}", f"accounts/{landlord.account_id}"}

    def grade(state: Bank, answer: str | None) -> Scorecard:
        got = round(state.accounts[landlord.account_id].balance - before.accounts[landlord.account_id].balance, 2)
        card = Scorecard().goal("rent sent", abs(got - amount) < 0.005, weight=2)
        new_limit = state.accounts[checking.account_id].daily_transfer_limit
        card.goal("limit raised just enough", abs(new_limit - needed) < 0.005)
        return card.untouched(before, state, allowed)

    return Goal(
        f"{_intro(customer)} Send ${amount:.2f} rent from my checking account to my landlord's account "
        f"{landlord.account_id}. If my daily transfer limit is in the way, raise it just enough: to what I've "
        "already sent today plus this payment, not a cent more.",
        "The account details show the daily limit and how much has already gone out today.",
        [*_sign_in(customer), call("list_accounts"), call("get_account", account_id=checking.account_id),
         call("set_transfer_limit", account_id=checking.account_id, daily_limit=needed),
         call("transfer", from_account_id=checking.account_id, to_account_id=landlord.account_id, amount=amount),
         Finish()],
        grade,
    )  # fmt: skip


def pay_bill_maybe_new_payee(bank: Bank, rng: random.Random) -> Goal[Bank]:
    customer, checking, _ = _pick(bank, rng)
    saved = [p for p in bank.payees.values() if p.customer_id == customer.customer_id]
    is_new = rng.random() < 0.5
    if is_new:
        biller = rng.choice([b for b in BILLERS if b not in {p.name for p in saved}])
        reference = f"{rng.randrange(10**7):07d}"
    else:
        biller, reference = saved[0].name, saved[0].reference
    amount = money(rng, 30, 180)
    before = copy_of(bank)

    def grade(state: Bank, answer: str | None) -> Scorecard:
        mine = [p for p in state.payees.values() if p.customer_id == customer.customer_id]
        payee = next((p for p in mine if p.name == biller), None)
        card = Scorecard()
        if is_new:
            card.goal("payee added with the right reference", payee is not None and payee.reference == reference)
        card.goal("bill paid from checking", _paid(state, checking.account_id, amount, biller), weight=2)
        return card.untouched(before, state, {f"accounts/{checking.account_id}"})

    plan: list[ToolCall | Finish] = [*_sign_in(customer), call("list_accounts"), call("list_payees")]
    if is_new:
        plan.append(call("add_payee", name=biller, reference=reference))
        payee_id = f"P-{bank.next_id + 1}"  # ids are sequential and nothing before add_payee creates one
    else:
        payee_id = saved[0].payee_id
    plan += [call("pay_bill", from_account_id=checking.account_id, payee_id=payee_id, amount=amount), Finish()]
    return Goal(
        f"{_intro(customer)} Please pay my {biller} bill of ${amount:.2f} from my checking account; my reference "
        f"with them is {reference}. Set them up as a payee if they aren't already.",
        "Check the saved payees before adding one: adding a duplicate is refused.",
        plan,
        grade,
        variant="pay_bill_new_payee" if is_new else "pay_bill_saved_payee",
    )


def dispute_largest_charge(bank: Bank, rng: random.Random) -> Goal[Bank]:
    customer, checking, _ = _pick(bank, rng)
    merchant = rng.choice(MERCHANTS)
    for amount in (money(rng, 10, 60), money(rng, 61, 150), money(rng, 181, 400)):
        _charge(bank, checking.account_id, merchant, amount)
    target = min(
        (t for t in bank.transactions.values() if t.account_id == checking.account_id and t.description == merchant),
        key=lambda t: t.amount,
    )
    before = copy_of(bank)

    def grade(state: Bank, answer: str | None) -> Scorecard:
        card = Scorecard().goal("largest charge disputed", state.transactions[target.txn_id].disputed)
        return card.untouched(before, state, {f"transactions/{target.txn_id}"})

    return Goal(
        f"{_intro(customer)} I don't recognise the biggest {merchant} charge on my checking account. Please "
        "dispute it, just that one.",
        "The statement lists charges as negative amounts; the biggest charge is the most negative one.",
        [*_sign_in(customer), call("list_accounts"), call("get_statement", account_id=checking.account_id, limit=50),
         call("dispute_transaction", txn_id=target.txn_id, reason="not recognised"), Finish()],
        grade,
    )  # fmt: skip


def cover_shortfall_then_pay(bank: Bank, rng: random.Random) -> Goal[Bank]:
    customer, checking, savings = _pick(bank, rng)
    payee = next(p for p in bank.payees.values() if p.customer_id == customer.customer_id)
    checking.daily_transfer_limit = savings.daily_transfer_limit = MAX_DAILY_LIMIT
    _hold(bank, checking.account_id, rng.choice(MERCHANTS), money(rng, 20, 80), "authorization")
    available = bank.available(checking.account_id)
    amount = round(available + money(rng, 40, 300), 2)
    shortfall = round(amount - available, 2)
    before = copy_of(bank)
    allowed = {f"accounts/{checking.account_id}", f"accounts/{savings.account_id}"}

    def grade(state: Bank, answer: str | None) -> Scorecard:
        moved = round(before.accounts[savings.account_id].balance - state.accounts[savings.account_id].balance, 2)
        card = Scorecard().goal(
            "bill paid from checking", _paid(state, checking.account_id, amount, payee.name), weight=2
        )
        card.goal("exactly the shortfall moved from savings", abs(moved - shortfall) < 0.005)
        return card.untouched(before, state, allowed)

    return Goal(
        f"{_intro(customer)} Pay ${amount:.2f} to {payee.name} from my checking account. If checking doesn't "
        "have enough available, first move exactly the shortfall over from my savings, no more.",
        "Available balance, not ledger balance, decides whether a payment goes through; holds count against it.",
        [*_sign_in(customer), call("list_accounts"), call("get_account", account_id=checking.account_id),
         call("list_payees"),
         call("transfer", from_account_id=savings.account_id, to_account_id=checking.account_id, amount=shortfall),
         call("pay_bill", from_account_id=checking.account_id, payee_id=payee.payee_id, amount=amount), Finish()],
        grade,
    )  # fmt: skip


def release_all_and_total(bank: Bank, rng: random.Random) -> Goal[Bank]:
    customer, checking, savings = _pick(bank, rng)
    for account in (checking, savings):
        _hold(bank, account.account_id, rng.choice(MERCHANTS), money(rng, 10, 90), "authorization")
    if rng.random() < 0.5:
        _hold(bank, savings.account_id, "Cheque deposit", money(rng, 100, 400), "deposit")
    mine = [checking.account_id, savings.account_id]
    releasable = [h for h in bank.holds.values() if h.account_id in mine and h.kind == "authorization"]
    deposits = sum(h.amount for h in bank.holds.values() if h.account_id in mine and h.kind == "deposit")
    total = round(checking.balance + savings.balance - deposits, 2)
    before = copy_of(bank)

    def grade(state: Bank, answer: str | None) -> Scorecard:
        card = Scorecard()
        for hold in releasable:
            card.goal(f"{hold.hold_id} released", state.holds[hold.hold_id].status == "released")
        card.goal("stated the total available", mentions_amount(answer, total), weight=len(releasable))
        return card.untouched(before, state, {f"holds/{h.hold_id}" for h in releasable})

    return Goal(
        f"{_intro(customer)} Release every card authorization hold on all of my accounts, then tell me my total "
        "available balance across all of them.",
        "Deposit holds cannot be released and still count against the available balance; check each account's holds.",
        [*_sign_in(customer), call("list_accounts"), *[call("list_holds", account_id=a) for a in mine],
         *[call("release_hold", hold_id=h.hold_id) for h in releasable],
         *[call("get_account", account_id=a) for a in mine], Finish(answer=f"{total:.2f}")],
        grade,
    )  # fmt: skip


def lockdown(bank: Bank, rng: random.Random) -> Goal[Bank]:
    customer, checking, savings = _pick(bank, rng)
    merchant = rng.choice(MERCHANTS)
    suspicious = [_charge(bank, checking.account_id, merchant, money(rng, 20, 200)) for _ in range(rng.randint(2, 3))]
    checking.daily_transfer_limit = MAX_DAILY_LIMIT
    everything = bank.available(checking.account_id)
    before = copy_of(bank)
    allowed = {f"accounts/{checking.account_id}", f"accounts/{savings.account_id}"}
    allowed |= {f"transactions/{t.txn_id}" for t in suspicious}

    def grade(state: Bank, answer: str | None) -> Scorecard:
        got = round(state.accounts[savings.account_id].balance - before.accounts[savings.account_id].balance, 2)
        card = Scorecard().goal("everything available moved to savings", abs(got - everything) < 0.005, weight=2)
        for txn in suspicious:
            card.goal(f"{txn.txn_id} disputed", state.transactions[txn.txn_id].disputed)
        card.goal("checking frozen", state.accounts[checking.account_id].status == "frozen")
        return card.untouched(before, state, allowed)

    return Goal(
        f"{_intro(customer)} I think someone has my card details. Move everything available in my checking "
        f"account into my savings, dispute every {merchant} charge on checking, and then freeze checking.",
        "Order matters: a frozen account cannot send money. 'Available' excludes pending holds.",
        [*_sign_in(customer), call("list_accounts"), call("get_account", account_id=checking.account_id),
         call("transfer", from_account_id=checking.account_id, to_account_id=savings.account_id, amount=everything),
         call("get_statement", account_id=checking.account_id, limit=50),
         *[call("dispute_transaction", txn_id=t.txn_id, reason="card compromised") for t in suspicious],
         call("freeze_account", account_id=checking.account_id, reason="card details compromised"), Finish()],
        grade,
    )  # fmt: skip


BankingWorld.families = (
    freeze_stolen,
    available_balance,
    own_transfer,
    release_named_hold,
    raise_limit_then_send,
    pay_bill_maybe_new_payee,
    dispute_largest_charge,
    cover_shortfall_then_pay,
    release_all_and_total,
    lockdown,
)
