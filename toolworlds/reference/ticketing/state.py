"""The helpdesk's hidden state, and how a seed populates it."""

from __future__ import annotations

import random
from typing import Literal

from pydantic import BaseModel, Field

from toolworlds.records import SequentialIds
from toolworlds.reference.people import email_for, person_names

Tier = Literal["free", "pro", "enterprise"]
Team = Literal["billing", "technical", "accounts"]
Priority = Literal["low", "normal", "high", "urgent"]
Status = Literal["open", "pending", "in_progress", "resolved", "closed"]
Visibility = Literal["public", "internal"]

TIERS: tuple[Tier, ...] = ("free", "pro", "enterprise")
TEAMS: tuple[Team, ...] = ("billing", "technical", "accounts")
PRIORITIES: tuple[Priority, ...] = ("low", "normal", "high", "urgent")
STATUSES: tuple[Status, ...] = ("open", "pending", "in_progress", "resolved", "closed")
ACTIVE: tuple[Status, ...] = ("open", "pending", "in_progress")
MAX_ESCALATION = 2
LEAD = "lead"  # the author of comments the agent writes: the support lead on duty

SLA_HOURS: dict[Tier, dict[Priority, int]] = {
    "free": {"low": 120, "normal": 72, "high": 24, "urgent": 8},
    "pro": {"low": 96, "normal": 48, "high": 12, "urgent": 4},
    "enterprise": {"low": 48, "normal": 24, "high": 6, "urgent": 2},
}
TRANSITIONS: dict[Status, tuple[Status, ...]] = {
    "open": ("in_progress", "pending"),
    "pending": ("in_progress", "resolved"),
    "in_progress": ("pending", "resolved"),
    "resolved": ("closed", "in_progress"),
    "closed": (),
}

# What customers write in about, by the team that handles it: (subject, description).
SUBJECTS: dict[Team, tuple[tuple[str, str], ...]] = {
    "billing": (
        ("Charged twice this month", "Our card shows two identical charges for the same subscription period."),
        ("Refund not received", "We cancelled an add-on weeks ago and the promised refund never arrived."),
        ("Invoice has the wrong address", "Our invoices still list the old office address; finance needs it fixed."),
        ("Cannot update the card on file", "The billing page rejects our new card without saying why."),
        ("Question about annual pricing", "We would like to know what switching to yearly billing would cost."),
        ("Tax missing from invoice", "Our accountant needs the sales tax shown as a separate line."),
    ),
    "technical": (
        ("Login page times out", "Sign-in spins for a minute and then fails for everyone in the office."),
        ("CSV export fails", "Exporting the reports page to CSV ends with a generic error."),
        ("Webhooks arrive late", "Webhook deliveries reach our server hours after the events happen."),
        ("Mobile app crashes on launch", "The phone app closes right after the splash screen."),
        ("Search misses recent items", "Items created today do not show up in search results."),
        ("Password reset email never arrives", "Users ask for a reset link and nothing reaches their inbox."),
        ("Dashboard charts are empty", "The dashboard loads but every chart says there is no data."),
    ),
    "accounts": (
        ("Add another admin", "We need a second administrator while our main admin is on leave."),
        ("Transfer account ownership", "Ownership must move to our new operations manager."),
        ("Change the account email", "Our shared inbox moved, so the account email has to change."),
        ("Turn on single sign-on", "We want staff to sign in through our identity provider."),
        ("Remove a former employee", "Someone who left the company still has access to our workspace."),
        ("Merge two workspaces", "We accidentally created two workspaces and want them combined."),
    ),
}
SUBJECT_TEAM: dict[str, Team] = {subject: team for team, pairs in SUBJECTS.items() for subject, _ in pairs}
DESCRIPTIONS: dict[str, str] = {subject: text for pairs in SUBJECTS.values() for subject, text in pairs}
ALL_SUBJECTS: list[str] = list(SUBJECT_TEAM)
TAGS = ("bug", "feature-request", "follow-up", "docs", "churn-risk", "vip", "regression", "needs-info")
BREACH_TAG = "sla-breach"  # never handed out by `populate`, so a family can ask for it


# -- records --------------------------------------------------------------------------------------


class Customer(BaseModel):
    customer_id: str
    name: str
    email: str
    tier: Tier


class Agent(BaseModel):
    agent_id: str
    name: str
    team: Team
    on_shift: bool
    capacity: int = Field(description="The most active tickets this agent may hold at once.")


class Ticket(BaseModel):
    ticket_id: str
    customer_id: str
    subject: str
    description: str
    team: Team
    priority: Priority
    status: Status
    assignee_id: str | None = None
    created_at: int
    due_at: int = Field(description="The SLA deadline, in hours on the helpdesk clock.")
    escalation_level: int = 0
    escalation_reason: str | None = None
    tags: list[str] = Field(default_factory=list)
    merged_into: str | None = None


class Comment(BaseModel):
    comment_id: str
    ticket_id: str
    author: str = Field(description="An agent id, the customer's id, or 'lead' for the support lead.")
    visibility: Visibility
    body: str
    created_at: int


class Helpdesk(SequentialIds):
    customers: dict[str, Customer]
    agents: dict[str, Agent]
    tickets: dict[str, Ticket]
    comments: dict[str, Comment]
    now: int

    def load(self, agent_id: str) -> int:
        """How many active tickets an agent holds: what counts against their capacity."""
        return sum(1 for t in self.tickets.values() if t.assignee_id == agent_id and t.status in ACTIVE)

    def team(self, team: Team) -> list[Agent]:
        return [a for a in self.agents.values() if a.team == team]

    def sla(self, customer_id: str, priority: Priority) -> int:
        return SLA_HOURS[self.customers[customer_id].tier][priority]

    def tickets_of(self, customer_id: str) -> list[Ticket]:
        return [t for t in self.tickets.values() if t.customer_id == customer_id]

    def hours_left(self, ticket: Ticket) -> int:
        return ticket.due_at - self.now

    def has_support_reply(self, ticket: Ticket) -> bool:
        return any(
            c.ticket_id == ticket.ticket_id and c.visibility == "public" and c.author != ticket.customer_id
            for c in self.comments.values()
        )


# -- the hidden state for a seed ----------------------------------------------------------------


def populate(rng: random.Random) -> Helpdesk:
    desk = Helpdesk(customers={}, agents={}, tickets={}, comments={}, now=rng.randint(400, 600))
    names = person_names(rng, 17)
    rng.shuffle(names)
    for name in sorted(names[:8]):
        customer = Customer(customer_id=desk.new_id("CU"), name=name, email=email_for(name), tier=rng.choice(TIERS))
        desk.customers[customer.customer_id] = customer
    for index, name in enumerate(names[8:]):
        agent = Agent(
            agent_id=desk.new_id("AG"),
            name=name,
            team=TEAMS[index % len(TEAMS)],
            on_shift=rng.random() < 0.7,
            capacity=rng.choice([4, 5, 6]),
        )
        desk.agents[agent.agent_id] = agent
    for team in TEAMS:  # every team keeps at least two people on shift
        off_shift = [a for a in desk.team(team) if not a.on_shift]
        for agent in off_shift[: max(0, 2 - sum(a.on_shift for a in desk.team(team)))]:
            agent.on_shift = True
    for customer in list(desk.customers.values()):
        for subject in rng.sample(ALL_SUBJECTS, rng.randint(2, 4)):
            _populate_ticket(desk, rng, customer, subject)
    for team in TEAMS:  # and at least one of them with room for more work
        on_shift = [a for a in desk.team(team) if a.on_shift]
        if all(desk.load(a.agent_id) >= a.capacity for a in on_shift):
            on_shift[0].capacity = desk.load(on_shift[0].agent_id) + 2
    return desk


def _populate_ticket(desk: Helpdesk, rng: random.Random, customer: Customer, subject: str) -> Ticket:
    team = SUBJECT_TEAM[subject]
    priority = rng.choices(PRIORITIES, weights=(2, 4, 3, 1))[0]
    status = rng.choices(STATUSES, weights=(3, 2, 3, 1, 1))[0]
    free = [a.agent_id for a in desk.team(team) if desk.load(a.agent_id) < a.capacity]
    assignee: str | None = None
    if status == "open":
        assignee = rng.choice(free) if free and rng.random() < 0.5 else None
    elif status in ACTIVE:
        assignee = rng.choice(free) if free else None
        status = status if free else "open"
    else:
        assignee = rng.choice(desk.team(team)).agent_id
    sla = desk.sla(customer.customer_id, priority)
    if status not in ACTIVE:
        age = rng.randint(sla, sla + 200)
    elif rng.random() < 0.2:
        age = sla + rng.randint(1, 30)  # already past its deadline
    else:
        age = rng.randint(1, max(1, sla - 1))
    level = rng.choices([0, 1, 2], weights=(6, 2, 1))[0] if status in ACTIVE else 0
    tags = rng.sample(TAGS, rng.randint(0, 2))
    ticket = add_ticket(
        desk, customer, subject, priority=priority, status=status, assignee_id=assignee, age=age, level=level, tags=tags
    )
    if rng.random() < 0.4:
        record_comment(desk, ticket, customer.customer_id, "public", "Any news on this? It is holding us up.")
    if status in ("pending", "resolved", "closed") and assignee is not None:
        reply = "Could you send a screenshot?" if status == "pending" else "This is fixed now; thanks for waiting."
        record_comment(desk, ticket, assignee, "public", reply)
    if assignee is not None and rng.random() < 0.3:
        record_comment(desk, ticket, assignee, "internal", "Looked into it; likely a known issue.")
    return ticket


def add_ticket(
    desk: Helpdesk,
    customer: Customer,
    subject: str,
    *,
    priority: Priority,
    status: Status = "open",
    assignee_id: str | None = None,
    age: int = 1,
    team: Team | None = None,
    level: int = 0,
    tags: list[str] | None = None,
) -> Ticket:
    """A ticket filed `age` hours ago, with the SLA deadline its priority and the customer's plan give it."""
    created_at = desk.now - age
    ticket = Ticket(
        ticket_id=desk.new_id("T"),
        customer_id=customer.customer_id,
        subject=subject,
        description=DESCRIPTIONS[subject],
        team=team or SUBJECT_TEAM[subject],
        priority=priority,
        status=status,
        assignee_id=assignee_id,
        created_at=created_at,
        due_at=created_at + desk.sla(customer.customer_id, priority),
        escalation_level=level,
        escalation_reason="the customer chased for an update" if level else None,
        tags=tags or [],
    )
    desk.tickets[ticket.ticket_id] = ticket
    return ticket


def record_comment(desk: Helpdesk, ticket: Ticket, author: str, visibility: Visibility, body: str) -> Comment:
    at = min(desk.now, ticket.created_at + 1)
    comment = Comment(
        comment_id=desk.new_id("CM"),
        ticket_id=ticket.ticket_id,
        author=author,
        visibility=visibility,
        body=body,
        created_at=at,
    )
    desk.comments[comment.comment_id] = comment
    return comment


def set_age(desk: Helpdesk, ticket: Ticket, age: int) -> None:
    """Re-date a ticket to `age` hours old, keeping its deadline consistent with its priority."""
    ticket.created_at = desk.now - age
    ticket.due_at = ticket.created_at + desk.sla(ticket.customer_id, ticket.priority)
