"""tau2's retail domain: products, users and orders, and the 16 tools the agent has over them.

The models keep the official field names, types and order: results are their `model_dump`, so a price or a
balance is a float exactly where the official shows one, and the database hash covers the same values. The tools
follow the official ones step for step, quirks included: a pending order's item modification gives every changed
item the price and options of the last new item, its price difference is not rounded (an exchange's is), a check
that fails part-way through a cancellation or a payment change leaves what was already done, and an exchange or a
return only records the request.
"""

from __future__ import annotations

import json
from typing import Literal

from pydantic import BaseModel, ConfigDict

from benchmarks.tau2.toolkit import Toolkit, calculate, tool

OrderPaymentType = Literal["payment", "refund"]
OrderStatus = Literal[
    "processed", "pending", "pending (item modified)", "delivered", "cancelled", "exchange requested",
    "return requested",
]  # fmt: skip
CancelReason = Literal["no longer needed", "ordered by mistake"]


class Variant(BaseModel):
    item_id: str
    options: dict[str, str]
    available: bool
    price: float


class Product(BaseModel):
    name: str
    product_id: str
    variants: dict[str, Variant]


class UserName(BaseModel):
    first_name: str
    last_name: str


class UserAddress(BaseModel):
    address1: str
    address2: str
    city: str
    country: str
    state: str
    zip: str


class CreditCard(BaseModel):
    source: Literal["credit_card"]
    id: str
    brand: str
    last_four: str


class Paypal(BaseModel):
    source: Literal["paypal"]
    id: str


class GiftCard(BaseModel):
    source: Literal["gift_card"]
    id: str
    balance: float


PaymentMethod = CreditCard | GiftCard | Paypal


class User(BaseModel):
    user_id: str
    name: UserName
    address: UserAddress
    email: str
    payment_methods: dict[str, PaymentMethod]
    orders: list[str]


class OrderFullfilment(BaseModel):
    tracking_id: list[str]
    item_ids: list[str]


class OrderItem(BaseModel):
    name: str
    product_id: str
    item_id: str
    price: float
    options: dict[str, str]


class OrderPayment(BaseModel):
    transaction_type: OrderPaymentType
    amount: float
    payment_method_id: str


class Order(BaseModel):
    order_id: str
    user_id: str
    address: UserAddress
    items: list[OrderItem]
    status: OrderStatus
    fulfillments: list[OrderFullfilment]
    payment_history: list[OrderPayment]
    cancel_reason: CancelReason | None = None
    exchange_items: list[str] | None = None
    exchange_new_items: list[str] | None = None
    exchange_payment_method_id: str | None = None
    exchange_price_difference: float | None = None
    return_items: list[str] | None = None
    return_payment_method_id: str | None = None


class RetailDB(BaseModel):
    model_config = ConfigDict(extra="forbid")

    products: dict[str, Product]
    users: dict[str, User]
    orders: dict[str, Order]


class RetailTools(Toolkit):
    """The retail agent's tools (the official `RetailTools`)."""

    db: RetailDB

    def _get_order(self, order_id: str) -> Order:
        if order_id not in self.db.orders:
            raise ValueError("Order not found")
        return self.db.orders[order_id]

    def _get_user(self, user_id: str) -> User:
        if user_id not in self.db.users:
            raise ValueError("User not found")
        return self.db.users[user_id]

    def _get_product(self, product_id: str) -> Product:
        if product_id not in self.db.products:
            raise ValueError("Product not found")
        return self.db.products[product_id]

    def _get_item(self, item_id: str) -> Variant:
        for product in self.db.products.values():
            if item_id in product.variants:
                return product.variants[item_id]
        raise ValueError("Item not found")

    def _get_variant(self, product_id: str, variant_id: str) -> Variant:
        product = self._get_product(product_id)
        if variant_id not in product.variants:
            raise ValueError("Variant not found")
        return product.variants[variant_id]

    def _get_payment_method(self, user_id: str, payment_method_id: str) -> PaymentMethod:
        user = self._get_user(user_id)
        if payment_method_id not in user.payment_methods:
            raise ValueError("Payment method not found")
        return user.payment_methods[payment_method_id]

    @staticmethod
    def _check_items(order: Order, item_ids: list[str], message: str) -> None:
        """Each listed item (duplicates counted) must be in the order as many times; `message` names a missing one."""
        held = [item.item_id for item in order.items]
        for item_id in item_ids:
            if item_ids.count(item_id) > held.count(item_id):
                raise ValueError(message.format(item_id=item_id))

    @staticmethod
    def _first_item(order: Order, item_id: str) -> OrderItem:
        item = next((item for item in order.items if item.item_id == item_id), None)
        if item is None:
            raise ValueError(f"Item {item_id} not found")
        return item

    @tool(mutates=False)
    def calculate(self, expression):  # type: ignore[no-untyped-def]
        return calculate(expression)

    @tool(mutates=True)
    def cancel_pending_order(self, order_id, reason):  # type: ignore[no-untyped-def]
        order = self._get_order(order_id)
        if order.status != "pending":
            raise ValueError("Non-pending order cannot be cancelled")
        if reason not in {"no longer needed", "ordered by mistake"}:
            raise ValueError("Invalid reason")
        refunds = []
        for payment in order.payment_history:
            payment_id = payment.payment_method_id
            refunds.append(OrderPayment(transaction_type="refund", amount=payment.amount, payment_method_id=payment_id))
            user = self._get_user(order.user_id)
            method = self._get_payment_method(user.user_id, payment_id)
            if isinstance(method, GiftCard):
                method.balance = round(method.balance + payment.amount, 2)
        order.status = "cancelled"
        order.cancel_reason = reason
        order.payment_history.extend(refunds)
        return order

    @tool(mutates=True)
    def exchange_delivered_order_items(self, order_id, item_ids, new_item_ids, payment_method_id):  # type: ignore[no-untyped-def]
        order = self._get_order(order_id)
        if order.status != "delivered":
            raise ValueError("Non-delivered order cannot be exchanged")
        self._check_items(order, item_ids, "Number of {item_id} not found.")
        if len(item_ids) != len(new_item_ids):
            raise ValueError("The number of items to be exchanged should match.")
        diff_price: float = 0  # an int while no item changes, as in the official
        for item_id, new_item_id in zip(item_ids, new_item_ids, strict=False):
            item = self._first_item(order, item_id)
            variant = self._get_variant(item.product_id, new_item_id)
            if not variant.available:
                raise ValueError(f"New item {new_item_id} not found or available")
            diff_price += variant.price - item.price
        diff_price = round(diff_price, 2)
        method = self._get_payment_method(order.user_id, payment_method_id)
        if isinstance(method, GiftCard) and method.balance < diff_price:
            raise ValueError("Insufficient gift card balance to pay for the price difference")
        order.status = "exchange requested"
        order.exchange_items = sorted(item_ids)
        order.exchange_new_items = sorted(new_item_ids)
        order.exchange_payment_method_id = payment_method_id
        order.exchange_price_difference = diff_price
        return order

    @tool(mutates=False)
    def find_user_id_by_name_zip(self, first_name, last_name, zip):  # type: ignore[no-untyped-def]
        for user_id, user in self.db.users.items():
            if (
                user.name.first_name.lower() == first_name.lower()
                and user.name.last_name.lower() == last_name.lower()
                and user.address.zip == zip
            ):
                return user_id
        raise ValueError("User not found")

    @tool(mutates=False)
    def find_user_id_by_email(self, email):  # type: ignore[no-untyped-def]
        for user_id, user in self.db.users.items():
            if user.email.lower() == email.lower():
                return user_id
        raise ValueError("User not found")

    @tool(mutates=False)
    def get_order_details(self, order_id):  # type: ignore[no-untyped-def]
        return self._get_order(order_id)

    @tool(mutates=False)
    def get_product_details(self, product_id):  # type: ignore[no-untyped-def]
        return self._get_product(product_id)

    @tool(mutates=False)
    def get_item_details(self, item_id):  # type: ignore[no-untyped-def]
        return self._get_item(item_id)

    @tool(mutates=False)
    def get_user_details(self, user_id):  # type: ignore[no-untyped-def]
        return self._get_user(user_id)

    @tool(mutates=False)
    def list_all_product_types(self):  # type: ignore[no-untyped-def]
        return json.dumps({product.name: product.product_id for product in self.db.products.values()}, sort_keys=True)

    @tool(mutates=True)
    def modify_pending_order_address(self, order_id, address1, address2, city, state, country, zip):  # type: ignore[no-untyped-def]
        order = self._get_order(order_id)
        if "pending" not in order.status:
            raise ValueError("Non-pending order cannot be modified")
        order.address = UserAddress(address1=address1, address2=address2, city=city, state=state, country=country,
                                    zip=zip)  # fmt: skip
        return order

    @tool(mutates=True)
    def modify_pending_order_items(self, order_id, item_ids, new_item_ids, payment_method_id):  # type: ignore[no-untyped-def]
        order = self._get_order(order_id)
        if order.status != "pending":
            raise ValueError("Non-pending order cannot be modified")
        self._check_items(order, item_ids, "{item_id} not found")
        if len(item_ids) != len(new_item_ids):
            raise ValueError("The number of items to be exchanged should match")
        diff_price: float = 0  # an int while no item changes, as in the official
        for item_id, new_item_id in zip(item_ids, new_item_ids, strict=False):
            if item_id == new_item_id:
                raise ValueError("The new item id should be different from the old item id")
            item = self._first_item(order, item_id)
            variant = self._get_variant(item.product_id, new_item_id)
            if not variant.available:
                raise ValueError(f"New item {new_item_id} not found or available")
            diff_price += variant.price - item.price
        method = self._get_payment_method(order.user_id, payment_method_id)
        if isinstance(method, GiftCard) and method.balance < diff_price:
            raise ValueError("Insufficient gift card balance to pay for the new item")
        kind = "payment" if diff_price > 0 else "refund"
        order.payment_history.append(
            OrderPayment(transaction_type=kind, amount=abs(diff_price), payment_method_id=payment_method_id)
        )
        if isinstance(method, GiftCard):
            method.balance = round(method.balance - diff_price, 2)
        for item_id, new_item_id in zip(item_ids, new_item_ids, strict=False):
            item = self._first_item(order, item_id)
            item.item_id = new_item_id
            item.price = variant.price  # the last new item's, as in the official
            item.options = variant.options
        order.status = "pending (item modified)"
        return order

    @tool(mutates=True)
    def modify_pending_order_payment(self, order_id, payment_method_id):  # type: ignore[no-untyped-def]
        order = self._get_order(order_id)
        if "pending" not in order.status:
            raise ValueError("Non-pending order cannot be modified")
        method = self._get_payment_method(order.user_id, payment_method_id)
        history = order.payment_history
        if len(history) != 1 or history[0].transaction_type != "payment":
            raise ValueError("There should be exactly one payment for a pending order")
        if history[0].payment_method_id == payment_method_id:
            raise ValueError("The new payment method should be different from the current one")
        amount = history[0].amount
        if isinstance(method, GiftCard) and method.balance < amount:
            raise ValueError("Insufficient gift card balance to pay for the order")
        history.extend([
            OrderPayment(transaction_type="payment", amount=amount, payment_method_id=payment_method_id),
            OrderPayment(transaction_type="refund", amount=amount, payment_method_id=history[0].payment_method_id),
        ])  # fmt: skip
        if isinstance(method, GiftCard):
            method.balance = round(method.balance - amount, 2)
        old_method = self._get_payment_method(order.user_id, history[0].payment_method_id)
        if isinstance(old_method, GiftCard):
            old_method.balance = round(old_method.balance + amount, 2)
        return order

    @tool(mutates=True)
    def modify_user_address(self, user_id, address1, address2, city, state, country, zip):  # type: ignore[no-untyped-def]
        user = self._get_user(user_id)
        user.address = UserAddress(address1=address1, address2=address2, city=city, state=state, country=country,
                                   zip=zip)  # fmt: skip
        return user

    @tool(mutates=True)
    def return_delivered_order_items(self, order_id, item_ids, payment_method_id):  # type: ignore[no-untyped-def]
        order = self._get_order(order_id)
        if order.status != "delivered":
            raise ValueError("Non-delivered order cannot be returned")
        user = self._get_user(order.user_id)
        method = self._get_payment_method(user.user_id, payment_method_id)
        if not isinstance(method, GiftCard) and payment_method_id != order.payment_history[0].payment_method_id:
            raise ValueError("Payment method should be the original payment method")
        self._check_items(order, item_ids, "Some item not found")
        order.status = "return requested"
        order.return_items = sorted(item_ids)
        order.return_payment_method_id = payment_method_id
        return order

    @tool(mutates=False)
    def transfer_to_human_agents(self, summary):  # type: ignore[no-untyped-def]
        return "Transfer successful"
