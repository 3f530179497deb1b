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

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Annotated, ClassVar, Literal

from pydantic import BaseModel, Field

from toolworlds.core import Finish, ToolCall, ToolError, call
from toolworlds.records import lookup, search
from toolworlds.reference.people import email_for, person_names
from toolworlds.reference.scenario import Family, Goal, ScenarioWorld
from toolworlds.scoring import Scorecard, copy_of, mentions, mentions_amount
from toolworlds.tool import tool

Category = Literal["footwear", "apparel", "kitchen", "electronics", "home", "outdoor"]
OrderStatus = Literal["pending", "paid", "shipped", "delivered", "cancelled", "returned"]
ShippingMethodName = Literal["standard", "express", "overnight"]
ReturnReason = Literal["damaged", "wrong_item", "not_as_described", "changed_mind"]
RefundMethod = Literal["original_payment", "store_credit"]
Loyalty = Literal["member", "silver", "gold"]

Amount = Annotated[float, Field(gt=0, le=100_000)]
Quantity = Annotated[int, Field(ge=1, le=10)]
Reason = Annotated[str, Field(min_length=1, max_length=200)]
Street = Annotated[str, Field(min_length=1, max_length=80)]
City = Annotated[str, Field(min_length=1, max_length=40)]
Postcode = Annotated[str, Field(min_length=1, max_length=10, description="Five digits.")]

RETURN_WINDOW_DAYS = 30
FREE_STANDARD_FROM = 100.0
TRANSITIONS: dict[OrderStatus, tuple[OrderStatus, ...]] = {
    "pending": ("paid", "cancelled"),
    "paid": ("shipped", "cancelled"),
    "shipped": ("delivered",),
    "delivered": ("returned",),
    "cancelled": (),
    "returned": (),
}
UNSHIPPED: tuple[OrderStatus, ...] = ("pending", "paid")
ON_THE_WAY: tuple[OrderStatus, ...] = ("shipped", "delivered")
LOYALTY_ODDS: tuple[Loyalty, ...] = ("member", "member", "silver", "gold")
METHODS: tuple[ShippingMethodName, ...] = ("standard", "express", "overnight")

STYLES: tuple[tuple[str, Category, float, tuple[str, ...]], ...] = (
    ("Trail Running Shoes", "footwear", 89.99, ("black", "blue", "orange")),
    ("Canvas Sneakers", "footwear", 54.99, ("white", "navy", "red")),
    ("Leather Ankle Boots", "footwear", 129.99, ("brown", "black")),
    ("Merino Crew Sweater", "apparel", 79.99, ("grey", "navy", "green")),
    ("Rain Shell Jacket", "apparel", 119.99, ("yellow", "black", "teal")),
    ("Cotton Hoodie", "apparel", 44.99, ("grey", "black", "red")),
    ("Cast Iron Skillet", "kitchen", 39.99, ("black", "red")),
    ("Pour-Over Kettle", "kitchen", 49.99, ("silver", "black", "white")),
    ("Chef Knife", "kitchen", 64.99, ("steel", "black")),
    ("Wireless Earbuds", "electronics", 99.99, ("white", "black")),
    ("Bluetooth Speaker", "electronics", 59.99, ("blue", "black", "red")),
    ("Desk Lamp", "home", 34.99, ("white", "brass")),
    ("Linen Duvet Cover", "home", 89.99, ("white", "sand", "sage")),
    ("Insulated Water Bottle", "outdoor", 24.99, ("green", "blue", "white")),
    ("Two-Person Tent", "outdoor", 179.99, ("green", "orange")),
    ("Camping Headlamp", "outdoor", 29.99, ("black", "red")),
)  # fmt: skip
STYLE_NAMES = tuple(style for style, *_ in STYLES)
# code, percent off, minimum subtotal, category it is limited to, days until it expires (negative: expired)
COUPONS: tuple[tuple[str, int, float, Category | None, int], ...] = (
    ("WELCOME10", 10, 0.0, None, 90),
    ("BIGBASKET15", 15, 150.0, None, 30),
    ("STEPUP20", 20, 0.0, "footwear", 45),
    ("COOKS25", 25, 0.0, "kitchen", 20),
    ("GADGET15", 15, 0.0, "electronics", 14),
    ("FLASH30", 30, 0.0, None, -4),
    ("CAMPOUT20", 20, 60.0, "outdoor", -12),
)  # fmt: skip
STREETS = ("Elm Street", "Harbor Road", "Mill Lane", "Cedar Avenue", "Station Road", "Orchard Way", "King Street")
CITIES = ("Riverton", "Lakeside", "Brookfield", "Fairview", "Ashford", "Millbrook")


# -- state --------------------------------------------------------------------------------------


class Address(BaseModel):
    street: str
    city: str
    postcode: str


class Customer(BaseModel):
    customer_id: str
    name: str
    email: str
    address: Address
    loyalty: Loyalty = Field(description="Silver ships standard for free; gold ships free by any method.")
    store_credit: float = 0.0
    card_last4: str


class Product(BaseModel):
    sku: str
    name: str
    colour: str
    category: Category
    price: float
    stock: int


class CartLine(BaseModel):
    sku: str
    quantity: int


class Cart(BaseModel):
    customer_id: str
    lines: list[CartLine] = Field(default_factory=list)
    coupon_code: str | None = None


class Coupon(BaseModel):
    code: str
    percent_off: int
    min_subtotal: float
    category: Category | None
    expires_day: int


class ShippingOption(BaseModel):
    method: ShippingMethodName
    cost: float
    days: int
    carrier: str


SHIPPING: dict[ShippingMethodName, ShippingOption] = {
    "standard": ShippingOption(method="standard", cost=5.99, days=5, carrier="USPS"),
    "express": ShippingOption(method="express", cost=14.99, days=2, carrier="UPS"),
    "overnight": ShippingOption(method="overnight", cost=29.99, days=1, carrier="FedEx"),
}


class OrderLine(BaseModel):
    sku: str
    name: str
    colour: str
    quantity: int
    unit_price: float
    returned_quantity: int = 0


class Order(BaseModel):
    order_id: str
    customer_id: str
    status: OrderStatus
    placed_day: int
    lines: list[OrderLine]
    subtotal: float
    discount: float = 0.0
    coupon_code: str | None = None
    shipping_method: ShippingMethodName
    shipping_cost: float
    total: float
    paid: float = Field(description="What the customer was charged; 0 while a bank transfer is awaited.")
    refunded: float = 0.0
    payment_method: str
    address: Address
    carrier: str | None = None
    tracking_number: str | None = None
    shipped_day: int | None = None
    estimated_delivery_day: int | None = None
    delivered_day: int | None = None
    cancel_reason: str | None = None


class ReturnRequest(BaseModel):
    return_id: str
    order_id: str
    sku: str
    quantity: int
    reason: ReturnReason
    requested_day: int
    status: Literal["label_sent"] = "label_sent"


class Refund(BaseModel):
    refund_id: str
    order_id: str
    amount: float
    method: RefundMethod
    reason: str
    day: int


class Shop(BaseModel):
    today: int
    customers: dict[str, Customer]
    products: dict[str, Product]
    carts: dict[str, Cart]
    coupons: dict[str, Coupon]
    orders: dict[str, Order]
    returns: dict[str, ReturnRequest]
    refunds: dict[str, Refund]
    next_id: int = 1000

    def new_id(self, prefix: str) -> str:
        self.next_id += 1
        return f"{prefix}-{self.next_id}"

    def orders_of(self, customer_id: str) -> list[Order]:
        """A customer's orders, newest first (ids grow with time, so the id breaks ties within a day)."""
        mine = [o for o in self.orders.values() if o.customer_id == customer_id]
        return sorted(mine, key=lambda o: (o.placed_day, int(o.order_id.split("-")[1])), reverse=True)

    def variants(self, style: str) -> list[Product]:
        return [p for p in self.products.values() if p.name == style]


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


# -- rules shared by tools and by the task setup --------------------------------------------------


def _coupon_discount(shop: Shop, code: str, lines: list[CartLine]) -> float:
    """The discount `code` gives on `lines`; raises `ToolError` saying why it gives none."""
    coupon = shop.coupons.get(code.strip().upper())
    if coupon is None:
        raise ToolError("invalid_coupon", f"there is no coupon {code!r}")
    if shop.today > coupon.expires_day:
        raise ToolError("coupon_expired", f"{coupon.code} expired on day {coupon.expires_day}")
    if not lines:
        raise ToolError("empty_cart", "the cart is empty")
    products = [(shop.products[line.sku], line.quantity) for line in lines]
    subtotal = round(sum(p.price * q for p, q in products), 2)
    if subtotal < coupon.min_subtotal:
        raise ToolError("coupon_not_applicable", f"{coupon.code} needs a subtotal of {coupon.min_subtotal:.2f}")
    eligible = round(sum(p.price * q for p, q in products if coupon.category in (None, p.category)), 2)
    if eligible <= 0:
        raise ToolError("coupon_not_applicable", f"{coupon.code} only applies to {coupon.category} items")
    return round(eligible * coupon.percent_off / 100, 2)


def _shipping_cost(customer: Customer, method: ShippingMethodName, goods: float) -> float:
    if customer.loyalty == "gold":
        return 0.0
    if method == "standard" and (customer.loyalty == "silver" or goods >= FREE_STANDARD_FROM):
        return 0.0
    return SHIPPING[method].cost


def _open_order(
    shop: Shop,
    customer: Customer,
    items: list[tuple[Product, int]],
    method: ShippingMethodName,
    placed_day: int,
    coupon_code: str | None = None,
    discount: float = 0.0,
) -> Order:
    """A paid order at today's prices, charged to the customer's card and addressed to their address on file."""
    lines = [OrderLine(sku=p.sku, name=p.name, colour=p.colour, quantity=q, unit_price=p.price) for p, q in items]
    subtotal = round(sum(line.unit_price * line.quantity for line in lines), 2)
    shipping = _shipping_cost(customer, method, subtotal - discount)
    total = round(subtotal - discount + shipping, 2)
    order = Order(
        order_id=shop.new_id("O"),
        customer_id=customer.customer_id,
        status="paid",
        placed_day=placed_day,
        lines=lines,
        subtotal=subtotal,
        discount=discount,
        coupon_code=coupon_code,
        shipping_method=method,
        shipping_cost=shipping,
        total=total,
        paid=total,
        payment_method=f"card ending {customer.card_last4}",
        address=customer.address.model_copy(),
    )
    shop.orders[order.order_id] = order
    return order


def _refund(shop: Shop, order: Order, amount: float, method: RefundMethod, reason: str) -> Refund:
    refund = Refund(
        refund_id=shop.new_id("RF"),
        order_id=order.order_id,
        amount=amount,
        method=method,
        reason=reason,
        day=shop.today,
    )
    shop.refunds[refund.refund_id] = refund
    order.refunded = round(order.refunded + amount, 2)
    if method == "store_credit":
        customer = shop.customers[order.customer_id]
        customer.store_credit = round(customer.store_credit + amount, 2)
    return refund


def _advance(order: Order, to: OrderStatus) -> None:
    """Move an order along the legal transition graph, or refuse naming where it could go."""
    allowed = TRANSITIONS[order.status]
    if to not in allowed:
        onward = ", ".join(allowed) or "nothing (it is closed)"
        raise ToolError(
            "illegal_transition",
            f"order {order.order_id} is {order.status} and cannot become {to}; it can become: {onward}",
        )
    order.status = to


def _return_deadline(order: Order) -> int | None:
    return None if order.delivered_day is None else order.delivered_day + RETURN_WINDOW_DAYS


def _address(street: str, city: str, postcode: str) -> Address:
    street, city, postcode = street.strip(), city.strip(), postcode.strip()
    if not (len(postcode) == 5 and postcode.isdigit()):
        raise ToolError("invalid_address", f"postcode must be five digits, got {postcode!r}")
    if len(street) < 3 or len(city) < 2:
        raise ToolError("invalid_address", "street and city must be written out")
    return Address(street=street, city=city, postcode=postcode)


# -- the world ----------------------------------------------------------------------------------


class OrdersWorld(ScenarioWorld[Shop]):
    """An online shop's order desk: customers, catalog, carts, checkout, shipping, cancellations, returns, refunds."""

    name = "orders"
    description = __doc__ or ""
    max_steps = 30

    def populate(self, rng: random.Random) -> Shop:
        return _populate(rng)

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
                discount = _coupon_discount(self.state, cart.coupon_code, cart.lines)
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
        deadline = _return_deadline(order)
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
        _coupon_discount(self.state, code, cart.lines)
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
                discount = _coupon_discount(self.state, cart.coupon_code, cart.lines)
            except ToolError:
                discount = 0.0  # the cart view said so; the order goes through at full price
        coupon = cart.coupon_code if discount > 0 else None
        order = _open_order(self.state, customer, items, shipping_method, self.state.today, coupon, discount)
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
        _advance(order, "cancelled")
        order.cancel_reason = reason
        for line in order.lines:
            self.state.products[line.sku].stock += line.quantity
        remaining = round(order.paid - order.refunded, 2)
        if remaining > 0:
            _refund(self.state, order, remaining, "original_payment", "order cancelled")
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
        deadline = _return_deadline(order)
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
            _advance(order, "returned")
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
        return _refund(self.state, order, amount, method, reason)

    families: ClassVar[Sequence[Family[Shop]]] = ()  # filled in at the end of the module


# -- the hidden state for a seed ----------------------------------------------------------------

PAST_STATUSES: tuple[OrderStatus, ...] = ("delivered", "delivered", "shipped", "paid", "pending", "cancelled")


def _populate(rng: random.Random) -> Shop:
    shop = Shop(
        today=rng.randint(120, 300), customers={}, products={}, carts={}, coupons={}, orders={}, returns={}, refunds={}
    )
    for style, category, base_price, colours in STYLES:
        price = round(base_price + rng.choice((-10.0, -5.0, 0.0, 0.0, 5.0, 10.0)), 2)
        for colour in colours:
            sku = shop.new_id("SKU")
            stock = rng.choice((0, 3, 6, 12, 25, 40))
            shop.products[sku] = Product(
                sku=sku, name=style, colour=colour, category=category, price=price, stock=stock
            )
    for code, percent, minimum, category_only, days_left in COUPONS:
        shop.coupons[code] = Coupon(
            code=code,
            percent_off=percent,
            min_subtotal=minimum,
            category=category_only,
            expires_day=shop.today + days_left,
        )
    for name in person_names(rng, 6):
        customer = Customer(
            customer_id=shop.new_id("C"),
            name=name,
            email=email_for(name, "mail.example"),
            address=_random_address(rng),
            loyalty=rng.choice(LOYALTY_ODDS),
            store_credit=rng.choice((0.0, 0.0, 10.0, 25.0)),
            card_last4=f"{rng.randrange(10_000):04d}",
        )
        shop.customers[customer.customer_id] = customer
        cart = Cart(customer_id=customer.customer_id)
        shop.carts[customer.customer_id] = cart
        for status in rng.sample(PAST_STATUSES, rng.randint(3, 4)):
            items = [(p, rng.randint(1, 2)) for p in _fresh_products(shop, customer, rng, rng.randint(1, 2))]
            _place(shop, customer, items, status, rng, method=rng.choice(METHODS))
        for product in rng.sample([p for p in shop.products.values() if p.stock > 0], rng.randint(0, 2)):
            cart.lines.append(CartLine(sku=product.sku, quantity=1))
    return shop


def _random_address(rng: random.Random) -> Address:
    return Address(
        street=f"{rng.randint(2, 240)} {rng.choice(STREETS)}",
        city=rng.choice(CITIES),
        postcode=f"{rng.randrange(10_000, 100_000)}",
    )


def _fresh_products(shop: Shop, customer: Customer, rng: random.Random, count: int) -> list[Product]:
    """One colour each of `count` items the customer never ordered, so "my order with the X" names one order."""
    ordered = {line.name for order in shop.orders_of(customer.customer_id) for line in order.lines}
    styles = [style for style in STYLE_NAMES if style not in ordered]
    return [rng.choice(shop.variants(style)) for style in rng.sample(styles, count)]


def _place(
    shop: Shop,
    customer: Customer,
    items: list[tuple[Product, int]],
    status: OrderStatus,
    rng: random.Random,
    *,
    method: ShippingMethodName = "standard",
    placed_ago: int | None = None,
) -> Order:
    """A past order that has reached `status`, with a timeline that fits it (delivered ones arrived on time)."""
    days = SHIPPING[method].days
    if placed_ago is None:
        if status in UNSHIPPED:
            placed_ago = rng.randint(0, 1)
        elif status == "shipped":
            placed_ago = rng.randint(1, 3)
        else:
            placed_ago = rng.randint(days + 2, 80)
    order = _open_order(shop, customer, items, method, shop.today - placed_ago)
    if status == "pending":
        order.status, order.paid, order.payment_method = "pending", 0.0, "bank transfer (awaiting payment)"
    elif status == "cancelled":
        order.status, order.cancel_reason = "cancelled", "customer request"
        _refund(shop, order, order.paid, "original_payment", "order cancelled")
    elif status in ("shipped", "delivered"):
        order.status = status
        order.carrier = SHIPPING[method].carrier
        order.tracking_number = f"{order.carrier.upper()}{rng.randrange(10**10):010d}"
        order.shipped_day = order.placed_day + 1
        order.estimated_delivery_day = order.shipped_day + days
        if status == "delivered":
            order.delivered_day = order.estimated_delivery_day
    return order


# -- task families ------------------------------------------------------------------------------
# Each returns the instruction, the hint, the reference plan and the grader of one variant. Customers
# are named, products described and orders identified by what is in them, so the agent looks things
# up first; the hint names the route and the pitfall but never the ids, amounts or answers.


def _pick(shop: Shop, rng: random.Random) -> Customer:
    return rng.choice(list(shop.customers.values()))


def _intro(customer: Customer) -> str:
    return f"Hi, I'm {customer.name}."


def _find(customer: Customer) -> ToolCall:
    return call("find_customer", name=customer.name)


def _describe(product: Product) -> str:
    return f"{product.colour} {product.name.lower()}"


def _new_orders(before: Shop, after: Shop, customer_id: str) -> list[Order]:
    return [o for o in after.orders.values() if o.order_id not in before.orders and o.customer_id == customer_id]


def _new_refunds(before: Shop, after: Shop, order_id: str) -> list[Refund]:
    return [r for r in after.refunds.values() if r.refund_id not in before.refunds and r.order_id == order_id]


def _quantities(lines: list[OrderLine] | list[CartLine]) -> dict[str, int]:
    counted: dict[str, int] = {}
    for line in lines:
        counted[line.sku] = counted.get(line.sku, 0) + line.quantity
    return counted


def _only(orders: list[Order]) -> Order | None:
    """The one new order a checkout task expects; two new orders mean the task was not done as asked."""
    return orders[0] if len(orders) == 1 else None


def _same_address(a: Address, b: Address) -> bool:
    """Addresses match as a person reads them: case and stray spaces aside."""
    return all(getattr(a, part).strip().lower() == getattr(b, part).strip().lower() for part in Address.model_fields)


def _empty_cart(shop: Shop, customer: Customer) -> None:
    cart = shop.carts[customer.customer_id]
    cart.lines, cart.coupon_code = [], None


def _stock_up(product: Product, quantity: int) -> None:
    product.stock = max(product.stock, quantity)


def cancel_by_id(shop: Shop, rng: random.Random) -> Goal[Shop]:
    customer = _pick(shop, rng)
    (product,) = _fresh_products(shop, customer, rng, 1)
    order = _place(shop, customer, [(product, rng.randint(1, 2))], rng.choice(UNSHIPPED), rng)
    before = copy_of(shop)
    allowed = {f"orders/{order.order_id}", f"products/{product.sku}"}

    def grade(state: Shop, answer: str | None) -> Scorecard:
        card = Scorecard().goal("order cancelled", state.orders[order.order_id].status == "cancelled")
        return card.untouched(before, state, allowed)

    return Goal(
        f"Please cancel order {order.order_id} for {customer.name}; it was placed by mistake.",
        "Cancelling is a single call on the order id you were given; any payment is returned automatically.",
        [call("cancel_order", order_id=order.order_id, reason="placed by mistake"), Finish()],
        grade,
    )


def tracking_question(shop: Shop, rng: random.Random) -> Goal[Shop]:
    customer = _pick(shop, rng)
    products = _fresh_products(shop, customer, rng, rng.randint(1, 2))
    order = _place(shop, customer, [(p, 1) for p in products], "shipped", rng, method=rng.choice(METHODS))
    tracking, eta = order.tracking_number or "", order.estimated_delivery_day or 0
    before = copy_of(shop)

    def grade(state: Shop, answer: str | None) -> Scorecard:
        card = Scorecard().goal("gave the tracking number", mentions(answer, tracking))
        card.goal("gave the expected delivery day", mentions_amount(answer, eta))
        return card.untouched(before, state, set())

    return Goal(
        f"{_intro(customer)} Where is my order with the {_describe(products[0])}? Give me its tracking number and "
        "the day it's expected to arrive.",
        "Find the customer, open their orders to see which one holds that item, then track that shipment.",
        [_find(customer), call("list_orders", customer_id=customer.customer_id),
         call("get_order", order_id=order.order_id), call("track_shipment", order_id=order.order_id),
         Finish(answer=f"{tracking}, expected on day {eta}")],
        grade,
    )  # fmt: skip


def spent_question(shop: Shop, rng: random.Random) -> Goal[Shop]:
    customer = _pick(shop, rng)
    status = rng.choice(ON_THE_WAY)
    (product,) = _fresh_products(shop, customer, rng, 1)
    _place(shop, customer, [(product, rng.randint(1, 2))], status, rng, method=rng.choice(METHODS))
    expected = round(sum(o.total for o in shop.orders_of(customer.customer_id) if o.status == status), 2)
    before = copy_of(shop)

    def grade(state: Shop, answer: str | None) -> Scorecard:
        card = Scorecard().goal("stated the total", mentions_amount(answer, expected))
        return card.untouched(before, state, set())

    asked = (
        "How much did I pay altogether for my orders that have already been delivered?"
        if status == "delivered"
        else "What's the combined total of my orders that are on their way to me right now?"
    )
    return Goal(
        f"{_intro(customer)} {asked} Just the amount, please.",
        "The order list can be filtered by status; add up the totals of the matching orders and nothing else.",
        [_find(customer), call("list_orders", customer_id=customer.customer_id, status=status),
         Finish(answer=f"{expected:.2f}")],
        grade,
        variant=f"spent_on_{status}",
    )  # fmt: skip


def cancel_if_unshipped(shop: Shop, rng: random.Random) -> Goal[Shop]:
    customer = _pick(shop, rng)
    products = _fresh_products(shop, customer, rng, rng.randint(1, 2))
    shipped = rng.random() < 0.4
    status: OrderStatus = "shipped" if shipped else rng.choice(UNSHIPPED)
    order = _place(shop, customer, [(p, 1) for p in products], status, rng, method=rng.choice(METHODS))
    before = copy_of(shop)
    allowed = set() if shipped else {f"orders/{order.order_id}", *(f"products/{p.sku}" for p in products)}
    tracking = order.tracking_number or ""

    def grade(state: Shop, answer: str | None) -> Scorecard:
        if shipped:
            card = Scorecard().goal("gave the tracking number instead", mentions(answer, tracking))
        else:
            card = Scorecard().goal("order cancelled", state.orders[order.order_id].status == "cancelled")
        return card.untouched(before, state, allowed)

    plan: list[ToolCall | Finish] = [
        _find(customer),
        call("list_orders", customer_id=customer.customer_id),
        call("get_order", order_id=order.order_id),
    ]
    if shipped:
        plan += [call("track_shipment", order_id=order.order_id), Finish(answer=tracking)]
    else:
        plan += [call("cancel_order", order_id=order.order_id, reason="no longer wanted"), Finish()]
    return Goal(
        f"{_intro(customer)} Please cancel my order with the {_describe(products[0])} in it. If it has already "
        "shipped, don't change anything; just tell me its tracking number.",
        "Check the order's status before acting: only pending or paid orders can be cancelled.",
        plan,
        grade,
        variant="cancel_if_unshipped_shipped" if shipped else "cancel_if_unshipped_open",
    )


def move_address(shop: Shop, rng: random.Random) -> Goal[Shop]:
    customer = _pick(shop, rng)
    unshipped = [o for o in shop.orders_of(customer.customer_id) if o.status in UNSHIPPED]
    for _ in range(max(1, 2 - len(unshipped))):
        (product,) = _fresh_products(shop, customer, rng, 1)
        _place(shop, customer, [(product, 1)], rng.choice(UNSHIPPED), rng, method=rng.choice(METHODS))
    if not any(o.status == "shipped" for o in shop.orders_of(customer.customer_id)):
        (product,) = _fresh_products(shop, customer, rng, 1)
        _place(shop, customer, [(product, 1)], "shipped", rng)
    targets = [o.order_id for o in shop.orders_of(customer.customer_id) if o.status in UNSHIPPED]
    new = _random_address(rng)
    while _same_address(new, customer.address):
        new = _random_address(rng)
    before = copy_of(shop)
    allowed = {f"customers/{customer.customer_id}", *(f"orders/{order_id}" for order_id in targets)}
    where = new.model_dump()

    def grade(state: Shop, answer: str | None) -> Scorecard:
        card = Scorecard().goal(
            "address on file updated", _same_address(state.customers[customer.customer_id].address, new)
        )
        for order_id in targets:
            card.goal(f"{order_id} redirected", _same_address(state.orders[order_id].address, new))
        return card.untouched(before, state, allowed)

    return Goal(
        f"{_intro(customer)} I've just moved to {new.street}, {new.city} {new.postcode}. Please update my address "
        "on file and send every order of mine that hasn't shipped yet to the new address.",
        "The address on file and each order's address are separate records; only orders that have not shipped "
        "(pending or paid) can be redirected, so check each order's status.",
        [_find(customer), call("update_customer_address", customer_id=customer.customer_id, **where),
         call("list_orders", customer_id=customer.customer_id),
         *[call("update_shipping_address", order_id=order_id, **where) for order_id in targets], Finish()],
        grade,
    )  # fmt: skip


def checkout_fixing_stock(shop: Shop, rng: random.Random) -> Goal[Shop]:
    customer = _pick(shop, rng)
    products = [rng.choice(shop.variants(style)) for style in rng.sample(STYLE_NAMES, 3)]
    lines = [CartLine(sku=p.sku, quantity=rng.randint(1, 2)) for p in products]
    for product, line in zip(products, lines, strict=True):
        _stock_up(product, line.quantity)
    sold_out, wanted = products[0], lines[0].quantity
    sold_out.stock = 0
    alternatives = [p for p in shop.variants(sold_out.name) if p.sku != sold_out.sku]
    swap = rng.random() < 0.5
    substitute = rng.choice(alternatives)
    if swap:
        _stock_up(substitute, wanted)
    shop.carts[customer.customer_id] = Cart(customer_id=customer.customer_id, lines=rng.sample(lines, len(lines)))
    method = rng.choice(METHODS)
    keep = {line.sku: line.quantity for line in lines[1:]}
    acceptable = {p.sku for p in alternatives if p.stock >= wanted}
    before = copy_of(shop)
    allowed = {
        f"carts/{customer.customer_id}",
        *(f"products/{p.sku}" for p in products),
        *(f"products/{s}" for s in acceptable),
    }

    def grade(state: Shop, answer: str | None) -> Scorecard:
        order = _only(_new_orders(before, state, customer.customer_id))
        ordered = _quantities(order.lines) if order else {}
        extra = {sku: q for sku, q in ordered.items() if sku not in keep}
        card = Scorecard().goal(
            "in-stock items ordered", bool(ordered) and all(ordered.get(s) == q for s, q in keep.items())
        )
        if swap:
            card.goal(
                "sold-out item swapped for another colour",
                len(extra) == 1 and all(sku in acceptable and q == wanted for sku, q in extra.items()),
            )
        else:
            card.goal("sold-out item left out", bool(ordered) and not extra)
        card.goal(f"shipped {method}", order is not None and order.shipping_method == method)
        return card.untouched(before, state, allowed)

    fix = "swap it for the same item in another colour that is in stock" if swap else "just leave it out"
    plan: list[ToolCall | Finish] = [_find(customer), call("get_cart", customer_id=customer.customer_id)]
    if swap:
        plan.append(call("search_products", query=sold_out.name.lower()))
    plan.append(call("remove_from_cart", customer_id=customer.customer_id, sku=sold_out.sku))
    if swap:
        plan.append(call("add_to_cart", customer_id=customer.customer_id, sku=substitute.sku, quantity=wanted))
    plan += [call("checkout", customer_id=customer.customer_id, shipping_method=method), Finish()]
    return Goal(
        f"{_intro(customer)} Please check out what's in my cart with {method} shipping. If anything in it is out "
        f"of stock, {fix}.",
        "Checkout refuses the whole cart while any line is short of stock; the cart view flags such lines, and a "
        "product's details list its other colours with their stock.",
        plan,
        grade,
        variant="checkout_swapping_sold_out" if swap else "checkout_dropping_sold_out",
    )  # fmt: skip


def best_coupon_checkout(shop: Shop, rng: random.Random) -> Goal[Shop]:
    customer = _pick(shop, rng)
    codes = list(shop.coupons)
    while True:  # ends quickly: WELCOME10 always applies, so most pairs differ
        products = rng.sample(list(shop.products.values()), rng.randint(2, 3))
        lines = [CartLine(sku=p.sku, quantity=1) for p in products]
        first, second = rng.sample(codes, 2)
        offers = {code: _offer(shop, code, lines) for code in (first, second)}
        if max(offers.values()) > 0 and abs(offers[first] - offers[second]) >= 0.01:
            break
    for product in products:
        _stock_up(product, 1)
    shop.carts[customer.customer_id] = Cart(customer_id=customer.customer_id, lines=lines)
    best = max(offers, key=lambda code: offers[code])
    wanted = _quantities(lines)
    before = copy_of(shop)
    allowed = {f"carts/{customer.customer_id}", *(f"products/{p.sku}" for p in products)}

    def grade(state: Shop, answer: str | None) -> Scorecard:
        order = _only(_new_orders(before, state, customer.customer_id))
        card = Scorecard().goal("used the better code", order is not None and order.coupon_code == best, weight=2)
        card.goal("ordered the whole cart", order is not None and _quantities(order.lines) == wanted)
        card.goal("standard shipping", order is not None and order.shipping_method == "standard")
        return card.untouched(before, state, allowed)

    return Goal(
        f"{_intro(customer)} I have two discount codes, {first} and {second}. Use whichever saves me more on "
        "what's in my cart, then check it out with standard shipping.",
        "Applying a code replaces the one already on the cart and the cart view shows the discount it gives; "
        "expired codes and codes that don't match the cart are refused.",
        [_find(customer), call("get_cart", customer_id=customer.customer_id),
         call("apply_coupon", customer_id=customer.customer_id, code=best),
         call("checkout", customer_id=customer.customer_id, shipping_method="standard"), Finish()],
        grade,
    )  # fmt: skip


def _offer(shop: Shop, code: str, lines: list[CartLine]) -> float:
    try:
        return _coupon_discount(shop, code, lines)
    except ToolError:
        return 0.0


def buy_three_in_stock(shop: Shop, rng: random.Random) -> Goal[Shop]:
    customer = _pick(shop, rng)
    _empty_cart(shop, customer)
    sold_out_at = rng.randrange(3)
    wants: list[tuple[Product, int, Product]] = []  # preferred colour, quantity, what the plan buys
    for index, style in enumerate(rng.sample(STYLE_NAMES, 3)):
        colours = shop.variants(style)
        preferred, quantity = rng.choice(colours), rng.choice((1, 1, 2))
        if index == sold_out_at or rng.random() < 0.25:
            preferred.stock = 0
            bought = rng.choice([p for p in colours if p.sku != preferred.sku])
        else:
            bought = preferred
        _stock_up(bought, quantity)
        wants.append((preferred, quantity, bought))
    coupon = "WELCOME10" if rng.random() < 0.4 else None
    method = rng.choice(METHODS)
    before = copy_of(shop)
    allowed = {f"carts/{customer.customer_id}", *(f"products/{p.sku}" for w in wants for p in shop.variants(w[0].name))}

    def grade(state: Shop, answer: str | None) -> Scorecard:
        order = _only(_new_orders(before, state, customer.customer_id))
        ordered = _quantities(order.lines) if order else {}
        card = Scorecard()
        for preferred, quantity, _ in wants:
            if before.products[preferred.sku].stock > 0:
                fine = {preferred.sku}
            else:
                fine = {p.sku for p in before.variants(preferred.name) if p.stock >= quantity}
            card.goal(f"{quantity} x {preferred.name}", any(ordered.get(sku) == quantity for sku in fine))
        card.goal("nothing else ordered", len(ordered) == len(wants))
        card.goal(f"shipped {method}", order is not None and order.shipping_method == method)
        if coupon:
            card.goal("coupon used", order is not None and order.coupon_code == coupon)
        return card.untouched(before, state, allowed)

    listed = (
        ", ".join(f"{q} x {_describe(p)}" for p, q, _ in wants[:-1])
        + f" and {wants[-1][1]} x {_describe(wants[-1][0])}"
    )
    plan: list[ToolCall | Finish] = [_find(customer)]
    plan += [call("search_products", query=p.name.lower()) for p, _, _ in wants]
    plan += [call("add_to_cart", customer_id=customer.customer_id, sku=b.sku, quantity=q) for _, q, b in wants]
    if coupon:
        plan.append(call("apply_coupon", customer_id=customer.customer_id, code=coupon))
    plan += [call("checkout", customer_id=customer.customer_id, shipping_method=method), Finish()]
    return Goal(
        f"{_intro(customer)} Please order {listed} for me, shipped {method}. If a colour is sold out, the same item "
        "in another colour that's in stock is fine." + (f" Use my code {coupon}." if coupon else ""),
        "Search by the item's name to see every colour with its stock; put only in-stock lines in the cart, then "
        "check out once.",
        plan,
        grade,
        variant="buy_three_with_coupon" if coupon else "buy_three_in_stock",
    )  # fmt: skip


def cancel_and_reorder_express(shop: Shop, rng: random.Random) -> Goal[Shop]:
    customer = _pick(shop, rng)
    _empty_cart(shop, customer)
    items = [(p, rng.randint(1, 2)) for p in _fresh_products(shop, customer, rng, rng.randint(2, 3))]
    for product, quantity in items:
        _stock_up(product, quantity)
    order = _place(shop, customer, items, "paid", rng)
    wanted = _quantities(order.lines)
    before = copy_of(shop)
    allowed = {f"orders/{order.order_id}", f"carts/{customer.customer_id}", *(f"products/{p.sku}" for p, _ in items)}

    def grade(state: Shop, answer: str | None) -> Scorecard:
        again = _only(_new_orders(before, state, customer.customer_id))
        card = Scorecard().goal("old order cancelled", state.orders[order.order_id].status == "cancelled")
        card.goal("same items ordered again", again is not None and _quantities(again.lines) == wanted, weight=2)
        card.goal("express shipping", again is not None and again.shipping_method == "express")
        return card.untouched(before, state, allowed)

    return Goal(
        f"{_intro(customer)} My order with the {_describe(items[0][0])} won't arrive in time with standard shipping. "
        "Cancel it and place exactly the same order again with express shipping.",
        "Read the old order's lines (SKUs and quantities) before cancelling it; the cart must hold exactly those "
        "lines when you check out again.",
        [_find(customer), call("list_orders", customer_id=customer.customer_id),
         call("get_order", order_id=order.order_id),
         call("cancel_order", order_id=order.order_id, reason="needs faster shipping"),
         *[call("add_to_cart", customer_id=customer.customer_id, sku=p.sku, quantity=q) for p, q in items],
         call("checkout", customer_id=customer.customer_id, shipping_method="express"), Finish()],
        grade,
    )  # fmt: skip


def return_damaged_for_credit(shop: Shop, rng: random.Random) -> Goal[Shop]:
    customer = _pick(shop, rng)
    products = _fresh_products(shop, customer, rng, rng.randint(2, 3))
    items = [(products[0], 1)] + [(p, rng.randint(1, 2)) for p in products[1:]]
    method = rng.choice(METHODS)
    days = SHIPPING[method].days
    late = rng.random() < 0.3
    placed_ago = rng.randint(days + 35, days + 60) if late else rng.randint(days + 2, days + 25)
    order = _place(
        shop, customer, rng.sample(items, len(items)), "delivered", rng, method=method, placed_ago=placed_ago
    )
    damaged = products[0]
    price = next(line.unit_price for line in order.lines if line.sku == damaged.sku)
    deadline = _return_deadline(order) or 0
    before = copy_of(shop)
    allowed = set() if late else {f"orders/{order.order_id}", f"customers/{customer.customer_id}"}

    def grade(state: Shop, answer: str | None) -> Scorecard:
        if late:
            card = Scorecard().goal("stated the last day for returns", mentions_amount(answer, deadline))
            return card.untouched(before, state, allowed)
        returned = [
            r for r in state.returns.values() if r.return_id not in before.returns and r.order_id == order.order_id
        ]
        refunds = _new_refunds(before, state, order.order_id)
        card = Scorecard().goal(
            "damaged item returned", [(r.sku, r.quantity, r.reason) for r in returned] == [(damaged.sku, 1, "damaged")]
        )
        credited = len(refunds) == 1 and abs(refunds[0].amount - price) < 0.005 and refunds[0].method == "store_credit"
        card.goal("its price refunded as store credit", credited, weight=2)
        return card.untouched(before, state, allowed)

    plan: list[ToolCall | Finish] = [
        _find(customer),
        call("list_orders", customer_id=customer.customer_id),
        call("get_order", order_id=order.order_id),
    ]
    if late:
        plan.append(Finish(answer=f"Day {deadline}"))
    else:
        plan += [
            call("request_return", order_id=order.order_id, sku=damaged.sku, quantity=1, reason="damaged"),
            call(
                "issue_refund", order_id=order.order_id, amount=price, method="store_credit", reason="arrived damaged"
            ),
            Finish(),
        ]
    return Goal(
        f"{_intro(customer)} The {_describe(damaged)} from one of my orders arrived broken. Please take it back and "
        "refund what I paid for it as store credit, not to my card. If it's already too late to return it, don't "
        "change anything; just tell me the last day I could have sent it back.",
        f"Returns are accepted for {RETURN_WINDOW_DAYS} days after delivery and the order shows the deadline. A return "
        "does not refund by itself; refund that item's price only, not the order total.",
        plan,
        grade,
        variant="return_too_late" if late else "return_damaged_for_credit",
    )  # fmt: skip


def price_drop_refund(shop: Shop, rng: random.Random) -> Goal[Shop]:
    customer = _pick(shop, rng)
    products = _fresh_products(shop, customer, rng, rng.randint(1, 2))
    dropped, quantity = products[0], rng.randint(1, 2)
    drop = min(rng.choice((5.0, 8.0, 10.0, 12.5, 15.0, 20.0)), float(round(dropped.price / 2)))
    dropped.price = round(dropped.price + drop, 2)
    items = [(dropped, quantity)] + [(p, 1) for p in products[1:]]
    status = rng.choice(ON_THE_WAY)
    method = rng.choice(METHODS)
    placed_ago = rng.randint(SHIPPING[method].days + 2, 12) if status == "delivered" else None
    order = _place(shop, customer, items, status, rng, method=method, placed_ago=placed_ago)
    dropped.price = round(dropped.price - drop, 2)
    amount = round(drop * quantity, 2)
    before = copy_of(shop)

    def grade(state: Shop, answer: str | None) -> Scorecard:
        refunds = _new_refunds(before, state, order.order_id)
        card = Scorecard().goal(
            "refunded the difference", abs(sum(r.amount for r in refunds) - amount) < 0.005, weight=2
        )
        card.goal("to the original payment", bool(refunds) and all(r.method == "original_payment" for r in refunds))
        return card.untouched(before, state, {f"orders/{order.order_id}"})

    return Goal(
        f"{_intro(customer)} I recently ordered the {_describe(dropped)} and you've lowered its price since. Under "
        "your price promise, please refund me the difference to my original payment method.",
        "Compare the unit price on the order with the product's current price, and mind how many units were bought.",
        [_find(customer), call("list_orders", customer_id=customer.customer_id),
         call("get_order", order_id=order.order_id), call("get_product", sku=dropped.sku),
         call("issue_refund", order_id=order.order_id, amount=amount, method="original_payment",
              reason="price promise"), Finish()],
        grade,
    )  # fmt: skip


def return_whole_order(shop: Shop, rng: random.Random) -> Goal[Shop]:
    customer = _pick(shop, rng)
    products = _fresh_products(shop, customer, rng, rng.randint(2, 3))
    method = rng.choice(METHODS)
    placed_ago = rng.randint(SHIPPING[method].days + 2, SHIPPING[method].days + 25)
    items = [(p, rng.randint(1, 2)) for p in products]
    order = _place(shop, customer, items, "delivered", rng, method=method, placed_ago=placed_ago)
    goods = order.subtotal
    before = copy_of(shop)

    def grade(state: Shop, answer: str | None) -> Scorecard:
        after = state.orders[order.order_id]
        card = Scorecard()
        for line in after.lines:
            card.goal(f"{line.name} returned", line.returned_quantity == line.quantity)
        refunds = _new_refunds(before, state, order.order_id)
        back = abs(sum(r.amount for r in refunds) - goods) < 0.005
        card.goal("items refunded to the card", back and all(r.method == "original_payment" for r in refunds), weight=2)
        return card.untouched(before, state, {f"orders/{order.order_id}"})

    return Goal(
        f"{_intro(customer)} I'd like to send back everything in my order with the {_describe(products[0])} and get "
        "the money for the items back on my card. I know shipping isn't refundable.",
        "Register a return for every line at its full quantity, then refund the items' price in one go; the "
        "shipping fee stays with the shop.",
        [_find(customer), call("list_orders", customer_id=customer.customer_id),
         call("get_order", order_id=order.order_id),
         *[call("request_return", order_id=order.order_id, sku=p.sku, quantity=q, reason="changed_mind")
           for p, q in items],
         call("issue_refund", order_id=order.order_id, amount=goods, method="original_payment",
              reason="whole order returned"), Finish()],
        grade,
    )  # fmt: skip


OrdersWorld.families = (
    cancel_by_id,
    tracking_question,
    spent_question,
    cancel_if_unshipped,
    move_address,
    checkout_fixing_stock,
    best_coupon_checkout,
    buy_three_in_stock,
    cancel_and_reorder_express,
    return_damaged_for_credit,
    price_drop_refund,
    return_whole_order,
)
