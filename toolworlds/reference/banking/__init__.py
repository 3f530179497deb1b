"""Mock retail banking: customers sign in with a PIN, then move money, pay bills, manage holds and disputes."""

from toolworlds.reference.banking.world import BankingWorld

__all__ = ["BankingWorld"]
