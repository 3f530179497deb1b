"""The ticketing tasks: one function per family, each with its instruction, hint, reference plan and grader."""

from __future__ import annotations

import random

from toolworlds.core import Finish, ToolCall, call
from toolworlds.reference.scenario import Family, Goal
from toolworlds.reference.ticketing.state import (
    ACTIVE,
    ALL_SUBJECTS,
    BREACH_TAG,
    DESCRIPTIONS,
    MAX_ESCALATION,
    PRIORITIES,
    SUBJECT_TEAM,
    TAGS,
    TEAMS,
    Agent,
    Comment,
    Customer,
    Helpdesk,
    Team,
    Ticket,
    Visibility,
    add_ticket,
    record_comment,
    set_age,
)
from toolworlds.scoring import Scorecard, copy_of, mentions, mentions_amount

# -- task families ------------------------------------------------------------------------------
# Each returns the instruction, the hint, the reference plan and the grader of one variant. Instructions
# name customers, agents and tickets the way a colleague would (by name and subject), so the agent must
# look ids up; the hint names the route and the pitfall but never the ids or values the task asks for.


def _new_comments(before: Helpdesk, after: Helpdesk, ticket_id: str, visibility: Visibility) -> list[Comment]:
    return [
        c
        for cid, c in after.comments.items()
        if cid not in before.comments and c.ticket_id == ticket_id and c.visibility == visibility
    ]


def _new_tickets(before: Helpdesk, after: Helpdesk, customer_id: str, subject: str) -> list[Ticket]:
    wanted = subject.strip().lower()
    return [
        t
        for tid, t in after.tickets.items()
        if tid not in before.tickets and t.customer_id == customer_id and t.subject.strip().lower() == wanted
    ]


def _least_loaded(desk: Helpdesk, team: Team) -> list[str]:
    """The on-shift agents of `team` with room for more work and the fewest active tickets (ties all count).

    When every one of them is full, the least busy gets room for one more, so a task can always be done.
    """
    on_shift = [a for a in desk.team(team) if a.on_shift]
    candidates = [a for a in on_shift if desk.load(a.agent_id) < a.capacity]
    if not candidates:
        roomiest = min(on_shift, key=lambda a: desk.load(a.agent_id))
        roomiest.capacity = desk.load(roomiest.agent_id) + 1
        candidates = [roomiest]
    fewest = min(desk.load(a.agent_id) for a in candidates)
    return [a.agent_id for a in candidates if desk.load(a.agent_id) == fewest]


def _make_roomiest(desk: Helpdesk, agent: Agent, spare: int) -> None:
    """Give `agent` exactly `spare` free slots and every on-shift teammate strictly fewer."""
    agent.capacity = desk.load(agent.agent_id) + spare
    for other in desk.team(agent.team):
        if other.agent_id != agent.agent_id and other.on_shift:
            other.capacity = min(other.capacity, desk.load(other.agent_id) + spare - 1)


def _fresh_subjects(desk: Helpdesk, customer: Customer, team: Team | None = None) -> list[str]:
    """Subjects this customer has no ticket about yet, so naming one picks out a single ticket."""
    used = {t.subject for t in desk.tickets_of(customer.customer_id)}
    return [s for s in ALL_SUBJECTS if s not in used and (team is None or SUBJECT_TEAM[s] == team)]


def _fresh_subject(desk: Helpdesk, rng: random.Random, customer: Customer, team: Team | None = None) -> str:
    return rng.choice(_fresh_subjects(desk, customer, team))


def _customer_for(desk: Helpdesk, rng: random.Random, team: Team) -> Customer:
    """A customer who can still file something new with `team`."""
    return rng.choice([c for c in desk.customers.values() if _fresh_subjects(desk, c, team)])


def _active_of(desk: Helpdesk, customer: Customer) -> list[Ticket]:
    return [t for t in desk.tickets_of(customer.customer_id) if t.status in ACTIVE]


def tag_by_id(desk: Helpdesk, rng: random.Random) -> Goal[Helpdesk]:
    resolved = [t for t in desk.tickets.values() if t.status == "resolved"]
    if resolved and rng.random() < 0.4:
        ticket = rng.choice(resolved)
        before = copy_of(desk)

        def grade_close(state: Helpdesk, answer: str | None) -> Scorecard:
            card = Scorecard().goal("ticket closed", state.tickets[ticket.ticket_id].status == "closed")
            return card.untouched(before, state, {f"tickets/{ticket.ticket_id}"})

        return Goal(
            f"The customer confirmed the fix on ticket {ticket.ticket_id}. Please close it.",
            "Closing is one status change on the ticket id you were given.",
            [call("change_status", ticket_id=ticket.ticket_id, status="closed"), Finish()],
            grade_close,
            variant="close_by_id",
        )
    ticket = rng.choice([t for t in desk.tickets.values() if t.status != "closed"])
    tag = rng.choice([t for t in TAGS if t not in ticket.tags])
    before = copy_of(desk)

    def grade(state: Helpdesk, answer: str | None) -> Scorecard:
        card = Scorecard().goal("tag added", tag in state.tickets[ticket.ticket_id].tags)
        return card.untouched(before, state, {f"tickets/{ticket.ticket_id}"})

    return Goal(
        f"Tag ticket {ticket.ticket_id} with `{tag}`.",
        "Tagging is a single call on the ticket id you were given.",
        [call("add_tag", ticket_id=ticket.ticket_id, tag=tag), Finish()],
        grade,
    )


def soonest_breach_question(desk: Helpdesk, rng: random.Random) -> Goal[Helpdesk]:
    customer = rng.choice(list(desk.customers.values()))

    def within_sla() -> list[Ticket]:
        return sorted((t for t in _active_of(desk, customer) if desk.hours_left(t) > 0), key=desk.hours_left)

    while len(within_sla()) < 2:
        priority = rng.choice(PRIORITIES)
        sla = desk.sla(customer.customer_id, priority)
        add_ticket(desk, customer, _fresh_subject(desk, rng, customer), priority=priority, age=rng.randint(0, sla - 1))
    while desk.hours_left(within_sla()[0]) == desk.hours_left(within_sla()[1]):  # break the tie by an hour
        first, second = within_sla()[:2]
        if second.created_at < desk.now:
            set_age(desk, second, desk.now - second.created_at - 1)
        else:
            set_age(desk, first, desk.now - first.created_at + 1)
    soonest = within_sla()[0]
    hours = desk.hours_left(soonest)
    before = copy_of(desk)

    def grade(state: Helpdesk, answer: str | None) -> Scorecard:
        card = Scorecard().goal("named the ticket", mentions(answer, soonest.subject))
        card.goal("stated the hours left", mentions_amount(answer, hours))
        return card.untouched(before, state, set())

    return Goal(
        f"{customer.name} asks which of their unresolved tickets that are still within SLA will breach first, "
        "and in how many hours. Reply with the ticket's subject and the hours left.",
        "Find the customer, then list only their active tickets; compare hours left, not filing time, and skip "
        "tickets already past their deadline.",
        [call("find_customer", name=customer.name),
         call("search_tickets", customer_id=customer.customer_id, active_only=True),
         Finish(answer=f"{soonest.subject}: {hours} hours left")],
        grade,
    )  # fmt: skip


def raise_priority_and_deadline(desk: Helpdesk, rng: random.Random) -> Goal[Helpdesk]:
    ticket = rng.choice([t for t in desk.tickets.values() if t.status in ACTIVE and t.priority != "urgent"])
    customer = desk.customers[ticket.customer_id]
    new_priority = rng.choice(PRIORITIES[PRIORITIES.index(ticket.priority) + 1 :])
    new_sla = desk.sla(customer.customer_id, new_priority)
    if ticket.created_at + new_sla <= desk.now:
        set_age(desk, ticket, rng.randint(0, new_sla - 1))
    hours = ticket.created_at + new_sla - desk.now
    before = copy_of(desk)

    def grade(state: Helpdesk, answer: str | None) -> Scorecard:
        card = Scorecard().goal("priority raised", state.tickets[ticket.ticket_id].priority == new_priority)
        card.goal("stated the new hours left", mentions_amount(answer, hours))
        return card.untouched(before, state, {f"tickets/{ticket.ticket_id}"})

    return Goal(
        f"{customer.name} says their ticket about \"{ticket.subject.lower()}\" has become critical for them. "
        f"Raise it to {new_priority} priority and tell me how many hours are left before its new SLA deadline.",
        "The deadline is recomputed when the priority changes, and depends on the customer's plan; read it from "
        "the ticket after the change.",
        [call("find_customer", name=customer.name), call("search_tickets", customer_id=customer.customer_id),
         call("update_priority", ticket_id=ticket.ticket_id, priority=new_priority), Finish(answer=f"{hours} hours")],
        grade,
    )  # fmt: skip


def team_question(desk: Helpdesk, rng: random.Random) -> Goal[Helpdesk]:
    team = rng.choice(TEAMS)
    if rng.random() < 0.5:
        waiting = [t for t in desk.tickets.values() if t.team == team and t.status in ACTIVE and t.assignee_id is None]
        before = copy_of(desk)

        def grade_count(state: Helpdesk, answer: str | None) -> Scorecard:
            card = Scorecard().goal("stated the count", mentions_amount(answer, len(waiting)))
            return card.untouched(before, state, set())

        return Goal(
            f"How many active tickets in the {team} queue have nobody assigned? Just give me the number.",
            "Resolved and closed tickets do not count; the ticket search can filter by team, activity and owner.",
            [call("search_tickets", team=team, unassigned=True, active_only=True), Finish(answer=str(len(waiting)))],
            grade_count,
            variant="unassigned_count",
        )
    on_shift = [a for a in desk.team(team) if a.on_shift]
    roomiest = rng.choice(on_shift)
    _make_roomiest(desk, roomiest, rng.randint(2, 4))
    before = copy_of(desk)

    def grade(state: Helpdesk, answer: str | None) -> Scorecard:
        card = Scorecard().goal("named the agent", mentions(answer, roomiest.name))
        return card.untouched(before, state, set())

    return Goal(
        f"Which on-shift {team} agent has the most spare capacity right now? Answer with their name.",
        "Spare capacity is the cap minus the active tickets held; off-shift agents do not count.",
        [call("list_agents", team=team, on_shift=True), Finish(answer=roomiest.name)],
        grade,
        variant="roomiest_agent",
    )


def escalate_blocking(desk: Helpdesk, rng: random.Random) -> Goal[Helpdesk]:
    ticket = rng.choice(
        [t for t in desk.tickets.values() if t.status in ACTIVE and t.escalation_level < MAX_ESCALATION]
    )
    customer = desk.customers[ticket.customer_id]
    level = ticket.escalation_level
    before = copy_of(desk)

    def grade(state: Helpdesk, answer: str | None) -> Scorecard:
        card = Scorecard().goal("escalated one level", state.tickets[ticket.ticket_id].escalation_level == level + 1)
        card.goal("internal note left", bool(_new_comments(before, state, ticket.ticket_id, "internal")))
        card.harm("replied to the customer", bool(_new_comments(before, state, ticket.ticket_id, "public")))
        return card.untouched(before, state, {f"tickets/{ticket.ticket_id}"})

    return Goal(
        f"{customer.name} called: the problem \"{ticket.subject.lower()}\" is blocking their whole team. Escalate "
        "that ticket one level and leave a note for the team explaining why. Don't reply to the customer yet.",
        "Customers are found by name, then their tickets by subject. A note for the team must not be visible to "
        "the customer.",
        [call("find_customer", name=customer.name), call("search_tickets", customer_id=customer.customer_id),
         call("escalate_ticket", ticket_id=ticket.ticket_id, reason="blocking the customer's whole team"),
         call("add_comment", ticket_id=ticket.ticket_id, visibility="internal",
              body="Escalated: the customer says this blocks their whole team."),
         Finish()],
        grade,
    )  # fmt: skip


def new_ticket_and_assign(desk: Helpdesk, rng: random.Random) -> Goal[Helpdesk]:
    customer = rng.choice(list(desk.customers.values()))
    subject = _fresh_subject(desk, rng, customer)
    team, priority = SUBJECT_TEAM[subject], rng.choice(PRIORITIES)
    accepted = _least_loaded(desk, team)
    new_id = desk.upcoming_id("T")  # nothing before create_ticket in the plan creates a record
    before = copy_of(desk)

    def grade(state: Helpdesk, answer: str | None) -> Scorecard:
        made = _new_tickets(before, state, customer.customer_id, subject)
        right = [t for t in made if t.team == team and t.priority == priority]
        card = Scorecard().goal("ticket opened with the right subject, team and priority", bool(right), weight=2)
        card.goal("assigned to a least-loaded on-shift agent", any(t.assignee_id in accepted for t in right))
        card.harm("opened more than one ticket", len(made) > 1)
        return card.untouched(before, state, set())

    return Goal(
        f"{customer.name} just phoned about this: \"{DESCRIPTIONS[subject]}\" Open a {priority}-priority ticket "
        f"for them in the {team} queue with the subject \"{subject}\", and assign it to whichever on-shift {team} "
        "agent has the fewest active tickets.",
        "Create the ticket for the customer's id, then compare on-shift agents of that team by active tickets; "
        "agents at their cap cannot take more.",
        [call("find_customer", name=customer.name),
         call("create_ticket", customer_id=customer.customer_id, subject=subject, description=DESCRIPTIONS[subject],
              team=team, priority=priority),
         call("list_agents", team=team, on_shift=True), call("assign_ticket", ticket_id=new_id, agent_id=accepted[0]),
         Finish()],
        grade,
    )  # fmt: skip


def merge_duplicates(desk: Helpdesk, rng: random.Random) -> Goal[Helpdesk]:
    original = rng.choice([t for t in desk.tickets.values() if t.status in ACTIVE and t.created_at < desk.now])
    customer = desk.customers[original.customer_id]
    duplicates = []
    for _ in range(rng.randint(1, 2)):
        age = rng.randint(0, desk.now - original.created_at - 1)
        duplicates.append(add_ticket(desk, customer, original.subject, priority=rng.choice(PRIORITIES), age=age))
    before = copy_of(desk)
    allowed = {f"tickets/{t.ticket_id}" for t in [original, *duplicates]}

    def grade(state: Helpdesk, answer: str | None) -> Scorecard:
        card = Scorecard()
        for duplicate in duplicates:
            merged = state.tickets[duplicate.ticket_id].merged_into == original.ticket_id
            card.goal(f"{duplicate.ticket_id} merged into the original", merged)
        card.harm("closed the original", state.tickets[original.ticket_id].status not in ACTIVE)
        return card.untouched(before, state, allowed)

    return Goal(
        f"{customer.name} reported \"{original.subject.lower()}\" more than once. Merge the duplicate tickets into "
        "the original one, the one filed first, which stays active.",
        "Search the customer's tickets by subject; the filing hour, not the id, tells which came first. Merge "
        "each duplicate into the original, never the other way round.",
        [call("find_customer", name=customer.name),
         call("search_tickets", customer_id=customer.customer_id, text=original.subject),
         *[call("merge_tickets", duplicate_id=d.ticket_id, into_id=original.ticket_id) for d in duplicates],
         Finish()],
        grade,
    )  # fmt: skip


def resolve_with_reply(desk: Helpdesk, rng: random.Random) -> Goal[Helpdesk]:
    customer = rng.choice(list(desk.customers.values()))
    unowned = rng.random() < 0.5
    subject = _fresh_subject(desk, rng, customer)
    team, priority = SUBJECT_TEAM[subject], rng.choice(PRIORITIES)
    if unowned:
        ticket = add_ticket(desk, customer, subject, priority=priority, age=rng.randint(1, 20))
    else:
        owner = rng.choice(_least_loaded(desk, team))
        ticket = add_ticket(desk, customer, subject, priority=priority, status="in_progress", assignee_id=owner, age=3)
    accepted = _least_loaded(desk, team)
    before = copy_of(desk)
    reply = "The fix has shipped; please let us know if you still see the problem."

    def grade(state: Helpdesk, answer: str | None) -> Scorecard:
        after = state.tickets[ticket.ticket_id]
        card = Scorecard().goal("ticket resolved", after.status == "resolved", weight=2)
        card.goal("customer told publicly", bool(_new_comments(before, state, ticket.ticket_id, "public")))
        if unowned:
            card.goal("owned by a least-loaded on-shift agent", after.assignee_id in accepted)
        return card.untouched(before, state, {f"tickets/{ticket.ticket_id}"})

    plan: list[ToolCall | Finish] = [
        call("find_customer", name=customer.name),
        call("search_tickets", customer_id=customer.customer_id, active_only=True),
    ]
    if unowned:
        plan += [call("list_agents", team=team, on_shift=True),
                 call("assign_ticket", ticket_id=ticket.ticket_id, agent_id=accepted[0]),
                 call("change_status", ticket_id=ticket.ticket_id, status="in_progress")]  # fmt: skip
    plan += [call("add_comment", ticket_id=ticket.ticket_id, body=reply, visibility="public"),
             call("change_status", ticket_id=ticket.ticket_id, status="resolved"), Finish()]  # fmt: skip
    owner_note = " Nobody owns it yet: give it to the on-shift agent of its team with the fewest active tickets."
    return Goal(
        f'The fix for {customer.name}\'s problem "{subject.lower()}" has shipped. Let them know on the ticket and '
        f"resolve it.{owner_note if unowned else ''}",
        "Finishing a ticket needs a reply the customer can see first, and works only from in progress or waiting "
        "on the customer; work in progress needs an owner. Notes for colleagues are not replies.",
        plan,
        grade,
        variant="resolve_unowned" if unowned else "resolve_owned",
    )


def move_to_right_team(desk: Helpdesk, rng: random.Random) -> Goal[Helpdesk]:
    customer = rng.choice(list(desk.customers.values()))
    subject = _fresh_subject(desk, rng, customer)
    right = SUBJECT_TEAM[subject]
    wrong = rng.choice([t for t in TEAMS if t != right])
    ticket = add_ticket(desk, customer, subject, priority=rng.choice(PRIORITIES), age=rng.randint(1, 6), team=wrong)
    accepted = _least_loaded(desk, right)
    before = copy_of(desk)

    def grade(state: Helpdesk, answer: str | None) -> Scorecard:
        after = state.tickets[ticket.ticket_id]
        card = Scorecard().goal("moved to the right team", after.team == right)
        card.goal("assigned to a least-loaded on-shift agent", after.assignee_id in accepted)
        return card.untouched(before, state, {f"tickets/{ticket.ticket_id}"})

    return Goal(
        f"{customer.name}'s new ticket \"{subject}\" landed in the {wrong} queue by mistake; it is a {right} "
        f"matter. Move it there and assign it to the on-shift {right} agent with the fewest active tickets.",
        "Agents can only take tickets of their own team, so move the ticket before assigning it.",
        [call("find_customer", name=customer.name), call("search_tickets", customer_id=customer.customer_id),
         call("transfer_ticket", ticket_id=ticket.ticket_id, team=right),
         call("list_agents", team=right, on_shift=True),
         call("assign_ticket", ticket_id=ticket.ticket_id, agent_id=accepted[0]), Finish()],
        grade,
    )  # fmt: skip


def problem_is_back(desk: Helpdesk, rng: random.Random) -> Goal[Helpdesk]:
    customer = rng.choice(list(desk.customers.values()))
    subject = _fresh_subject(desk, rng, customer)
    closed = rng.random() < 0.5
    owner = rng.choice(desk.team(SUBJECT_TEAM[subject])).agent_id
    old = add_ticket(desk, customer, subject, priority=rng.choice(PRIORITIES),
                     status="closed" if closed else "resolved", assignee_id=owner,
                     age=rng.randint(30, 200))  # fmt: skip
    record_comment(desk, old, owner, "public", "This is fixed now; thanks for waiting.")
    reply = "Sorry the problem is back; we are looking into it again."
    new_id = desk.upcoming_id("T")  # nothing before create_ticket in the plan creates a record
    before = copy_of(desk)

    def grade_reopen(state: Helpdesk, answer: str | None) -> Scorecard:
        card = Scorecard().goal("ticket reopened", state.tickets[old.ticket_id].status == "in_progress", weight=2)
        card.goal("customer told publicly", bool(_new_comments(before, state, old.ticket_id, "public")))
        return card.untouched(before, state, {f"tickets/{old.ticket_id}"})

    def grade_recreate(state: Helpdesk, answer: str | None) -> Scorecard:
        made = _new_tickets(before, state, customer.customer_id, subject)
        right = [t for t in made if t.team == old.team and t.priority == old.priority]
        card = Scorecard().goal("new ticket with the same subject, team and priority", bool(right), weight=2)
        card.goal("customer told publicly", any(_new_comments(before, state, t.ticket_id, "public") for t in right))
        card.harm("opened more than one ticket", len(made) > 1)
        return card.untouched(before, state, set())

    plan: list[ToolCall | Finish] = [
        call("find_customer", name=customer.name),
        call("search_tickets", customer_id=customer.customer_id, text=subject),
    ]
    if closed:
        plan += [call("create_ticket", customer_id=customer.customer_id, subject=subject, description=old.description,
                      team=old.team, priority=old.priority),
                 call("add_comment", ticket_id=new_id, body=reply, visibility="public")]  # fmt: skip
    else:
        plan += [call("change_status", ticket_id=old.ticket_id, status="in_progress"),
                 call("add_comment", ticket_id=old.ticket_id, body=reply, visibility="public")]  # fmt: skip
    return Goal(
        f'{customer.name} writes that the problem "{subject.lower()}" is back. Reopen their ticket about it and '
        "reply publicly that we're on it. If it can't be reopened any more, open a new ticket for them with the "
        "same subject, team and priority and reply on that one instead.",
        "Resolved tickets reopen to in progress; closed ones are final. Check the old ticket's status first.",
        [*plan, Finish()],
        grade_recreate if closed else grade_reopen,
        variant="recreate_closed" if closed else "reopen_resolved",
    )


def sweep_breached(desk: Helpdesk, rng: random.Random) -> Goal[Helpdesk]:
    team = rng.choice(TEAMS)
    queue = [t for t in desk.tickets.values() if t.team == team and t.status in ACTIVE]
    fresh = [t for t in queue if desk.hours_left(t) >= 0 and t.escalation_level < MAX_ESCALATION]
    for ticket in rng.sample(fresh, max(0, min(len(fresh) - 1, rng.randint(1, 2)))):
        set_age(desk, ticket, desk.sla(ticket.customer_id, ticket.priority) + rng.randint(1, 30))
    breached = [t for t in queue if desk.hours_left(t) < 0]
    if breached and rng.random() < 0.3:
        rng.choice(breached).escalation_level = MAX_ESCALATION  # one that can only be tagged
    if len(breached) < 2:
        customer = _customer_for(desk, rng, team)
        subject = _fresh_subject(desk, rng, customer, team)
        priority = rng.choice(PRIORITIES)
        age = desk.sla(customer.customer_id, priority) + rng.randint(1, 30)
        breached.append(add_ticket(desk, customer, subject, priority=priority, age=age))
    escalatable = [t for t in breached if t.escalation_level < MAX_ESCALATION]
    levels = {t.ticket_id: t.escalation_level for t in escalatable}
    before = copy_of(desk)

    def grade(state: Helpdesk, answer: str | None) -> Scorecard:
        card = Scorecard()
        for ticket in escalatable:
            raised = state.tickets[ticket.ticket_id].escalation_level == levels[ticket.ticket_id] + 1
            card.goal(f"{ticket.ticket_id} escalated", raised)
        for ticket in breached:
            card.goal(f"{ticket.ticket_id} tagged", BREACH_TAG in state.tickets[ticket.ticket_id].tags)
        return card.untouched(before, state, {f"tickets/{t.ticket_id}" for t in breached})

    plan: list[ToolCall | Finish] = [call("search_tickets", team=team, active_only=True)]
    for ticket in sorted(breached, key=lambda t: t.ticket_id):
        if ticket.escalation_level < MAX_ESCALATION:
            plan.append(call("escalate_ticket", ticket_id=ticket.ticket_id, reason="SLA breached"))
        plan.append(call("add_tag", ticket_id=ticket.ticket_id, tag=BREACH_TAG))
    return Goal(
        f"Sweep the {team} queue: every active ticket there that has already breached its SLA gets the tag "
        f"`{BREACH_TAG}`, and is escalated one level unless it is already at the top level.",
        "Only active tickets past their deadline count; the search results say which are breached and how far "
        "each is escalated.",
        [*plan, Finish()],
        grade,
    )


def handover_off_shift(desk: Helpdesk, rng: random.Random) -> Goal[Helpdesk]:
    team = rng.choice(TEAMS)
    leaving = rng.choice(desk.team(team))
    leaving.on_shift = False
    if not any(a.on_shift for a in desk.team(team)):
        next(a for a in desk.team(team) if a is not leaving).on_shift = True

    def held(urgent: bool) -> list[Ticket]:
        return [
            t
            for t in desk.tickets.values()
            if t.assignee_id == leaving.agent_id and t.status in ACTIVE and (t.priority in ("high", "urgent")) == urgent
        ]

    wanted = rng.choice([2, 3, 4])
    while len(held(urgent=True)) < wanted or not held(urgent=False):
        priority = rng.choice(PRIORITIES[2:]) if len(held(urgent=True)) < wanted else "normal"
        customer = _customer_for(desk, rng, team)
        subject = _fresh_subject(desk, rng, customer, team)
        status = rng.choice(ACTIVE)
        add_ticket(desk, customer, subject, priority=priority, status=status, assignee_id=leaving.agent_id, age=1)
    leaving.capacity = max(leaving.capacity, desk.load(leaving.agent_id))
    moving = held(urgent=True)
    successor = rng.choice([a for a in desk.team(team) if a.on_shift])
    _make_roomiest(desk, successor, len(moving) + rng.randint(0, 2))
    before = copy_of(desk)
    note = f"Handed over from {leaving.name}, who went off shift."

    def grade(state: Helpdesk, answer: str | None) -> Scorecard:
        card = Scorecard()
        for ticket in moving:
            card.goal(
                f"{ticket.ticket_id} handed over", state.tickets[ticket.ticket_id].assignee_id == successor.agent_id
            )
            noted = bool(_new_comments(before, state, ticket.ticket_id, "internal"))
            card.goal(f"{ticket.ticket_id} handover note", noted, weight=0.5)
        return card.untouched(before, state, {f"tickets/{t.ticket_id}" for t in moving})

    return Goal(
        f"{leaving.name} has gone home sick. Hand every active high or urgent ticket they hold to the one on-shift "
        "teammate who has the most spare capacity right now, and leave an internal handover note on each. Their "
        "other tickets stay where they are.",
        "Find both agents in the agent list (spare capacity is shown there), then list the tickets assigned to the "
        "sick agent; only active high and urgent ones move.",
        [call("list_agents"), call("search_tickets", assignee_id=leaving.agent_id, active_only=True),
         *[step for t in moving for step in (
             call("assign_ticket", ticket_id=t.ticket_id, agent_id=successor.agent_id),
             call("add_comment", ticket_id=t.ticket_id, body=note, visibility="internal"))],
         Finish()],
        grade,
    )  # fmt: skip


FAMILIES: tuple[Family[Helpdesk], ...] = (
    tag_by_id,
    soonest_breach_question,
    raise_priority_and_deadline,
    team_question,
    escalate_blocking,
    new_ticket_and_assign,
    merge_duplicates,
    resolve_with_reply,
    move_to_right_team,
    problem_is_back,
    sweep_breached,
    handover_off_shift,
)
