"""What keeps telecom's two sides in step: the official `TelecomEnvironment.sync_tools`, run after every tool
call, every step and every environment function.

The phone learns from the carrier's records whether its line is active, whether roaming is allowed and whether
the data allowance (plan plus refuels) is used up; a payment the user made pays the bill; and a bill awaiting
payment, when no request is pending, becomes the phone's payment request.
"""

from __future__ import annotations

from benchmarks.tau2.domain_env import DomainEnv
from benchmarks.tau2.telecom import LineStatus, TelecomTools
from benchmarks.tau2.telecom_user import PaymentRequest, TelecomUserTools


def sync_tools(env: DomainEnv) -> None:
    tools, user_tools = env.tools, env.user_tools
    assert isinstance(tools, TelecomTools) and isinstance(user_tools, TelecomUserTools)
    surroundings = user_tools.db.surroundings
    phone_number = surroundings.phone_number
    if phone_number is None:
        return
    line = tools._get_line_by_phone(phone_number)
    if line is None:
        raise ValueError(f"Wrong scenario, line not found for phone number: {phone_number}")
    surroundings.line_active = line.status == LineStatus.ACTIVE
    surroundings.roaming_allowed = bool(line.roaming_enabled)
    plan = tools._get_plan_by_id(line.plan_id)
    if plan is None:
        raise ValueError(f"Wrong scenario, invalid plan id ({line.plan_id}) for the phone number {phone_number}")
    surroundings.mobile_data_usage_exceeded = line.data_used_gb >= plan.data_limit_gb + line.data_refueling_gb
    request = surroundings.payment_request
    if request is not None and request.paid:
        tools._set_bill_to_paid(request.bill_id)
        surroundings.payment_request = None
    if surroundings.payment_request is None:
        bills = tools._get_bills_awaiting_payment(tools.get_customer_by_phone(phone_number))
        if bills:
            surroundings.payment_request = PaymentRequest(bill_id=bills[0].bill_id, amount_due=bills[0].total_due)
