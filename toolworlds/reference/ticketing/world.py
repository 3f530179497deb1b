"""The helpdesk's tools: what an agent can look up and do, and the refusals a real helpdesk would give."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Annotated, ClassVar

from pydantic import BaseModel, Field, StringConstraints

from toolworlds.core import ToolError
from toolworlds.records import lookup, search
from toolworlds.reference.scenario import Family, ScenarioWorld, described_moves
from toolworlds.reference.ticketing.state import (
    ACTIVE,
    LEAD,
    MAX_ESCALATION,
    SLA_HOURS,
    TRANSITIONS,
    Comment,
    Helpdesk,
    Priority,
    Status,
    Team,
    Ticket,
    Tier,
    Visibility,
    populate,
)
from toolworlds.reference.ticketing.tasks import FAMILIES
from toolworlds.tool import tool

TagName = Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9-]{0,29}$")]
# Not blank. Said with a pattern, not pydantic's strip_whitespace, so that the schema the agent sees and
# the validation agree (schemathesis found "\x85" passing minLength but failing after a strip).
Text = Annotated[str, StringConstraints(min_length=1, max_length=2000, pattern=r"\S")]


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


def _summarize(desk: Helpdesk, ticket: Ticket) -> TicketSummary:
    active = ticket.status in ACTIVE
    return TicketSummary(
        **ticket.model_dump(include=set(TicketSummary.model_fields) & set(Ticket.model_fields)),
        hours_left=desk.hours_left(ticket) if active else None,
        sla_breached=active and desk.hours_left(ticket) < 0,
    )


def _sla_table() -> str:
    """`free 120/72/24/8, pro ...`: each plan's hours, lowest priority first."""
    return ", ".join(f"{tier} {'/'.join(str(hours) for hours in by_priority.values())}" for tier, by_priority in
                     SLA_HOURS.items())  # fmt: skip


# -- the world ----------------------------------------------------------------------------------


class TicketingWorld(ScenarioWorld[Helpdesk]):
    """The helpdesk: its tools, and the rules `state` enforces; the agent reads `description`, written from
    the same rule tables (`SLA_HOURS`, `TRANSITIONS`) so that what it is told is what the code does."""

    description = f"""\
    A helpdesk's queue: customers on SLA plans, agents on teams and shifts, tickets and their comments.

    You act as the support lead on duty. Times are whole hours on one clock that stands still during the
    episode. A ticket's SLA deadline (`due_at`) is its creation hour (`created_at`) plus the hours its
    priority allows on the customer's plan; `hours_left` counts down to it. The hours each plan allows, for
    low / normal / high / urgent priority (`get_customer` shows a customer's as `sla_hours`):
    {_sla_table()}.

    Rules the helpdesk enforces, and the refusals to handle:
    - unknown customers, agents, tickets or tags are `not_found`;
    - a ticket's status moves only along these steps; any other move is `illegal_transition`, and a move to
      the status it already has is `unchanged`:
      {described_moves(TRANSITIONS)}.
      Moving a resolved ticket back to in_progress reopens it. Nothing about a closed ticket may change
      (`ticket_closed`), so a problem that returns needs a new ticket;
    - a ticket is in_progress only with an assignee (`unassigned`), and is resolved only after support has
      replied publicly on it (`needs_public_reply`); internal notes do not count;
    - a ticket is assigned only to an agent of its own team (`wrong_team`) who is on shift (`agent_off_shift`)
      and has spare capacity for active tickets (`over_capacity`); moving it to another team clears its
      assignee;
    - resolved tickets must be reopened before their priority, owner or escalation change (`ticket_inactive`);
    - escalation goes one level at a time up to level {MAX_ESCALATION} (`max_escalation`);
    - only a customer's own tickets merge into each other (`different_customers`), never a ticket into itself
      (`same_ticket`) and never one already merged (`already_merged`).
    """

    name = "ticketing"

    def populate(self, rng: random.Random) -> Helpdesk:
        return populate(rng)

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
            subject=subject.strip(),
            description=description.strip(),
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
            body=body.strip(),
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
        ticket.escalation_reason = reason.strip()
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

    families: ClassVar[Sequence[Family[Helpdesk]]] = FAMILIES
