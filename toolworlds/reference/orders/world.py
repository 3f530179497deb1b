"""The shop's tools: what an agent can look up and do, and the refusals a real shop would give."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Annotated, ClassVar, Literal

from pydantic import BaseModel, Field

from toolworlds.core import ToolError
from toolworlds.records import lookup, search
from toolworlds.reference.orders.state import (
    RETURN_WINDOW_DAYS,
    SHIPPING,
    TRANSITIONS,
    Address,
    Cart,
    CartLine,
    Customer,
    Order,
    OrderStatus,
    Product,
    Refund,
    RefundMethod,
    ReturnReason,
    ReturnRequest,
    ShippingMethodName,
    ShippingOption,
    Shop,
    advance,
    coupon_discount,
    open_order,
    populate,
    record_refund,
    return_deadline,
)
from toolworlds.reference.orders.tasks import FAMILIES
from toolworlds.reference.scenario import Family, ScenarioWorld, described_moves
from toolworlds.tool import tool

Amount = Annotated[float, Field(gt=0, le=100_000)]
Quantity = Annotated[int, Field(ge=1, le=10)]
Reason = Annotated[str, Field(min_length=1, max_length=200)]
Street = Annotated[str, Field(min_length=1, max_length=80)]
City = Annotated[str, Field(min_length=1, max_length=40)]
Postcode = Annotated[str, Field(min_length=1, max_length=10, description="Five digits.")]


# -- what tools return --------------------------------------------------------------------------


class CustomerMatch(BaseModel):
    customer_id: str
    name: str
    email: str


class ColourStock(BaseModel):
    sku: str
    colour: str
    stock: int


class ProductDetails(Product):
    other_colours: list[ColourStock]


class CartItem(BaseModel):
    sku: str
    name: str
    colour: str
    quantity: int
    unit_price: float
    line_total: float
    in_stock: bool = Field(description="False when the shelf holds fewer units than the line asks for.")


class CartView(BaseModel):
    customer_id: str
    items: list[CartItem]
    subtotal: float
    coupon_code: str | None
    discount: float
    coupon_note: str | None = Field(description="Why the applied coupon gives no discount right now, if it doesn't.")


class OrderSummary(BaseModel):
    order_id: str
    placed_day: int
    status: OrderStatus
    item_count: int
    total: float


class OrderDetails(Order):
    refundable: float = Field(description="Paid minus already refunded: the most a new refund may be.")
    return_deadline_day: int | None = Field(description="Last day a return is accepted (delivered orders only).")
    return_window_open: bool


class Tracking(BaseModel):
    order_id: str
    carrier: str
    tracking_number: str
    status: Literal["in_transit", "delivered"]
    shipped_day: int
    estimated_delivery_day: int
    delivered_day: int | None


def _address(street: str, city: str, postcode: str) -> Address:
    street, city, postcode = street.strip(), city.strip(), postcode.strip()
    if not (len(postcode) == 5 and postcode.isdigit()):
        raise ToolError("invalid_address", f"postcode must be five digits, got {postcode!r}")
    if len(street) < 3 or len(city) < 2:
        raise ToolError("invalid_address", "street and city must be written out")
    return Address(street=street, city=city, postcode=postcode)


# -- the world ----------------------------------------------------------------------------------


class OrdersWorld(ScenarioWorld[Shop]):
    """The order desk: its tools, and the rules `state` enforces; the agent reads `description`, written from
    the same rule constants (`TRANSITIONS`, `RETURN_WINDOW_DAYS`) so that what it is told is what the code does."""

    description = f"""\
    An online shop's order desk: customers, catalog, carts, checkout, shipping, cancellations, returns, refunds.

    Days are whole numbers on one calendar (`placed_day`, `delivered_day`, ...) that stands still during the
    episode.

    Rules the shop enforces, and the refusals to handle:
    - ids that do not exist are refused with `not_found` (customers, products, orders; a product not in the
      cart: `not_in_cart`);
    - a cart is checked out only when it has lines (`empty_cart`) and every line is in stock (`out_of_stock`);
      adding more than the shelf holds is refused the same way;
    - coupons must exist (`invalid_coupon`), be unexpired (`coupon_expired`) and match the cart: a minimum
      subtotal or a category (`coupon_not_applicable`);
    - an order's status moves only along these steps; any other move is `illegal_transition`:
      {described_moves(TRANSITIONS)}.
      So pending or paid orders can be cancelled, shipped ones cannot, and only delivered orders can be
      returned (`not_delivered`);
    - the shipping address can change only before the order ships (`already_shipped`, `order_closed`);
    - returns are accepted up to {RETURN_WINDOW_DAYS} days after delivery (`return_window_closed`; an order shows
      its `return_deadline_day`) and never for more units than were bought and not yet returned
      (`exceeds_quantity`);
    - refunds go to the original payment or to store credit and never exceed what was paid and not yet refunded
      (an order shows it as `refundable`; more is `refund_exceeds_paid`); an order that was never paid cannot be
      refunded (`nothing_paid`).
    """

    name = "orders"

    def populate(self, rng: random.Random) -> Shop:
        return populate(rng)

    # -- helpers every tool uses --

    def _customer(self, customer_id: str) -> Customer:
        return lookup(self.state.customers, customer_id, "customer")

    def _product(self, sku: str) -> Product:
        return lookup(self.state.products, sku, "product with SKU")

    def _order(self, order_id: str) -> Order:
        return lookup(self.state.orders, order_id, "order")

    def _cart(self, customer_id: str) -> Cart:
        self._customer(customer_id)
        return self.state.carts.setdefault(customer_id, Cart(customer_id=customer_id))

    def _cart_view(self, cart: Cart) -> CartView:
        items = []
        for line in cart.lines:
            product = self.state.products[line.sku]
            items.append(
                CartItem(
                    sku=line.sku,
                    name=product.name,
                    colour=product.colour,
                    quantity=line.quantity,
                    unit_price=product.price,
                    line_total=round(product.price * line.quantity, 2),
                    in_stock=product.stock >= line.quantity,
                )
            )
        discount, note = 0.0, None
        if cart.coupon_code is not None:
            try:
                discount = coupon_discount(self.state, cart.coupon_code, cart.lines)
            except ToolError as refusal:
                note = refusal.message
        subtotal = round(sum(item.line_total for item in items), 2)
        return CartView(
            customer_id=cart.customer_id,
            items=items,
            subtotal=subtotal,
            coupon_code=cart.coupon_code,
            discount=discount,
            coupon_note=note,
        )

    def _details(self, order: Order) -> OrderDetails:
        deadline = return_deadline(order)
        return OrderDetails(
            **order.model_dump(),
            refundable=round(order.paid - order.refunded, 2),
            return_deadline_day=deadline,
            return_window_open=order.status == "delivered" and deadline is not None and self.state.today <= deadline,
        )

    # -- tools --

    @tool
    def find_customer(self, name: str) -> list[CustomerMatch]:
        """Search customers by name (case-insensitive substring).

        Args:
            name: all or part of the customer's name.
        """
        found = search(self.state.customers.values(), name, lambda c: c.name)
        return [CustomerMatch(customer_id=c.customer_id, name=c.name, email=c.email) for c in found]

    @tool
    def get_customer(self, customer_id: str) -> Customer:
        """Show a customer's address on file, loyalty tier, store credit and card on file.

        Args:
            customer_id: the customer's id, e.g. C-1040.
        """
        return self._customer(customer_id)

    @tool
    def update_customer_address(self, customer_id: str, street: Street, city: City, postcode: Postcode) -> Customer:
        """Change the address on file; orders already placed keep the address they were placed with.

        Args:
            customer_id: the customer's id.
            street: house number and street, e.g. 12 Elm Street.
            city: the city.
            postcode: the five-digit postcode.
        """
        customer = self._customer(customer_id)
        customer.address = _address(street, city, postcode)
        return customer

    @tool
    def search_products(
        self,
        query: Annotated[str, Field(max_length=80)] = "",
        category: Literal["any", "footwear", "apparel", "kitchen", "electronics", "home", "outdoor"] = "any",
        in_stock_only: bool = False,
    ) -> list[Product]:
        """Search the catalog; every word of the query must appear in the product's name, colour or category.

        Args:
            query: words describing the product, e.g. "blue running shoes"; empty lists everything.
            category: limit the search to one category.
            in_stock_only: leave out products with no stock.
        """
        words = query.lower().split()
        found = []
        for product in self.state.products.values():
            text = f"{product.name} {product.colour} {product.category}".lower()
            if category not in ("any", product.category) or (in_stock_only and product.stock <= 0):
                continue
            if all(word in text for word in words):
                found.append(product)
        return found

    @tool
    def get_product(self, sku: str) -> ProductDetails:
        """Show one product with its stock and the stock of every other colour it comes in.

        Args:
            sku: the product's SKU, e.g. SKU-1007.
        """
        product = self._product(sku)
        others = [
            ColourStock(sku=p.sku, colour=p.colour, stock=p.stock)
            for p in self.state.variants(product.name)
            if p.sku != sku
        ]
        return ProductDetails(**product.model_dump(), other_colours=others)

    @tool
    def list_shipping_methods(self) -> list[ShippingOption]:
        """List shipping methods with their base cost, days in transit and carrier.

        Standard shipping is free from a 100.00 subtotal (after discount) and for silver members; gold
        members ship free by any method.
        """
        return list(SHIPPING.values())

    @tool
    def get_cart(self, customer_id: str) -> CartView:
        """Show a customer's cart: lines, stock, subtotal and the coupon applied.

        Args:
            customer_id: the customer's id.
        """
        return self._cart_view(self._cart(customer_id))

    @tool
    def add_to_cart(self, customer_id: str, sku: str, quantity: Quantity = 1) -> CartView:
        """Add units of a product to a customer's cart (refused when the shelf cannot cover the line).

        Args:
            customer_id: the customer's id.
            sku: the product's SKU.
            quantity: how many units to add (1-10).
        """
        cart = self._cart(customer_id)
        product = self._product(sku)
        line = next((line for line in cart.lines if line.sku == sku), None)
        wanted = quantity + (line.quantity if line else 0)
        if wanted > product.stock:
            left = f"only {product.stock} left" if product.stock else "sold out"
            raise ToolError("out_of_stock", f"{sku} ({product.colour} {product.name}) is {left}")
        if line is None:
            cart.lines.append(CartLine(sku=sku, quantity=quantity))
        else:
            line.quantity = wanted
        return self._cart_view(cart)

    @tool
    def remove_from_cart(self, customer_id: str, sku: str) -> CartView:
        """Remove a product's line from a customer's cart.

        Args:
            customer_id: the customer's id.
            sku: the SKU of the line to remove.
        """
        cart = self._cart(customer_id)
        if all(line.sku != sku for line in cart.lines):
            raise ToolError("not_in_cart", f"{sku!r} is not in the cart")
        cart.lines = [line for line in cart.lines if line.sku != sku]
        return self._cart_view(cart)

    @tool
    def apply_coupon(self, customer_id: str, code: str) -> CartView:
        """Apply a discount code to a customer's cart, replacing any code already applied.

        Args:
            customer_id: the customer's id.
            code: the coupon code as the customer gave it.
        """
        cart = self._cart(customer_id)
        coupon_discount(self.state, code, cart.lines)
        cart.coupon_code = code.strip().upper()
        return self._cart_view(cart)

    @tool
    def checkout(self, customer_id: str, shipping_method: ShippingMethodName) -> OrderDetails:
        """Place an order for everything in the cart, charge the card on file and empty the cart.

        Args:
            customer_id: the customer's id.
            shipping_method: how to ship it; see list_shipping_methods.
        """
        customer = self._customer(customer_id)
        cart = self._cart(customer_id)
        if not cart.lines:
            raise ToolError("empty_cart", "the cart is empty; add products first")
        items = [(self.state.products[line.sku], line.quantity) for line in cart.lines]
        short = [f"{p.sku} ({p.stock} left, {q} wanted)" for p, q in items if q > p.stock]
        if short:
            raise ToolError("out_of_stock", "not enough stock for: " + "; ".join(short))
        discount = 0.0
        if cart.coupon_code is not None:
            try:
                discount = coupon_discount(self.state, cart.coupon_code, cart.lines)
            except ToolError:
                discount = 0.0  # the cart view said so; the order goes through at full price
        coupon = cart.coupon_code if discount > 0 else None
        order = open_order(self.state, customer, items, shipping_method, self.state.today, coupon, discount)
        for product, quantity in items:
            product.stock -= quantity
        cart.lines, cart.coupon_code = [], None
        return self._details(order)

    @tool
    def list_orders(
        self,
        customer_id: str,
        status: Literal["any", "pending", "paid", "shipped", "delivered", "cancelled", "returned"] = "any",
    ) -> list[OrderSummary]:
        """List a customer's orders, newest first.

        Args:
            customer_id: the customer's id.
            status: only orders in this status.
        """
        self._customer(customer_id)
        return [
            OrderSummary(
                order_id=o.order_id,
                placed_day=o.placed_day,
                status=o.status,
                item_count=sum(line.quantity for line in o.lines),
                total=o.total,
            )
            for o in self.state.orders_of(customer_id)
            if status in ("any", o.status)
        ]

    @tool
    def get_order(self, order_id: str) -> OrderDetails:
        """Show one order in full: lines, prices, payment, refunds, address, shipping and return deadline.

        Args:
            order_id: the order's id, e.g. O-1093.
        """
        return self._details(self._order(order_id))

    @tool
    def track_shipment(self, order_id: str) -> Tracking:
        """Show where a shipped order is: carrier, tracking number and (estimated) delivery day.

        Args:
            order_id: the order's id.
        """
        order = self._order(order_id)
        if order.tracking_number is None or order.carrier is None or order.shipped_day is None:
            raise ToolError("not_shipped", f"order {order_id} is {order.status} and has no shipment")
        return Tracking(
            order_id=order_id,
            carrier=order.carrier,
            tracking_number=order.tracking_number,
            status="in_transit" if order.delivered_day is None else "delivered",
            shipped_day=order.shipped_day,
            estimated_delivery_day=order.estimated_delivery_day or order.shipped_day,
            delivered_day=order.delivered_day,
        )

    @tool
    def cancel_order(self, order_id: str, reason: Reason) -> OrderDetails:
        """Cancel an order that has not shipped; what was paid goes back to the original payment.

        Args:
            order_id: the order's id.
            reason: why, in the customer's words.
        """
        order = self._order(order_id)
        advance(order, "cancelled")
        order.cancel_reason = reason
        for line in order.lines:
            self.state.products[line.sku].stock += line.quantity
        remaining = round(order.paid - order.refunded, 2)
        if remaining > 0:
            record_refund(self.state, order, remaining, "original_payment", "order cancelled")
        return self._details(order)

    @tool
    def update_shipping_address(self, order_id: str, street: Street, city: City, postcode: Postcode) -> OrderDetails:
        """Send an order that has not shipped yet to a different address.

        Args:
            order_id: the order's id.
            street: house number and street.
            city: the city.
            postcode: the five-digit postcode.
        """
        order = self._order(order_id)
        if order.status in ("shipped", "delivered", "returned"):
            raise ToolError("already_shipped", f"order {order_id} has already shipped; its address is final")
        if order.status == "cancelled":
            raise ToolError("order_closed", f"order {order_id} is cancelled")
        order.address = _address(street, city, postcode)
        return self._details(order)

    @tool
    def request_return(self, order_id: str, sku: str, quantity: Quantity, reason: ReturnReason) -> ReturnRequest:
        """Accept a return of units from a delivered order and send a label; refunds are issued separately.

        Args:
            order_id: the order's id.
            sku: the SKU of the line being returned.
            quantity: how many units come back.
            reason: why they come back.
        """
        order = self._order(order_id)
        if order.status != "delivered":
            raise ToolError("not_delivered", f"order {order_id} is {order.status}; only delivered orders take returns")
        deadline = return_deadline(order)
        if deadline is not None and self.state.today > deadline:
            raise ToolError("return_window_closed", f"returns for {order_id} closed on day {deadline}")
        line = next((line for line in order.lines if line.sku == sku), None)
        if line is None:
            raise ToolError("not_found", f"order {order_id} has no line for {sku!r}")
        if quantity > line.quantity - line.returned_quantity:
            left = line.quantity - line.returned_quantity
            raise ToolError("exceeds_quantity", f"only {left} unit(s) of {sku} can still be returned")
        line.returned_quantity += quantity
        request = ReturnRequest(
            return_id=self.state.new_id("R"),
            order_id=order_id,
            sku=sku,
            quantity=quantity,
            reason=reason,
            requested_day=self.state.today,
        )
        self.state.returns[request.return_id] = request
        if all(line.returned_quantity == line.quantity for line in order.lines):
            advance(order, "returned")
        return request

    @tool
    def issue_refund(self, order_id: str, amount: Amount, method: RefundMethod, reason: Reason) -> Refund:
        """Refund part or all of what an order paid, to the original payment or as store credit.

        Args:
            order_id: the order's id.
            amount: dollars to refund, with cents; at most the order's refundable amount.
            method: original_payment (back to the card) or store_credit (on the customer's account).
            reason: why, for the order's history.
        """
        order = self._order(order_id)
        if order.paid <= 0:
            raise ToolError("nothing_paid", f"order {order_id} was never paid")
        amount = round(amount, 2)
        refundable = round(order.paid - order.refunded, 2)
        if amount > refundable + 1e-9:
            raise ToolError("refund_exceeds_paid", f"order {order_id} has {refundable:.2f} left to refund")
        return record_refund(self.state, order, amount, method, reason)

    families: ClassVar[Sequence[Family[Shop]]] = FAMILIES
