"""The order-desk tasks: one function per family, each with its instruction, hint, reference plan and grader."""

from __future__ import annotations

import random

from toolworlds.core import Finish, ToolCall, ToolError, call
from toolworlds.reference.orders.state import (
    METHODS,
    ON_THE_WAY,
    RETURN_WINDOW_DAYS,
    SHIPPING,
    STYLE_NAMES,
    UNSHIPPED,
    Address,
    Cart,
    CartLine,
    Customer,
    Order,
    OrderLine,
    OrderStatus,
    Product,
    Refund,
    Shop,
    coupon_discount,
    fresh_products,
    place,
    random_address,
    return_deadline,
)
from toolworlds.reference.scenario import Family, Goal
from toolworlds.scoring import Scorecard, copy_of, mentions, mentions_amount

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
    (product,) = fresh_products(shop, customer, rng, 1)
    order = place(shop, customer, [(product, rng.randint(1, 2))], rng.choice(UNSHIPPED), rng)
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
    products = fresh_products(shop, customer, rng, rng.randint(1, 2))
    order = place(shop, customer, [(p, 1) for p in products], "shipped", rng, method=rng.choice(METHODS))
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
    (product,) = fresh_products(shop, customer, rng, 1)
    place(shop, customer, [(product, rng.randint(1, 2))], status, rng, method=rng.choice(METHODS))
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
    products = fresh_products(shop, customer, rng, rng.randint(1, 2))
    shipped = rng.random() < 0.4
    status: OrderStatus = "shipped" if shipped else rng.choice(UNSHIPPED)
    order = place(shop, customer, [(p, 1) for p in products], status, rng, method=rng.choice(METHODS))
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
        (product,) = fresh_products(shop, customer, rng, 1)
        place(shop, customer, [(product, 1)], rng.choice(UNSHIPPED), rng, method=rng.choice(METHODS))
    if not any(o.status == "shipped" for o in shop.orders_of(customer.customer_id)):
        (product,) = fresh_products(shop, customer, rng, 1)
        place(shop, customer, [(product, 1)], "shipped", rng)
    targets = [o.order_id for o in shop.orders_of(customer.customer_id) if o.status in UNSHIPPED]
    new = random_address(rng)
    while _same_address(new, customer.address):
        new = random_address(rng)
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
        return coupon_discount(shop, code, lines)
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
    items = [(p, rng.randint(1, 2)) for p in fresh_products(shop, customer, rng, rng.randint(2, 3))]
    for product, quantity in items:
        _stock_up(product, quantity)
    order = place(shop, customer, items, "paid", rng)
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
    products = fresh_products(shop, customer, rng, rng.randint(2, 3))
    items = [(products[0], 1)] + [(p, rng.randint(1, 2)) for p in products[1:]]
    method = rng.choice(METHODS)
    days = SHIPPING[method].days
    late = rng.random() < 0.3
    placed_ago = rng.randint(days + 35, days + 60) if late else rng.randint(days + 2, days + 25)
    order = place(shop, customer, rng.sample(items, len(items)), "delivered", rng, method=method, placed_ago=placed_ago)
    damaged = products[0]
    price = next(line.unit_price for line in order.lines if line.sku == damaged.sku)
    deadline = return_deadline(order) or 0
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
    products = fresh_products(shop, customer, rng, rng.randint(1, 2))
    dropped, quantity = products[0], rng.randint(1, 2)
    drop = min(rng.choice((5.0, 8.0, 10.0, 12.5, 15.0, 20.0)), float(round(dropped.price / 2)))
    dropped.price = round(dropped.price + drop, 2)
    items = [(dropped, quantity)] + [(p, 1) for p in products[1:]]
    status = rng.choice(ON_THE_WAY)
    method = rng.choice(METHODS)
    placed_ago = rng.randint(SHIPPING[method].days + 2, 12) if status == "delivered" else None
    order = place(shop, customer, items, status, rng, method=method, placed_ago=placed_ago)
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
    products = fresh_products(shop, customer, rng, rng.randint(2, 3))
    method = rng.choice(METHODS)
    placed_ago = rng.randint(SHIPPING[method].days + 2, SHIPPING[method].days + 25)
    items = [(p, rng.randint(1, 2)) for p in products]
    order = place(shop, customer, items, "delivered", rng, method=method, placed_ago=placed_ago)
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


FAMILIES: tuple[Family[Shop], ...] = (
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
