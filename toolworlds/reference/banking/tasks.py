"""The banking tasks: one function per family, each with its instruction, hint, reference plan and grader."""

from __future__ import annotations

import random

from toolworlds.core import Finish, ToolCall, call
from toolworlds.reference.banking.state import (
    MAX_DAILY_LIMIT,
    Account,
    Bank,
    Customer,
    add_charge,
    add_hold,
)
from toolworlds.reference.people import BILLERS, MERCHANTS, money
from toolworlds.reference.scenario import Family, Goal
from toolworlds.scoring import Scorecard, copy_of, mentions_amount

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
        add_hold(bank, checking.account_id, rng.choice(MERCHANTS), money(rng, 20, 90), "authorization")
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
    hold = add_hold(bank, checking.account_id, rng.choice(MERCHANTS), money(rng, 15, 150), "authorization")
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
        payee_id = bank.upcoming_id("P")  # nothing before add_payee in the plan creates a record
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
        add_charge(bank, checking.account_id, merchant, amount)
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
    add_hold(bank, checking.account_id, rng.choice(MERCHANTS), money(rng, 20, 80), "authorization")
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
        add_hold(bank, account.account_id, rng.choice(MERCHANTS), money(rng, 10, 90), "authorization")
    if rng.random() < 0.5:
        add_hold(bank, savings.account_id, "Cheque deposit", money(rng, 100, 400), "deposit")
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
    suspicious = [
        add_charge(bank, checking.account_id, merchant, money(rng, 20, 200)) for _ in range(rng.randint(2, 3))
    ]
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


FAMILIES: tuple[Family[Bank], ...] = (
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
