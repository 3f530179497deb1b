"""Grammar-sampled rows are scored under the restricted policy that sampled them (`trainers.constrained`).

The admitted sets are checked against an independent oracle: a hand-written regular expression for the same
two tools' calls, matched partially (llama.cpp's rule: a token is admitted when prefix + its text can still
become a call). The trainer's log-probabilities and their gradients are checked against the restricted
softmax computed directly from the model's logits."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import regex

from engine.call_grammar import call_grammar
from engine.templates import TokenTemplate, end_of_generation_ids
from tests.policy import trainable
from trainers.config import UpdateConfig
from trainers.constrained import AdmittedTokens, GrammarRestrictions
from trainers.grpo import Learner, RowFeed, UpdateSettings, grpo_trainer
from trainers.rows import TrainingRow, with_advantages

TOOLS = [
    {"type": "function", "function": {"name": "get_order", "parameters": {
        "type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}}},
    {"type": "function", "function": {"name": "finish", "parameters": {
        "type": "object", "properties": {"answer": {"type": "string"}}, "required": []}}},
]  # fmt: skip
STRING = r'"[^"\\\x00-\x1f]{0,48}"'
CALLS = regex.compile(
    r'\{"name": "get_order", "arguments": \{"order_id": ' + STRING + r"\}\}"
    r'|\{"name": "finish", "arguments": \{(?:"answer": ' + STRING + r")?\}\}"
)
TEMPERATURE = 0.7


@pytest.fixture(scope="module")
def policy(embedded_policy: tuple[Any, Any]) -> tuple[Any, Any]:
    return trainable(embedded_policy)


def episode(tokenizer: Any) -> tuple[list[int], list[int], list[int]]:
    """Prompt, completion and loss mask of a two-call episode as the engine stores it."""
    prompt = tokenizer.encode("<|im_start|>user\nWhere is order O-17?<|im_end|>\n<|im_start|>assistant\n")
    first = tokenizer.encode('{"name": "get_order", "arguments": {"order_id": "O-17"}}<|im_end|>')
    glue = tokenizer.encode('\n<|im_start|>user\n{"status": "shipped"}<|im_end|>\n<|im_start|>assistant\n')
    second = tokenizer.encode('{"name": "finish", "arguments": {"answer": "shipped"}}<|im_end|>')
    return prompt, first + glue + second, [1] * len(first) + [0] * len(glue) + [1] * len(second)


def test_the_admitted_sets_are_the_tokens_whose_text_can_still_become_a_call(policy: tuple[Any, Any]) -> None:
    _, tokenizer = policy
    _, completion, mask = episode(tokenizer)
    reply = completion[: mask.index(0)]
    restriction = AdmittedTokens(tokenizer).restriction(call_grammar(TOOLS), completion, mask)
    assert not restriction.refused
    admitted = restriction.admitted(len(tokenizer))
    texts = [tokenizer.decode([token]) for token in range(len(tokenizer))]
    clean = [token for token, text in enumerate(texts) if text and "\ufffd" not in text]  # whole characters
    assert len(clean) > 0.95 * len(texts)
    # What llama.cpp ends a reply with, as the embedded server showed: <|endoftext|>, <|im_end|>, and <reponame>
    # (its FIM repo token). Admitted only where the grammar is complete, never for their text.
    end = end_of_generation_ids(tokenizer)
    assert end == {tokenizer.convert_tokens_to_ids(text) for text in ("<|im_end|>", "<|endoftext|>", "<reponame>")}
    positions = list(restriction.positions)
    # the first token, the tool-name choice, a forced token, inside a string, its end, the stop token
    checked = [0, 4, 5, 17, 21, len(reply) - 1]
    for position in checked:
        prefix = tokenizer.decode(reply[:position])
        row = admitted[positions.index(position)]
        complete = CALLS.fullmatch(prefix) is not None
        for token in clean:
            expected = (
                (token in end)
                if complete
                else (token not in end and CALLS.fullmatch(prefix + texts[token], partial=True) is not None)
            )
            assert bool(row[token]) == expected, (position, prefix, texts[token])
    assert int(admitted[positions.index(5)].sum()) == 1, "after 'get' the grammar forces '_'"
    assert int(admitted[positions.index(17)].sum()) > 48_000, "inside a string almost everything is admitted"
    second_reply = [i for i, bit in enumerate(mask) if bit][len(reply)]
    assert second_reply in positions, "the second reply starts the grammar again"


def test_a_reply_llama_cpp_ended_on_any_of_its_end_tokens_is_admitted(policy: tuple[Any, Any]) -> None:
    """llama.cpp's grammar sampler may end a complete reply on any end-of-generation token, <reponame> too
    (about once in 700 stage ends on SmolLM2): the trainer must admit what it sampled."""
    _, tokenizer = policy
    reply = tokenizer.encode('{"name": "get_order", "arguments": {"order_id": "O-17"}}')
    for end in sorted(end_of_generation_ids(tokenizer)):
        restriction = AdmittedTokens(tokenizer).restriction(call_grammar(TOOLS), [*reply, end], [1] * (len(reply) + 1))
        assert not restriction.refused, tokenizer.convert_ids_to_tokens(end)
    template = TokenTemplate(tokenizer)
    assert template.reply_text([*reply, tokenizer.convert_tokens_to_ids("<reponame>")]).endswith('"O-17"}}')


def test_under_vllms_rules_only_the_eos_ends_and_other_end_tokens_are_text(policy: tuple[Any, Any]) -> None:
    """vLLM's xgrammar ends a complete grammar only on the EOS and reads every other special token as its text,
    <|endoftext|> and <reponame> too; llama.cpp ends on any end-of-generation token and never reads those as
    text. The trainer's log Z must be the sampler's (compared set for set with xgrammar, and logprob for
    logprob with the real server, in tests/engine/test_vllm.py)."""
    _, tokenizer = policy
    reply = tokenizer.encode('{"name": "get_order", "arguments": {"order_id": "O-17"}}<|im_end|>')
    inside_string = next(i for i in range(len(reply)) if tokenizer.decode(reply[:i]).endswith('"order_id": "O'))
    start, text_end = tokenizer.convert_tokens_to_ids("<|im_start|>"), tokenizer.convert_tokens_to_ids("<|endoftext|>")
    for sampler in ("llama.cpp", "vllm"):
        restriction = AdmittedTokens(tokenizer, sampler).restriction(call_grammar(TOOLS), reply, [1] * len(reply))
        assert not restriction.refused
        rows = restriction.admitted(len(tokenizer))
        at_string = rows[list(restriction.positions).index(inside_string)]
        at_end = rows[list(restriction.positions).index(len(reply) - 1)]
        assert bool(at_string[start]), "<|im_start|> is its 12 characters to both"
        assert bool(at_string[text_end]) == (sampler == "vllm"), sampler
        ends = {int(token) for token in at_end.nonzero()[:, 0]}
        assert ends == ({tokenizer.eos_token_id} if sampler == "vllm" else end_of_generation_ids(tokenizer)), sampler


def test_the_trainer_scores_grammar_rows_under_the_restricted_softmax(policy: tuple[Any, Any], tmp_path: Path) -> None:
    import torch

    model, tokenizer = policy
    prompt, completion, mask = episode(tokenizer)
    plain = tokenizer.encode("Plain text, no grammar.<|im_end|>")
    rows = [
        TrainingRow(role="agent", group="g", prompt_ids=prompt, completion_ids=completion, env_mask=mask,
                    logprobs=[0.0] * len(completion), grammar=call_grammar(TOOLS), reward=1.0, advantage=1.0),
        TrainingRow(role="agent", group="g", prompt_ids=prompt[:5], completion_ids=plain, env_mask=[1] * len(plain),
                    logprobs=[0.0] * len(plain), reward=0.0, advantage=-1.0),
    ]  # fmt: skip
    feed = RowFeed(wait_seconds=5)
    settings = UpdateSettings(UpdateConfig(gradient_checkpointing=False), 2, TEMPERATURE)
    trainer = grpo_trainer(model, tokenizer, feed, settings, tmp_path, 1)
    assert feed.restrictions is not None
    feed.restrictions.prepare(rows)
    # The batch as TRL lays it out: prompts padded on the left, completions on the right.
    width_p, width_c = len(prompt), len(completion)
    pad = tokenizer.pad_token_id or 0
    ids, attention = [], []
    for row in rows:
        left, right = width_p - len(row.prompt_ids), width_c - len(row.completion_ids)
        ids.append([pad] * left + row.prompt_ids + row.completion_ids + [pad] * right)
        attention.append([0] * left + [1] * (len(row.prompt_ids) + len(row.completion_ids)) + [0] * right)
    logps, *_ = trainer._get_per_token_logps_and_entropies(
        trainer.model, torch.tensor(ids), torch.tensor(attention), width_c
    )
    restriction = AdmittedTokens(tokenizer).restriction(rows[0].grammar, completion, mask)
    admitted = restriction.admitted(len(tokenizer))

    def direct(row: TrainingRow, restricted: bool) -> Any:
        sequence = torch.tensor([row.prompt_ids + row.completion_ids])
        logits = model(sequence).logits[0, len(row.prompt_ids) - 1 : -1].float() / TEMPERATURE
        chosen = logits.gather(1, torch.tensor(row.completion_ids)[:, None])[:, 0]
        normaliser = logits.logsumexp(-1).clone()
        if restricted:
            for k, position in enumerate(restriction.positions):
                normaliser[position] = logits[position][admitted[k]].logsumexp(-1)
        return chosen - normaliser

    expected = direct(rows[0], restricted=True)
    sampled = torch.tensor(mask).bool()
    assert torch.allclose(logps[0][sampled], expected[sampled], atol=1e-4)
    forced = [p for k, p in enumerate(restriction.positions) if int(admitted[k].sum()) == 1]
    assert forced and all(abs(float(logps[0][p].detach())) < 1e-4 for p in forced), "a forced token is certain"
    assert float(direct(rows[0], restricted=False)[sampled].sum()) < float(expected[sampled].sum()) - 20
    assert torch.allclose(logps[1][: len(plain)], direct(rows[1], restricted=False), atol=1e-4), "no grammar, no change"

    # The gradient is the restricted policy's too (log Z is differentiated, not a constant).
    weight = model.get_input_embeddings().weight
    weight.grad = None
    logps[0][sampled].sum().backward()
    through_trainer = weight.grad.clone()
    weight.grad = None
    expected = direct(rows[0], restricted=True)
    expected[sampled].sum().backward()
    assert float((through_trainer - weight.grad).norm() / weight.grad.norm()) < 1e-3
    weight.grad = None
    direct(rows[0], restricted=False)[sampled].sum().backward()
    assert float((through_trainer - weight.grad).norm() / weight.grad.norm()) > 0.1, "log Z moves the gradient"


def test_forced_tokens_are_the_ones_whose_text_the_grammar_fixed(policy: tuple[Any, Any]) -> None:
    """What `benchmarks/perf/episode_cost.py` counts as decoding steps spent on no choice at all."""
    _, tokenizer = policy
    _, completion, mask = episode(tokenizer)
    reply = completion[: mask.index(0)]
    forced = AdmittedTokens(tokenizer).forced(call_grammar(TOOLS), completion, mask)
    assert len(forced) == sum(mask)
    # '{"' opens every call; the tool name is a choice; after 'get' the grammar forces '_'; a string's content
    # is free; the stop token ends a complete call (a choice of no bytes); the second reply opens like the first
    assert [forced[position] for position in (0, 4, 5, 17, len(reply) - 1, len(reply))] == [
        True, False, True, False, False, True]  # fmt: skip
    text = [tokenizer.decode([token]) for token in reply]
    assert "".join(t for t, f in zip(text, forced, strict=False) if f).startswith('{"name": "'), "the head is fixed"


def test_a_row_the_trainer_cannot_read_costs_that_row_not_the_update(policy: tuple[Any, Any], tmp_path: Path) -> None:
    """A grammar llama.cpp would refuse, and one whose reading refuses what was sampled: each row is left out
    (a padding row takes its place), counted by cause and logged; the update runs on the others."""
    from structlog.testing import capture_logs

    model, tokenizer = policy
    _, completion, mask = episode(tokenizer)
    plain = tokenizer.encode("Plain text, no grammar.<|im_end|>")

    def row(grammar: str, reward: float, completion_ids: list[int] = completion, env_mask: list[int] = mask) -> Any:
        logprobs: list[float | None] = [0.0] * len(completion_ids)
        asked = tokenizer.encode(f"<|im_start|>user\nTry {len(grammar)}<|im_end|>\n<|im_start|>assistant\n")
        return TrainingRow(role="agent", group="g", prompt_ids=asked, completion_ids=completion_ids,
                           env_mask=env_mask, logprobs=logprobs, grammar=grammar, reward=reward)  # fmt: skip

    rows = [
        row(call_grammar(TOOLS), 1.0),
        row('root ::= "\\q"', 0.0),  # an unknown escape
        row('root ::= "{\\"name\\": \\"get_order\\""', 1.0),  # a reply the grammar cannot have sampled
        row("", 0.0, plain, [1] * len(plain)),
    ]
    feed = RowFeed(wait_seconds=60)
    settings = UpdateSettings(UpdateConfig(gradient_checkpointing=False), 4, TEMPERATURE)
    trainer = grpo_trainer(model, tokenizer, feed, settings, tmp_path, 1)
    learner = Learner(trainer, feed, None, {"agent": 4})
    with capture_logs() as logs:
        learner.update(with_advantages(rows, scale="group"))
    learner.close()
    assert learner.updates == 1 and trainer.state.global_step == 1
    assert learner.left_out == {GrammarRestrictions.UNREADABLE: 1, GrammarRestrictions.DISAGREES: 1}
    left = [entry for entry in logs if entry["event"] == "row_left_out"]
    assert [entry["cause"] for entry in left] == [GrammarRestrictions.UNREADABLE, GrammarRestrictions.DISAGREES]
    assert "unknown escape \\q" in left[0]["detail"] and "completion position" in left[1]["detail"]
    kept = [r for r in rows if r.grammar in ("", rows[0].grammar)]
    assert learner.trained_tokens == sum(len(r.prompt_ids) + len(r.completion_ids) for r in kept)


def test_rows_with_the_same_ids_under_other_grammars_keep_only_the_first(policy: tuple[Any, Any]) -> None:
    _, tokenizer = policy
    prompt, completion, mask = episode(tokenizer)
    rows = [TrainingRow(role="agent", group="g", prompt_ids=prompt, completion_ids=completion, env_mask=mask,
                        logprobs=[0.0] * len(completion), grammar=grammar, reward=0.0)
            for grammar in (call_grammar(TOOLS), call_grammar(TOOLS), call_grammar(TOOLS[:1]))]  # fmt: skip
    restrictions = GrammarRestrictions(tokenizer)
    batch = restrictions.prepare(rows)
    assert [row.group for row in batch] == ["g", "g", "padding"]
    assert restrictions.left_out == {GrammarRestrictions.CLASH: 1}
