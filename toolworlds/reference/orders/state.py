"""The shop's hidden state, the rules its records follow, and how a seed populates it."""

from __future__ import annotations

import random
from typing import Literal

from pydantic import BaseModel, Field

from toolworlds.core import ToolError
from toolworlds.records import SequentialIds
from toolworlds.reference.people import email_for, person_names

Category = Literal["footwear", "apparel", "kitchen", "electronics", "home", "outdoor"]
OrderStatus = Literal["pending", "paid", "shipped", "delivered", "cancelled", "returned"]
ShippingMethodName = Literal["standard", "express", "overnight"]
ReturnReason = Literal["damaged", "wrong_item", "not_as_described", "changed_mind"]
RefundMethod = Literal["original_payment", "store_credit"]
Loyalty = Literal["member", "silver", "gold"]

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


class Shop(SequentialIds):
    today: int
    customers: dict[str, Customer]
    products: dict[str, Product]
    carts: dict[str, Cart]
    coupons: dict[str, Coupon]
    orders: dict[str, Order]
    returns: dict[str, ReturnRequest]
    refunds: dict[str, Refund]

    def orders_of(self, customer_id: str) -> list[Order]:
        """A customer's orders, newest first (ids grow with time, so the id breaks ties within a day)."""
        mine = [o for o in self.orders.values() if o.customer_id == customer_id]
        return sorted(mine, key=lambda o: (o.placed_day, int(o.order_id.split("-")[1])), reverse=True)

    def variants(self, style: str) -> list[Product]:
        return [p for p in self.products.values() if p.name == style]


# -- rules shared by tools and by the task setup --------------------------------------------------


def coupon_discount(shop: Shop, code: str, lines: list[CartLine]) -> float:
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


def open_order(
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


def record_refund(shop: Shop, order: Order, amount: float, method: RefundMethod, reason: str) -> Refund:
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


def advance(order: Order, to: OrderStatus) -> None:
    """Move an order along the legal transition graph, or refuse naming where it could go."""
    allowed = TRANSITIONS[order.status]
    if to not in allowed:
        onward = ", ".join(allowed) or "nothing (it is closed)"
        raise ToolError(
            "illegal_transition",
            f"order {order.order_id} is {order.status} and cannot become {to}; it can become: {onward}",
        )
    order.status = to


def return_deadline(order: Order) -> int | None:
    return None if order.delivered_day is None else order.delivered_day + RETURN_WINDOW_DAYS


# -- the hidden state for a seed ----------------------------------------------------------------

PAST_STATUSES: tuple[OrderStatus, ...] = ("delivered", "delivered", "shipped", "paid", "pending", "cancelled")


def populate(rng: random.Random) -> Shop:
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
            address=random_address(rng),
            loyalty=rng.choice(LOYALTY_ODDS),
            store_credit=rng.choice((0.0, 0.0, 10.0, 25.0)),
            card_last4=f"{rng.randrange(10_000):04d}",
        )
        shop.customers[customer.customer_id] = customer
        cart = Cart(customer_id=customer.customer_id)
        shop.carts[customer.customer_id] = cart
        for status in rng.sample(PAST_STATUSES, rng.randint(3, 4)):
            items = [(p, rng.randint(1, 2)) for p in fresh_products(shop, customer, rng, rng.randint(1, 2))]
            place(shop, customer, items, status, rng, method=rng.choice(METHODS))
        for product in rng.sample([p for p in shop.products.values() if p.stock > 0], rng.randint(0, 2)):
            cart.lines.append(CartLine(sku=product.sku, quantity=1))
    return shop


def random_address(rng: random.Random) -> Address:
    return Address(
        street=f"{rng.randint(2, 240)} {rng.choice(STREETS)}",
        city=rng.choice(CITIES),
        postcode=f"{rng.randrange(10_000, 100_000)}",
    )


def fresh_products(shop: Shop, customer: Customer, rng: random.Random, count: int) -> list[Product]:
    """One colour each of `count` items the customer never ordered, so "my order with the X" names one order."""
    ordered = {line.name for order in shop.orders_of(customer.customer_id) for line in order.lines}
    styles = [style for style in STYLE_NAMES if style not in ordered]
    return [rng.choice(shop.variants(style)) for style in rng.sample(styles, count)]


def place(
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
    order = open_order(shop, customer, items, method, shop.today - placed_ago)
    if status == "pending":
        order.status, order.paid, order.payment_method = "pending", 0.0, "bank transfer (awaiting payment)"
    elif status == "cancelled":
        order.status, order.cancel_reason = "cancelled", "customer request"
        record_refund(shop, order, order.paid, "original_payment", "order cancelled")
    elif status in ("shipped", "delivered"):
        order.status = status
        order.carrier = SHIPPING[method].carrier
        order.tracking_number = f"{order.carrier.upper()}{rng.randrange(10**10):010d}"
        order.shipped_day = order.placed_day + 1
        order.estimated_delivery_day = order.shipped_day + days
        if status == "delivered":
            order.delivered_day = order.estimated_delivery_day
    return order
