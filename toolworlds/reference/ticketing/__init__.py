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

from toolworlds.reference.ticketing.world import TicketingWorld

__all__ = ["TicketingWorld"]
