"""Mock online shop: an order desk over the catalog, carts, checkout, shipping, cancellations, returns and refunds."""

from toolworlds.reference.orders.world import OrdersWorld

__all__ = ["OrdersWorld"]
