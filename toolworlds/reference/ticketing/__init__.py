"""Mock customer-support helpdesk: customers file tickets, a team lead triages, assigns and resolves them."""

from toolworlds.reference.ticketing.world import TicketingWorld

__all__ = ["TicketingWorld"]
