"""Mock online shop: an order desk over the catalog, carts, checkout, shipping, cancellations, returns and refunds.

Rules a real shop would enforce, and the refusals the agent must handle:
- ids that do not exist are refused with `not_found` (customers, products, orders, cart lines: `not_in_cart`);
- a cart is checked out only when it has lines (`empty_cart`) and every line is in stock (`out_of_stock`);
  adding more than the shelf holds is refused the same way;
- coupons must exist (`invalid_coupon`), be unexpired (`coupon_expired`) and match the cart: a minimum
  subtotal or a category (`coupon_not_applicable`);
- an order moves only along the legal transitions in `TRANSITIONS` (`illegal_transition`): pending or paid
  orders can be cancelled, shipped ones cannot; only delivered orders can be returned (`not_delivered`);
- the shipping address can change only before the order ships (`already_shipped`, `order_closed`);
- returns are accepted up to `RETURN_WINDOW_DAYS` days after delivery (`return_window_closed`) and never for
  more units than were bought and not yet returned (`exceeds_quantity`);
- refunds go to the original payment or to store credit and never exceed what was paid and not yet refunded
  (`refund_exceeds_paid`); an order that was never paid cannot be refunded (`nothing_paid`).
Time is an integer day counter in the state (`today`), never the wall clock.
"""

from toolworlds.reference.orders.world import OrdersWorld

__all__ = ["OrdersWorld"]
