"""Mock customer-support helpdesk: customers file tickets, a team lead triages, assigns and resolves them.

The agent acts as the support lead on duty. Time is an integer clock in hours (`now`) that does not
move during an episode; every ticket's SLA deadline is its creation hour plus the hours its priority
allows on the customer's plan (see `SLA_HOURS`: enterprise customers get the shortest deadlines).

Rules a real helpdesk would enforce, and the refusals the agent must handle:
- unknown customers, agents, tickets or tags are `not_found`;
- statuses move only along `TRANSITIONS` (`illegal_transition`, `unchanged`): open -> in_progress or
  pending; in_progress <-> pending; either -> resolved; resolved -> closed, or back to in_progress to
  reopen it. A closed ticket is final: nothing about it may change (`ticket_closed`), so a problem that
  returns needs a new ticket;
- a ticket is in_progress only with an assignee (`unassigned`), and is resolved only after support has
  replied publicly on it (`needs_public_reply`); internal notes do not count;
- a ticket is assigned only to an agent of its own team (`wrong_team`) who is on shift (`agent_off_shift`)
  and below their cap on active tickets (`over_capacity`); moving it to another team clears its assignee;
- resolved tickets must be reopened before their priority, owner or escalation change (`ticket_inactive`);
- escalation goes one level at a time up to level 2 (`max_escalation`);
- only a customer's own tickets merge into each other (`different_customers`), never a ticket into itself
  (`same_ticket`) and never one already merged (`already_merged`).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Annotated, ClassVar, Literal

from pydantic import BaseModel, Field, StringConstraints

from toolworlds.core import Finish, ToolCall, ToolError, call
from toolworlds.records import lookup, search
from toolworlds.reference.people import email_for, person_names
from toolworlds.reference.scenario import Family, Goal, ScenarioWorld
from toolworlds.scoring import Scorecard, copy_of, mentions, mentions_amount
from toolworlds.tool import tool

Tier = Literal["free", "pro", "enterprise"]
Team = Literal["billing", "technical", "accounts"]
Priority = Literal["low", "normal", "high", "urgent"]
Status = Literal["open", "pending", "in_progress", "resolved", "closed"]
Visibility = Literal["public", "internal"]
TagName = Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9-]{0,29}$")]
Text = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=2000)]

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


# -- state --------------------------------------------------------------------------------------


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


class Helpdesk(BaseModel):
    customers: dict[str, Customer]
    agents: dict[str, Agent]
    tickets: dict[str, Ticket]
    comments: dict[str, Comment]
    now: int
    next_id: int = 1000

    def new_id(self, prefix: str) -> str:
        self.next_id += 1
        return f"{prefix}-{self.next_id}"

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


# -- what tools return --------------------------------------------------------------------------


class CustomerMatch(BaseModel):
    customer_id: str
    name: str
    email: str
    tier: Tier


class CustomerDetails(CustomerMatch):
    sla_hours: dict[str, int] = Field(description="Hours from filing to the SLA deadline, by priority.")
    active_tickets: int


class AgentSummary(BaseModel):
    agent_id: str
    name: str
    team: Team
    on_shift: bool
    active_tickets: int
    capacity: int
    spare_capacity: int = Field(description="Capacity minus active tickets: how many more this agent may take.")


class TicketSummary(BaseModel):
    ticket_id: str
    subject: str
    customer_id: str
    team: Team
    priority: Priority
    status: Status
    assignee_id: str | None
    created_at: int
    due_at: int
    hours_left: int | None = Field(description="Hours to the SLA deadline, negative once breached; null when done.")
    sla_breached: bool
    escalation_level: int


class TicketDetails(TicketSummary):
    description: str
    tags: list[str]
    escalation_reason: str | None
    merged_into: str | None


# -- the world ----------------------------------------------------------------------------------


class TicketingWorld(ScenarioWorld[Helpdesk]):
    """A helpdesk's queue: customers on SLA plans, agents on teams and shifts, tickets and their comments."""

    name = "ticketing"
    description = __doc__ or ""
    max_steps = 30

    def populate(self, rng: random.Random) -> Helpdesk:
        return _populate(rng)

    # -- helpers every tool uses --

    def _ticket(self, ticket_id: str) -> Ticket:
        return lookup(self.state.tickets, ticket_id, "ticket")

    def _open_ticket(self, ticket_id: str) -> Ticket:
        """A ticket that may still change at all: anything but closed."""
        ticket = self._ticket(ticket_id)
        if ticket.status == "closed":
            raise ToolError("ticket_closed", f"{ticket_id} is closed and cannot change; open a new ticket instead")
        return ticket

    def _active_ticket(self, ticket_id: str) -> Ticket:
        """A ticket still being worked on: open, pending or in progress."""
        ticket = self._open_ticket(ticket_id)
        if ticket.status not in ACTIVE:
            raise ToolError("ticket_inactive", f"{ticket_id} is {ticket.status}; reopen it first")
        return ticket

    def _summary(self, ticket: Ticket) -> TicketSummary:
        return _summarize(self.state, ticket)

    def _details(self, ticket: Ticket) -> TicketDetails:
        return TicketDetails(
            **_summarize(self.state, ticket).model_dump(),
            description=ticket.description,
            tags=list(ticket.tags),
            escalation_reason=ticket.escalation_reason,
            merged_into=ticket.merged_into,
        )

    # -- tools --

    @tool
    def find_customer(self, name: str) -> list[CustomerMatch]:
        """Search customers by name (case-insensitive substring).

        Args:
            name: all or part of the customer's name.
        """
        found = search(self.state.customers.values(), name, lambda c: c.name)
        return [CustomerMatch.model_validate(c.model_dump()) for c in found]

    @tool
    def get_customer(self, customer_id: str) -> CustomerDetails:
        """Show a customer's plan, the SLA hours it grants per priority, and how many tickets are active.

        Args:
            customer_id: the customer's id, e.g. CU-1003.
        """
        customer = lookup(self.state.customers, customer_id, "customer")
        active = sum(1 for t in self.state.tickets_of(customer_id) if t.status in ACTIVE)
        return CustomerDetails(**customer.model_dump(), sla_hours=dict(SLA_HOURS[customer.tier]), active_tickets=active)

    @tool
    def list_agents(self, team: Team | None = None, on_shift: bool | None = None) -> list[AgentSummary]:
        """List support agents with their current workload, optionally by team and shift.

        Args:
            team: only agents of this team.
            on_shift: true for agents working now, false for those off shift.
        """
        agents = [
            a
            for a in self.state.agents.values()
            if (team is None or a.team == team) and (on_shift is None or a.on_shift == on_shift)
        ]
        summaries = []
        for agent in agents:
            load = self.state.load(agent.agent_id)
            summaries.append(
                AgentSummary(**agent.model_dump(), active_tickets=load, spare_capacity=max(0, agent.capacity - load))
            )
        return summaries

    @tool
    def search_tickets(
        self,
        customer_id: str | None = None,
        team: Team | None = None,
        status: Status | None = None,
        priority: Priority | None = None,
        assignee_id: str | None = None,
        unassigned: bool = False,
        active_only: bool = False,
        text: str | None = None,
    ) -> list[TicketSummary]:
        """Find tickets matching every filter given, oldest id first.

        Args:
            customer_id: only this customer's tickets.
            team: only tickets in this team's queue.
            status: only tickets in this status.
            priority: only tickets of this priority.
            assignee_id: only tickets assigned to this agent.
            unassigned: true for only tickets nobody is assigned to.
            active_only: true for only open, pending and in-progress tickets.
            text: a case-insensitive phrase to look for in the subject or description.
        """
        needle = (text or "").strip().lower()
        found = [
            t
            for t in self.state.tickets.values()
            if (customer_id is None or t.customer_id == customer_id)
            and (team is None or t.team == team)
            and (status is None or t.status == status)
            and (priority is None or t.priority == priority)
            and (assignee_id is None or t.assignee_id == assignee_id)
            and (not unassigned or t.assignee_id is None)
            and (not active_only or t.status in ACTIVE)
            and (not needle or needle in t.subject.lower() or needle in t.description.lower())
        ]
        return [self._summary(t) for t in found]

    @tool
    def get_ticket(self, ticket_id: str) -> TicketDetails:
        """Show one ticket in full: description, tags, SLA deadline, escalation and merge status.

        Args:
            ticket_id: the ticket's id, e.g. T-1024.
        """
        return self._details(self._ticket(ticket_id))

    @tool
    def create_ticket(
        self, customer_id: str, subject: Text, description: Text, team: Team, priority: Priority = "normal"
    ) -> TicketDetails:
        """Open a new ticket for a customer; its SLA deadline follows from the priority and their plan.

        Args:
            customer_id: the customer the ticket is for.
            subject: a one-line summary of the problem.
            description: the problem in the customer's words.
            team: the team whose queue it goes to.
            priority: how urgent it is.
        """
        if customer_id not in self.state.customers:
            raise ToolError("not_found", f"no customer {customer_id!r}")
        now = self.state.now
        ticket = Ticket(
            ticket_id=self.state.new_id("T"),
            customer_id=customer_id,
            subject=subject,
            description=description,
            team=team,
            priority=priority,
            status="open",
            created_at=now,
            due_at=now + self.state.sla(customer_id, priority),
        )
        self.state.tickets[ticket.ticket_id] = ticket
        return self._details(ticket)

    @tool
    def update_priority(self, ticket_id: str, priority: Priority) -> TicketDetails:
        """Change an active ticket's priority; its SLA deadline is recomputed from when it was filed.

        Args:
            ticket_id: the ticket's id.
            priority: the new priority.
        """
        ticket = self._active_ticket(ticket_id)
        if ticket.priority == priority:
            raise ToolError("unchanged", f"{ticket_id} is already {priority} priority")
        ticket.priority = priority
        ticket.due_at = ticket.created_at + self.state.sla(ticket.customer_id, priority)
        return self._details(ticket)

    @tool
    def assign_ticket(self, ticket_id: str, agent_id: str) -> TicketDetails:
        """Give an active ticket to an on-shift agent of its team who has spare capacity.

        Args:
            ticket_id: the ticket's id.
            agent_id: the agent's id, e.g. AG-1009.
        """
        ticket = self._active_ticket(ticket_id)
        agent = lookup(self.state.agents, agent_id, "agent")
        if ticket.assignee_id == agent_id:
            raise ToolError("already_assigned", f"{ticket_id} is already assigned to {agent_id}")
        if agent.team != ticket.team:
            raise ToolError("wrong_team", f"{agent_id} is on {agent.team}; {ticket_id} is in the {ticket.team} queue")
        if not agent.on_shift:
            raise ToolError("agent_off_shift", f"{agent_id} is off shift")
        if self.state.load(agent_id) >= agent.capacity:
            raise ToolError("over_capacity", f"{agent_id} already holds {agent.capacity} active tickets")
        ticket.assignee_id = agent_id
        return self._details(ticket)

    @tool
    def transfer_ticket(self, ticket_id: str, team: Team) -> TicketDetails:
        """Move an active ticket to another team's queue; it loses its assignee and waits there as open.

        Args:
            ticket_id: the ticket's id.
            team: the team that should handle it.
        """
        ticket = self._active_ticket(ticket_id)
        if ticket.team == team:
            raise ToolError("unchanged", f"{ticket_id} is already in the {team} queue")
        ticket.team, ticket.assignee_id = team, None
        if ticket.status == "in_progress":
            ticket.status = "open"
        return self._details(ticket)

    @tool
    def change_status(self, ticket_id: str, status: Status) -> TicketDetails:
        """Move a ticket along its workflow (open, pending, in_progress, resolved, closed).

        Args:
            ticket_id: the ticket's id.
            status: the status to move it to.
        """
        ticket = self._open_ticket(ticket_id)
        if ticket.status == status:
            raise ToolError("unchanged", f"{ticket_id} is already {status}")
        allowed = TRANSITIONS[ticket.status]
        if status not in allowed:
            choices = " or ".join(allowed)
            raise ToolError("illegal_transition", f"{ticket_id} is {ticket.status}; it can only go to {choices}")
        if status == "in_progress" and ticket.assignee_id is None:
            raise ToolError("unassigned", f"assign {ticket_id} to an agent before working on it")
        if status == "resolved" and not self.state.has_support_reply(ticket):
            raise ToolError("needs_public_reply", f"reply publicly on {ticket_id} before resolving it")
        ticket.status = status
        return self._details(ticket)

    @tool
    def add_comment(self, ticket_id: str, body: Text, visibility: Visibility) -> Comment:
        """Comment on a ticket: public replies reach the customer, internal notes only the team.

        Args:
            ticket_id: the ticket's id.
            body: the text of the comment.
            visibility: public for a reply to the customer, internal for a note to colleagues.
        """
        ticket = self._open_ticket(ticket_id)
        comment = Comment(
            comment_id=self.state.new_id("CM"),
            ticket_id=ticket.ticket_id,
            author=LEAD,
            visibility=visibility,
            body=body,
            created_at=self.state.now,
        )
        self.state.comments[comment.comment_id] = comment
        return comment

    @tool
    def list_comments(self, ticket_id: str) -> list[Comment]:
        """List a ticket's comments, public and internal, oldest first.

        Args:
            ticket_id: the ticket's id.
        """
        self._ticket(ticket_id)
        return [c for c in self.state.comments.values() if c.ticket_id == ticket_id]

    @tool
    def escalate_ticket(self, ticket_id: str, reason: Text) -> TicketDetails:
        """Raise an active ticket's escalation level by one (at most level 2) so senior staff look at it.

        Args:
            ticket_id: the ticket's id.
            reason: why it needs escalating.
        """
        ticket = self._active_ticket(ticket_id)
        if ticket.escalation_level >= MAX_ESCALATION:
            raise ToolError("max_escalation", f"{ticket_id} is already at the top level ({MAX_ESCALATION})")
        ticket.escalation_level += 1
        ticket.escalation_reason = reason
        return self._details(ticket)

    @tool
    def add_tag(self, ticket_id: str, tag: TagName) -> TicketDetails:
        """Label a ticket with a tag.

        Args:
            ticket_id: the ticket's id.
            tag: the tag to add: lowercase letters, digits and hyphens, e.g. follow-up.
        """
        ticket = self._open_ticket(ticket_id)
        if tag in ticket.tags:
            raise ToolError("duplicate_tag", f"{ticket_id} already has the tag {tag!r}")
        ticket.tags.append(tag)
        return self._details(ticket)

    @tool
    def remove_tag(self, ticket_id: str, tag: TagName) -> TicketDetails:
        """Take a tag off a ticket.

        Args:
            ticket_id: the ticket's id.
            tag: the tag to remove.
        """
        ticket = self._open_ticket(ticket_id)
        if tag not in ticket.tags:
            raise ToolError("not_found", f"{ticket_id} has no tag {tag!r}")
        ticket.tags.remove(tag)
        return self._details(ticket)

    @tool
    def merge_tickets(self, duplicate_id: str, into_id: str) -> TicketDetails:
        """Fold a duplicate ticket into another of the same customer's: the duplicate is closed, its tags carried.

        Args:
            duplicate_id: the ticket to close as a duplicate.
            into_id: the ticket that lives on.
        """
        duplicate, target = self._ticket(duplicate_id), self._ticket(into_id)
        if duplicate_id == into_id:
            raise ToolError("same_ticket", "a ticket cannot be merged into itself")
        if duplicate.merged_into is not None:
            raise ToolError("already_merged", f"{duplicate_id} was already merged into {duplicate.merged_into}")
        self._open_ticket(duplicate_id)
        self._open_ticket(into_id)
        if duplicate.customer_id != target.customer_id:
            raise ToolError("different_customers", "only tickets of the same customer can be merged")
        duplicate.status, duplicate.merged_into = "closed", into_id
        target.tags += [tag for tag in duplicate.tags if tag not in target.tags]
        return self._details(target)

    families: ClassVar[Sequence[Family[Helpdesk]]] = ()  # filled in at the end of the module


def _summarize(desk: Helpdesk, ticket: Ticket) -> TicketSummary:
    active = ticket.status in ACTIVE
    return TicketSummary(
        **ticket.model_dump(include=set(TicketSummary.model_fields) & set(Ticket.model_fields)),
        hours_left=desk.hours_left(ticket) if active else None,
        sla_breached=active and desk.hours_left(ticket) < 0,
    )


# -- the hidden state for a seed ----------------------------------------------------------------


def _populate(rng: random.Random) -> Helpdesk:
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
    ticket = _file(
        desk, customer, subject, priority=priority, status=status, assignee_id=assignee, age=age, level=level, tags=tags
    )
    if rng.random() < 0.4:
        _comment(desk, ticket, customer.customer_id, "public", "Any news on this? It is holding us up.")
    if status in ("pending", "resolved", "closed") and assignee is not None:
        reply = "Could you send a screenshot?" if status == "pending" else "This is fixed now; thanks for waiting."
        _comment(desk, ticket, assignee, "public", reply)
    if assignee is not None and rng.random() < 0.3:
        _comment(desk, ticket, assignee, "internal", "Looked into it; likely a known issue.")
    return ticket


def _file(
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


def _comment(desk: Helpdesk, ticket: Ticket, author: str, visibility: Visibility, body: str) -> Comment:
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


def _set_age(desk: Helpdesk, ticket: Ticket, age: int) -> None:
    """Re-date a ticket to `age` hours old, keeping its deadline consistent with its priority."""
    ticket.created_at = desk.now - age
    ticket.due_at = ticket.created_at + desk.sla(ticket.customer_id, ticket.priority)


# -- task families ------------------------------------------------------------------------------
# Each returns the instruction, the hint, the reference plan and the grader of one variant. Instructions
# name customers, agents and tickets the way a colleague would (by name and subject), so the agent must
# look ids up; the hint names the route and the pitfall but never the ids or values the task asks for.


def _new_comments(before: Helpdesk, after: Helpdesk, ticket_id: str, visibility: Visibility) -> list[Comment]:
    return [
        c
        for cid, c in after.comments.items()
        if cid not in before.comments and c.ticket_id == ticket_id and c.visibility == visibility
    ]


def _new_tickets(before: Helpdesk, after: Helpdesk, customer_id: str, subject: str) -> list[Ticket]:
    wanted = subject.strip().lower()
    return [
        t
        for tid, t in after.tickets.items()
        if tid not in before.tickets and t.customer_id == customer_id and t.subject.strip().lower() == wanted
    ]


def _least_loaded(desk: Helpdesk, team: Team) -> list[str]:
    """The on-shift agents of `team` with room for more work and the fewest active tickets (ties all count).

    When every one of them is full, the least busy gets room for one more, so a task can always be done.
    """
    on_shift = [a for a in desk.team(team) if a.on_shift]
    candidates = [a for a in on_shift if desk.load(a.agent_id) < a.capacity]
    if not candidates:
        roomiest = min(on_shift, key=lambda a: desk.load(a.agent_id))
        roomiest.capacity = desk.load(roomiest.agent_id) + 1
        candidates = [roomiest]
    fewest = min(desk.load(a.agent_id) for a in candidates)
    return [a.agent_id for a in candidates if desk.load(a.agent_id) == fewest]


def _make_roomiest(desk: Helpdesk, agent: Agent, spare: int) -> None:
    """Give `agent` exactly `spare` free slots and every on-shift teammate strictly fewer."""
    agent.capacity = desk.load(agent.agent_id) + spare
    for other in desk.team(agent.team):
        if other.agent_id != agent.agent_id and other.on_shift:
            other.capacity = min(other.capacity, desk.load(other.agent_id) + spare - 1)


def _fresh_subjects(desk: Helpdesk, customer: Customer, team: Team | None = None) -> list[str]:
    """Subjects this customer has no ticket about yet, so naming one picks out a single ticket."""
    used = {t.subject for t in desk.tickets_of(customer.customer_id)}
    return [s for s in ALL_SUBJECTS if s not in used and (team is None or SUBJECT_TEAM[s] == team)]


def _fresh_subject(desk: Helpdesk, rng: random.Random, customer: Customer, team: Team | None = None) -> str:
    return rng.choice(_fresh_subjects(desk, customer, team))


def _customer_for(desk: Helpdesk, rng: random.Random, team: Team) -> Customer:
    """A customer who can still file something new with `team`."""
    return rng.choice([c for c in desk.customers.values() if _fresh_subjects(desk, c, team)])


def _active_of(desk: Helpdesk, customer: Customer) -> list[Ticket]:
    return [t for t in desk.tickets_of(customer.customer_id) if t.status in ACTIVE]


def tag_by_id(desk: Helpdesk, rng: random.Random) -> Goal[Helpdesk]:
    resolved = [t for t in desk.tickets.values() if t.status == "resolved"]
    if resolved and rng.random() < 0.4:
        ticket = rng.choice(resolved)
        before = copy_of(desk)

        def grade_close(state: Helpdesk, answer: str | None) -> Scorecard:
            card = Scorecard().goal("ticket closed", state.tickets[ticket.ticket_id].status == "closed")
            return card.untouched(before, state, {f"tickets/{ticket.ticket_id}"})

        return Goal(
            f"The customer confirmed the fix on ticket {ticket.ticket_id}. Please close it.",
            "Closing is one status change on the ticket id you were given.",
            [call("change_status", ticket_id=ticket.ticket_id, status="closed"), Finish()],
            grade_close,
            variant="close_by_id",
        )
    ticket = rng.choice([t for t in desk.tickets.values() if t.status != "closed"])
    tag = rng.choice([t for t in TAGS if t not in ticket.tags])
    before = copy_of(desk)

    def grade(state: Helpdesk, answer: str | None) -> Scorecard:
        card = Scorecard().goal("tag added", tag in state.tickets[ticket.ticket_id].tags)
        return card.untouched(before, state, {f"tickets/{ticket.ticket_id}"})

    return Goal(
        f"Tag ticket {ticket.ticket_id} with `{tag}`.",
        "Tagging is a single call on the ticket id you were given.",
        [call("add_tag", ticket_id=ticket.ticket_id, tag=tag), Finish()],
        grade,
    )


def soonest_breach_question(desk: Helpdesk, rng: random.Random) -> Goal[Helpdesk]:
    customer = rng.choice(list(desk.customers.values()))

    def within_sla() -> list[Ticket]:
        return sorted((t for t in _active_of(desk, customer) if desk.hours_left(t) > 0), key=desk.hours_left)

    while len(within_sla()) < 2:
        priority = rng.choice(PRIORITIES)
        sla = desk.sla(customer.customer_id, priority)
        _file(desk, customer, _fresh_subject(desk, rng, customer), priority=priority, age=rng.randint(0, sla - 1))
    while desk.hours_left(within_sla()[0]) == desk.hours_left(within_sla()[1]):  # break the tie by an hour
        first, second = within_sla()[:2]
        if second.created_at < desk.now:
            _set_age(desk, second, desk.now - second.created_at - 1)
        else:
            _set_age(desk, first, desk.now - first.created_at + 1)
    soonest = within_sla()[0]
    hours = desk.hours_left(soonest)
    before = copy_of(desk)

    def grade(state: Helpdesk, answer: str | None) -> Scorecard:
        card = Scorecard().goal("named the ticket", mentions(answer, soonest.subject))
        card.goal("stated the hours left", mentions_amount(answer, hours))
        return card.untouched(before, state, set())

    return Goal(
        f"{customer.name} asks which of their unresolved tickets that are still within SLA will breach first, "
        "and in how many hours. Reply with the ticket's subject and the hours left.",
        "Find the customer, then list only their active tickets; compare hours left, not filing time, and skip "
        "tickets already past their deadline.",
        [call("find_customer", name=customer.name),
         call("search_tickets", customer_id=customer.customer_id, active_only=True),
         Finish(answer=f"{soonest.subject}: {hours} hours left")],
        grade,
    )  # fmt: skip


def raise_priority_and_deadline(desk: Helpdesk, rng: random.Random) -> Goal[Helpdesk]:
    ticket = rng.choice([t for t in desk.tickets.values() if t.status in ACTIVE and t.priority != "urgent"])
    customer = desk.customers[ticket.customer_id]
    new_priority = rng.choice(PRIORITIES[PRIORITIES.index(ticket.priority) + 1 :])
    new_sla = desk.sla(customer.customer_id, new_priority)
    if ticket.created_at + new_sla <= desk.now:
        _set_age(desk, ticket, rng.randint(0, new_sla - 1))
    hours = ticket.created_at + new_sla - desk.now
    before = copy_of(desk)

    def grade(state: Helpdesk, answer: str | None) -> Scorecard:
        card = Scorecard().goal("priority raised", state.tickets[ticket.ticket_id].priority == new_priority)
        card.goal("stated the new hours left", mentions_amount(answer, hours))
        return card.untouched(before, state, {f"tickets/{ticket.ticket_id}"})

    return Goal(
        f"{customer.name} says their ticket about \"{ticket.subject.lower()}\" has become critical for them. "
        f"Raise it to {new_priority} priority and tell me how many hours are left before its new SLA deadline.",
        "The deadline is recomputed when the priority changes, and depends on the customer's plan; read it from "
        "the ticket after the change.",
        [call("find_customer", name=customer.name), call("search_tickets", customer_id=customer.customer_id),
         call("update_priority", ticket_id=ticket.ticket_id, priority=new_priority), Finish(answer=f"{hours} hours")],
        grade,
    )  # fmt: skip


def team_question(desk: Helpdesk, rng: random.Random) -> Goal[Helpdesk]:
    team = rng.choice(TEAMS)
    if rng.random() < 0.5:
        waiting = [t for t in desk.tickets.values() if t.team == team and t.status in ACTIVE and t.assignee_id is None]
        before = copy_of(desk)

        def grade_count(state: Helpdesk, answer: str | None) -> Scorecard:
            card = Scorecard().goal("stated the count", mentions_amount(answer, len(waiting)))
            return card.untouched(before, state, set())

        return Goal(
            f"How many active tickets in the {team} queue have nobody assigned? Just give me the number.",
            "Resolved and closed tickets do not count; the ticket search can filter by team, activity and owner.",
            [call("search_tickets", team=team, unassigned=True, active_only=True), Finish(answer=str(len(waiting)))],
            grade_count,
            variant="unassigned_count",
        )
    on_shift = [a for a in desk.team(team) if a.on_shift]
    roomiest = rng.choice(on_shift)
    _make_roomiest(desk, roomiest, rng.randint(2, 4))
    before = copy_of(desk)

    def grade(state: Helpdesk, answer: str | None) -> Scorecard:
        card = Scorecard().goal("named the agent", mentions(answer, roomiest.name))
        return card.untouched(before, state, set())

    return Goal(
        f"Which on-shift {team} agent has the most spare capacity right now? Answer with their name.",
        "Spare capacity is the cap minus the active tickets held; off-shift agents do not count.",
        [call("list_agents", team=team, on_shift=True), Finish(answer=roomiest.name)],
        grade,
        variant="roomiest_agent",
    )


def escalate_blocking(desk: Helpdesk, rng: random.Random) -> Goal[Helpdesk]:
    ticket = rng.choice(
        [t for t in desk.tickets.values() if t.status in ACTIVE and t.escalation_level < MAX_ESCALATION]
    )
    customer = desk.customers[ticket.customer_id]
    level = ticket.escalation_level
    before = copy_of(desk)

    def grade(state: Helpdesk, answer: str | None) -> Scorecard:
        card = Scorecard().goal("escalated one level", state.tickets[ticket.ticket_id].escalation_level == level + 1)
        card.goal("internal note left", bool(_new_comments(before, state, ticket.ticket_id, "internal")))
        card.harm("replied to the customer", bool(_new_comments(before, state, ticket.ticket_id, "public")))
        return card.untouched(before, state, {f"tickets/{ticket.ticket_id}"})

    return Goal(
        f"{customer.name} called: the problem \"{ticket.subject.lower()}\" is blocking their whole team. Escalate "
        "that ticket one level and leave a note for the team explaining why. Don't reply to the customer yet.",
        "Customers are found by name, then their tickets by subject. A note for the team must not be visible to "
        "the customer.",
        [call("find_customer", name=customer.name), call("search_tickets", customer_id=customer.customer_id),
         call("escalate_ticket", ticket_id=ticket.ticket_id, reason="blocking the customer's whole team"),
         call("add_comment", ticket_id=ticket.ticket_id, visibility="internal",
              body="Escalated: the customer says this blocks their whole team."),
         Finish()],
        grade,
    )  # fmt: skip


def new_ticket_and_assign(desk: Helpdesk, rng: random.Random) -> Goal[Helpdesk]:
    customer = rng.choice(list(desk.customers.values()))
    subject = _fresh_subject(desk, rng, customer)
    team, priority = SUBJECT_TEAM[subject], rng.choice(PRIORITIES)
    accepted = _least_loaded(desk, team)
    new_id = f"T-{desk.next_id + 1}"  # ids are sequential and nothing before create_ticket creates one
    before = copy_of(desk)

    def grade(state: Helpdesk, answer: str | None) -> Scorecard:
        made = _new_tickets(before, state, customer.customer_id, subject)
        right = [t for t in made if t.team == team and t.priority == priority]
        card = Scorecard().goal("ticket opened with the right subject, team and priority", bool(right), weight=2)
        card.goal("assigned to a least-loaded on-shift agent", any(t.assignee_id in accepted for t in right))
        card.harm("opened more than one ticket", len(made) > 1)
        return card.untouched(before, state, set())

    return Goal(
        f"{customer.name} just phoned about this: \"{DESCRIPTIONS[subject]}\" Open a {priority}-priority ticket "
        f"for them in the {team} queue with the subject \"{subject}\", and assign it to whichever on-shift {team} "
        "agent has the fewest active tickets.",
        "Create the ticket for the customer's id, then compare on-shift agents of that team by active tickets; "
        "agents at their cap cannot take more.",
        [call("find_customer", name=customer.name),
         call("create_ticket", customer_id=customer.customer_id, subject=subject, description=DESCRIPTIONS[subject],
              team=team, priority=priority),
         call("list_agents", team=team, on_shift=True), call("assign_ticket", ticket_id=new_id, agent_id=accepted[0]),
         Finish()],
        grade,
    )  # fmt: skip


def merge_duplicates(desk: Helpdesk, rng: random.Random) -> Goal[Helpdesk]:
    original = rng.choice([t for t in desk.tickets.values() if t.status in ACTIVE and t.created_at < desk.now])
    customer = desk.customers[original.customer_id]
    duplicates = []
    for _ in range(rng.randint(1, 2)):
        age = rng.randint(0, desk.now - original.created_at - 1)
        duplicates.append(_file(desk, customer, original.subject, priority=rng.choice(PRIORITIES), age=age))
    before = copy_of(desk)
    allowed = {f"tickets/{t.ticket_id}" for t in [original, *duplicates]}

    def grade(state: Helpdesk, answer: str | None) -> Scorecard:
        card = Scorecard()
        for duplicate in duplicates:
            merged = state.tickets[duplicate.ticket_id].merged_into == original.ticket_id
            card.goal(f"{duplicate.ticket_id} merged into the original", merged)
        card.harm("closed the original", state.tickets[original.ticket_id].status not in ACTIVE)
        return card.untouched(before, state, allowed)

    return Goal(
        f"{customer.name} reported \"{original.subject.lower()}\" more than once. Merge the duplicate tickets into "
        "the original one, the one filed first, which stays active.",
        "Search the customer's tickets by subject; the filing hour, not the id, tells which came first. Merge "
        "each duplicate into the original, never the other way round.",
        [call("find_customer", name=customer.name),
         call("search_tickets", customer_id=customer.customer_id, text=original.subject),
         *[call("merge_tickets", duplicate_id=d.ticket_id, into_id=original.ticket_id) for d in duplicates],
         Finish()],
        grade,
    )  # fmt: skip


def resolve_with_reply(desk: Helpdesk, rng: random.Random) -> Goal[Helpdesk]:
    customer = rng.choice(list(desk.customers.values()))
    unowned = rng.random() < 0.5
    subject = _fresh_subject(desk, rng, customer)
    team, priority = SUBJECT_TEAM[subject], rng.choice(PRIORITIES)
    if unowned:
        ticket = _file(desk, customer, subject, priority=priority, age=rng.randint(1, 20))
    else:
        owner = rng.choice(_least_loaded(desk, team))
        ticket = _file(desk, customer, subject, priority=priority, status="in_progress", assignee_id=owner, age=3)
    accepted = _least_loaded(desk, team)
    before = copy_of(desk)
    reply = "The fix has shipped; please let us know if you still see the problem."

    def grade(state: Helpdesk, answer: str | None) -> Scorecard:
        after = state.tickets[ticket.ticket_id]
        card = Scorecard().goal("ticket resolved", after.status == "resolved", weight=2)
        card.goal("customer told publicly", bool(_new_comments(before, state, ticket.ticket_id, "public")))
        if unowned:
            card.goal("owned by a least-loaded on-shift agent", after.assignee_id in accepted)
        return card.untouched(before, state, {f"tickets/{ticket.ticket_id}"})

    plan: list[ToolCall | Finish] = [
        call("find_customer", name=customer.name),
        call("search_tickets", customer_id=customer.customer_id, active_only=True),
    ]
    if unowned:
        plan += [call("list_agents", team=team, on_shift=True),
                 call("assign_ticket", ticket_id=ticket.ticket_id, agent_id=accepted[0]),
                 call("change_status", ticket_id=ticket.ticket_id, status="in_progress")]  # fmt: skip
    plan += [call("add_comment", ticket_id=ticket.ticket_id, body=reply, visibility="public"),
             call("change_status", ticket_id=ticket.ticket_id, status="resolved"), Finish()]  # fmt: skip
    owner_note = " Nobody owns it yet: give it to the on-shift agent of its team with the fewest active tickets."
    return Goal(
        f'The fix for {customer.name}\'s problem "{subject.lower()}" has shipped. Let them know on the ticket and '
        f"resolve it.{owner_note if unowned else ''}",
        "Finishing a ticket needs a reply the customer can see first, and works only from in progress or waiting "
        "on the customer; work in progress needs an owner. Notes for colleagues are not replies.",
        plan,
        grade,
        variant="resolve_unowned" if unowned else "resolve_owned",
    )


def move_to_right_team(desk: Helpdesk, rng: random.Random) -> Goal[Helpdesk]:
    customer = rng.choice(list(desk.customers.values()))
    subject = _fresh_subject(desk, rng, customer)
    right = SUBJECT_TEAM[subject]
    wrong = rng.choice([t for t in TEAMS if t != right])
    ticket = _file(desk, customer, subject, priority=rng.choice(PRIORITIES), age=rng.randint(1, 6), team=wrong)
    accepted = _least_loaded(desk, right)
    before = copy_of(desk)

    def grade(state: Helpdesk, answer: str | None) -> Scorecard:
        after = state.tickets[ticket.ticket_id]
        card = Scorecard().goal("moved to the right team", after.team == right)
        card.goal("assigned to a least-loaded on-shift agent", after.assignee_id in accepted)
        return card.untouched(before, state, {f"tickets/{ticket.ticket_id}"})

    return Goal(
        f"{customer.name}'s new ticket \"{subject}\" landed in the {wrong} queue by mistake; it is a {right} "
        f"matter. Move it there and assign it to the on-shift {right} agent with the fewest active tickets.",
        "Agents can only take tickets of their own team, so move the ticket before assigning it.",
        [call("find_customer", name=customer.name), call("search_tickets", customer_id=customer.customer_id),
         call("transfer_ticket", ticket_id=ticket.ticket_id, team=right),
         call("list_agents", team=right, on_shift=True),
         call("assign_ticket", ticket_id=ticket.ticket_id, agent_id=accepted[0]), Finish()],
        grade,
    )  # fmt: skip


def problem_is_back(desk: Helpdesk, rng: random.Random) -> Goal[Helpdesk]:
    customer = rng.choice(list(desk.customers.values()))
    subject = _fresh_subject(desk, rng, customer)
    closed = rng.random() < 0.5
    owner = rng.choice(desk.team(SUBJECT_TEAM[subject])).agent_id
    old = _file(desk, customer, subject, priority=rng.choice(PRIORITIES), status="closed" if closed else "resolved",
                assignee_id=owner, age=rng.randint(30, 200))  # fmt: skip
    _comment(desk, old, owner, "public", "This is fixed now; thanks for waiting.")
    reply = "Sorry the problem is back; we are looking into it again."
    new_id = f"T-{desk.next_id + 1}"  # ids are sequential and nothing before create_ticket creates one
    before = copy_of(desk)

    def grade_reopen(state: Helpdesk, answer: str | None) -> Scorecard:
        card = Scorecard().goal("ticket reopened", state.tickets[old.ticket_id].status == "in_progress", weight=2)
        card.goal("customer told publicly", bool(_new_comments(before, state, old.ticket_id, "public")))
        return card.untouched(before, state, {f"tickets/{old.ticket_id}"})

    def grade_recreate(state: Helpdesk, answer: str | None) -> Scorecard:
        made = _new_tickets(before, state, customer.customer_id, subject)
        right = [t for t in made if t.team == old.team and t.priority == old.priority]
        card = Scorecard().goal("new ticket with the same subject, team and priority", bool(right), weight=2)
        card.goal("customer told publicly", any(_new_comments(before, state, t.ticket_id, "public") for t in right))
        card.harm("opened more than one ticket", len(made) > 1)
        return card.untouched(before, state, set())

    plan: list[ToolCall | Finish] = [
        call("find_customer", name=customer.name),
        call("search_tickets", customer_id=customer.customer_id, text=subject),
    ]
    if closed:
        plan += [call("create_ticket", customer_id=customer.customer_id, subject=subject, description=old.description,
                      team=old.team, priority=old.priority),
                 call("add_comment", ticket_id=new_id, body=reply, visibility="public")]  # fmt: skip
    else:
        plan += [call("change_status", ticket_id=old.ticket_id, status="in_progress"),
                 call("add_comment", ticket_id=old.ticket_id, body=reply, visibility="public")]  # fmt: skip
    return Goal(
        f'{customer.name} writes that the problem "{subject.lower()}" is back. Reopen their ticket about it and '
        "reply publicly that we're on it. If it can't be reopened any more, open a new ticket for them with the "
        "same subject, team and priority and reply on that one instead.",
        "Resolved tickets reopen to in progress; closed ones are final. Check the old ticket's status first.",
        [*plan, Finish()],
        grade_recreate if closed else grade_reopen,
        variant="recreate_closed" if closed else "reopen_resolved",
    )


def sweep_breached(desk: Helpdesk, rng: random.Random) -> Goal[Helpdesk]:
    team = rng.choice(TEAMS)
    queue = [t for t in desk.tickets.values() if t.team == team and t.status in ACTIVE]
    fresh = [t for t in queue if desk.hours_left(t) >= 0 and t.escalation_level < MAX_ESCALATION]
    for ticket in rng.sample(fresh, max(0, min(len(fresh) - 1, rng.randint(1, 2)))):
        _set_age(desk, ticket, desk.sla(ticket.customer_id, ticket.priority) + rng.randint(1, 30))
    breached = [t for t in queue if desk.hours_left(t) < 0]
    if breached and rng.random() < 0.3:
        rng.choice(breached).escalation_level = MAX_ESCALATION  # one that can only be tagged
    if len(breached) < 2:
        customer = _customer_for(desk, rng, team)
        subject = _fresh_subject(desk, rng, customer, team)
        priority = rng.choice(PRIORITIES)
        age = desk.sla(customer.customer_id, priority) + rng.randint(1, 30)
        breached.append(_file(desk, customer, subject, priority=priority, age=age))
    escalatable = [t for t in breached if t.escalation_level < MAX_ESCALATION]
    levels = {t.ticket_id: t.escalation_level for t in escalatable}
    before = copy_of(desk)

    def grade(state: Helpdesk, answer: str | None) -> Scorecard:
        card = Scorecard()
        for ticket in escalatable:
            raised = state.tickets[ticket.ticket_id].escalation_level == levels[ticket.ticket_id] + 1
            card.goal(f"{ticket.ticket_id} escalated", raised)
        for ticket in breached:
            card.goal(f"{ticket.ticket_id} tagged", BREACH_TAG in state.tickets[ticket.ticket_id].tags)
        return card.untouched(before, state, {f"tickets/{t.ticket_id}" for t in breached})

    plan: list[ToolCall | Finish] = [call("search_tickets", team=team, active_only=True)]
    for ticket in sorted(breached, key=lambda t: t.ticket_id):
        if ticket.escalation_level < MAX_ESCALATION:
            plan.append(call("escalate_ticket", ticket_id=ticket.ticket_id, reason="SLA breached"))
        plan.append(call("add_tag", ticket_id=ticket.ticket_id, tag=BREACH_TAG))
    return Goal(
        f"Sweep the {team} queue: every active ticket there that has already breached its SLA gets the tag "
        f"`{BREACH_TAG}`, and is escalated one level unless it is already at the top level.",
        "Only active tickets past their deadline count; the search results say which are breached and how far "
        "each is escalated.",
        [*plan, Finish()],
        grade,
    )


def handover_off_shift(desk: Helpdesk, rng: random.Random) -> Goal[Helpdesk]:
    team = rng.choice(TEAMS)
    leaving = rng.choice(desk.team(team))
    leaving.on_shift = False
    if not any(a.on_shift for a in desk.team(team)):
        next(a for a in desk.team(team) if a is not leaving).on_shift = True

    def held(urgent: bool) -> list[Ticket]:
        return [
            t
            for t in desk.tickets.values()
            if t.assignee_id == leaving.agent_id and t.status in ACTIVE and (t.priority in ("high", "urgent")) == urgent
        ]

    wanted = rng.choice([2, 3, 4])
    while len(held(urgent=True)) < wanted or not held(urgent=False):
        priority = rng.choice(PRIORITIES[2:]) if len(held(urgent=True)) < wanted else "normal"
        customer = _customer_for(desk, rng, team)
        subject = _fresh_subject(desk, rng, customer, team)
        status = rng.choice(ACTIVE)
        _file(desk, customer, subject, priority=priority, status=status, assignee_id=leaving.agent_id, age=1)
    leaving.capacity = max(leaving.capacity, desk.load(leaving.agent_id))
    moving = held(urgent=True)
    successor = rng.choice([a for a in desk.team(team) if a.on_shift])
    _make_roomiest(desk, successor, len(moving) + rng.randint(0, 2))
    before = copy_of(desk)
    note = f"Handed over from {leaving.name}, who went off shift."

    def grade(state: Helpdesk, answer: str | None) -> Scorecard:
        card = Scorecard()
        for ticket in moving:
            card.goal(
                f"{ticket.ticket_id} handed over", state.tickets[ticket.ticket_id].assignee_id == successor.agent_id
            )
            noted = bool(_new_comments(before, state, ticket.ticket_id, "internal"))
            card.goal(f"{ticket.ticket_id} handover note", noted, weight=0.5)
        return card.untouched(before, state, {f"tickets/{t.ticket_id}" for t in moving})

    return Goal(
        f"{leaving.name} has gone home sick. Hand every active high or urgent ticket they hold to the one on-shift "
        "teammate who has the most spare capacity right now, and leave an internal handover note on each. Their "
        "other tickets stay where they are.",
        "Find both agents in the agent list (spare capacity is shown there), then list the tickets assigned to the "
        "sick agent; only active high and urgent ones move.",
        [call("list_agents"), call("search_tickets", assignee_id=leaving.agent_id, active_only=True),
         *[step for t in moving for step in (
             call("assign_ticket", ticket_id=t.ticket_id, agent_id=successor.agent_id),
             call("add_comment", ticket_id=t.ticket_id, body=note, visibility="internal"))],
         Finish()],
        grade,
    )  # fmt: skip


TicketingWorld.families = (
    tag_by_id,
    soonest_breach_question,
    raise_priority_and_deadline,
    team_question,
    escalate_blocking,
    new_ticket_and_assign,
    merge_duplicates,
    resolve_with_reply,
    move_to_right_team,
    problem_is_back,
    sweep_breached,
    handover_off_shift,
)
