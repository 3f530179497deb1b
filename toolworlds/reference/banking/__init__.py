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

from toolworlds.reference.banking.world import BankingWorld

__all__ = ["BankingWorld"]
