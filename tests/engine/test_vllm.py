"""The engine against a real vLLM server (its CPU build, in its own environment: `just vllm-install`), serving
the embedded model as its float checkpoint (`tests.vllm`): every mode, token exactness, and the server's
logprobs against the trainer's own model. Slow (`just test-vllm`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from engine.call_grammar import call_grammar
from engine.hf_checkpoint import float_checkpoint
from engine.local_models import default_gguf
from engine.trajectory import EpisodeRecord
from engine.vllm_server import VLLMServer
from tests.engine.conftest import play
from toolworlds.registry import load_world
from toolworlds.tool import FINISH_FUNCTION

pytestmark = [pytest.mark.slow, pytest.mark.anyio]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the engine on trio is tested against the mock model


# Float32 on both sides, different kernels. Measured (2026-12-06): at most 5.8e-5 apart over the sampled tokens of
# this test's 100 episodes, with the trainer reading grammars by xgrammar's rules (by llama.cpp's: up to 0.02).
LOGPROB_TOLERANCE = 1e-3


@pytest.fixture(scope="module")
def checkpoint() -> Path:
    return float_checkpoint(default_gguf())


@pytest.fixture
def vllm_url(vllm_server: VLLMServer) -> str:
    return vllm_server.base_url


@pytest.fixture(scope="module")
def trainer_model(checkpoint: Path) -> Any:
    import torch
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(str(checkpoint), dtype=torch.float32).eval()


@pytest.fixture(scope="module")
def admitted(checkpoint: Path) -> Any:
    """The trainer's rebuild of what a grammar admits (`trainers.constrained`), on the served tokenizer."""
    from transformers import AutoTokenizer

    from trainers.constrained import AdmittedTokens

    return AdmittedTokens(AutoTokenizer.from_pretrained(str(checkpoint)), sampler="vllm")


def hermes_grammar(world: str) -> str:
    """A grammar that makes the model write one call in the hermes format spadework's template teaches: the
    135M model never writes `<tool_call>` unprompted, so vLLM's parser would have nothing to read."""
    tools = [*load_world(world).openai_tools(), FINISH_FUNCTION]
    call = call_grammar(tools).replace("root ::=", "call ::=", 1)
    return 'root ::= "<tool_call>\\n" call "\\n</tool_call>"\n' + call


async def test_chat_mode_reads_calls_through_vllms_tool_parser(tmp_path: Path, vllm_url: str) -> None:
    extra = {"structured_outputs": {"grammar": hermes_grammar("banking")}}
    stats, records = await play(tmp_path, [vllm_url], tasks=6, max_turns=3, max_tokens_per_turn=160,
                                extra_body=extra, token_ids=True, calls="native")  # fmt: skip
    assert stats.statuses["ok"] + stats.statuses["truncated"] == 6
    replies = [(m, turn) for r in records for m, turn in zip(assistant(r), r.turns, strict=True)]
    whole = [m for m, turn in replies if turn.finish_reason != "length"]  # vLLM says "tool_calls"
    assert len(whole) >= 6 and all(m.get("tool_calls") and not m.get("content") for m in whole), whole
    assert sum(r.tool_calls for r in records) + stats.statuses["ok"] >= len(whole)  # finish is not a tool call
    # vLLM renders the history again each turn and tokenises the calls it parsed afresh: the ids it sampled
    # are not always the ids it reads back. The engine keeps what was sampled and counts each such episode.
    drifted = [r for r in records if r.tokens is not None and r.tokens.drift]
    print(f"chat mode through vLLM: {len(drifted)} of {len(records)} episodes drifted")
    assert stats.drifted == len(drifted) and all(not r.tokens.exact for r in drifted if r.tokens)


def assistant(record: EpisodeRecord) -> list[dict[str, Any]]:
    return [message for message in record.messages if message["role"] == "assistant"]


@pytest.mark.timeout(1200)
async def test_tokens_mode_is_token_exact_over_a_hundred_episodes(
    tmp_path: Path, vllm_url: str, checkpoint: Path, trainer_model: Any, admitted: Any
) -> None:
    stats, records = await play(tmp_path, [vllm_url], tasks=50, hints="both", concurrency=16, mode="tokens",
                                tokenizer=str(checkpoint), call_schema=True, max_turns=2,
                                max_tokens_per_turn=64)  # fmt: skip
    assert len(records) == 100 and stats.statuses["ok"] + stats.statuses["truncated"] == 100  # none failed
    assert stats.drifted == 0 and all(r.tokens is not None and r.tokens.exact for r in records)
    assert sum(r.tool_calls for r in records) >= 100, "the call grammar makes every reply a call"
    assert sum(len(r.turns) for r in records) >= 150, "most episodes take a second turn, on top of the first's ids"
    for record in records:
        trace = record.tokens
        assert trace is not None and not trace.drift
        sampled = [lp for lp, mask in zip(trace.logprobs, trace.loss_mask, strict=True) if mask]
        assert sampled and all(lp is not None and lp <= 0 for lp in sampled)
    # The sampler's logprobs are the trainer's restricted policy: log p(t) - log Z over what the grammar
    # admits, Z rebuilt by the trainer (llguidance under llama.cpp's rules) from the recorded grammar.
    worst = max(restricted_gap(record, trainer_model, admitted) for record in records)
    print(f"largest gap between vLLM's and the trainer's restricted logprobs: {worst:.2e}")
    assert worst < LOGPROB_TOLERANCE, worst


def restricted_gap(record: EpisodeRecord, model: Any, admitted: Any) -> float:
    """The largest difference between the server's logprob of a sampled token and the trainer's."""
    import torch

    trace = record.tokens
    assert trace is not None
    restriction = admitted.restriction(trace.grammar, trace.completion_ids, trace.loss_mask)
    assert not restriction.refused, "the trainer's reading refuses a token vLLM's grammar backend sampled"
    ids = torch.tensor([trace.prompt_ids + trace.completion_ids])
    with torch.no_grad():
        logits = model(ids).logits[0, len(trace.prompt_ids) - 1 : -1].float()
    logprobs = torch.log_softmax(logits, dim=-1)
    masks = restriction.admitted(logits.shape[-1])
    restricted = {int(p): masks[i] for i, p in enumerate(restriction.positions)}
    gaps = []
    for position, (token, mask) in enumerate(zip(trace.completion_ids, trace.loss_mask, strict=True)):
        if not mask:
            continue
        ours = logprobs[position, token]
        if position in restricted:
            ours = ours - torch.logsumexp(logprobs[position][restricted[position]], dim=-1)
        served = trace.logprobs[position]
        assert served is not None
        gaps.append(abs(float(ours) - served))
    return max(gaps)


async def test_constrained_mode_goes_through_vllms_structured_outputs(tmp_path: Path, vllm_url: str) -> None:
    stats, records = await play(tmp_path, [vllm_url], world="ticketing", tasks=6, mode="constrained",
                                max_turns=3, max_tokens_per_turn=160)  # fmt: skip
    assert stats.statuses["ok"] + stats.statuses["truncated"] == 6
    turns = [turn for record in records for turn in record.turns]
    whole = [turn for turn in turns if turn.finish_reason == "stop"]
    assert len(whole) >= 6, "most replies end inside the token budget"
    # The schema admits only a call of an offered tool: every reply the budget did not cut is one.
    assert all(not turn.problems for turn in whole), [turn.problems for turn in whole if turn.problems]


def test_logprobs_are_the_tempered_distribution_the_trainer_computes(
    vllm_url: str, checkpoint: Path, trainer_model: Any
) -> None:
    import torch
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(checkpoint))
    prompt = tokenizer("A bank account holds money and", add_special_tokens=False).input_ids
    for temperature in (1.0, 0.6):
        body = {"model": "default", "prompt": prompt, "max_tokens": 24, "temperature": temperature, "seed": 7,
                "logprobs": 1, "return_token_ids": True}  # fmt: skip
        choice = httpx.post(f"{vllm_url}/completions", json=body, timeout=120).json()["choices"][0]
        sampled, served = choice["token_ids"], choice["logprobs"]["token_logprobs"]
        ids = torch.tensor([prompt + sampled])
        with torch.no_grad():
            logits = trainer_model(ids).logits[0, len(prompt) - 1 : -1].float()
        ours = torch.log_softmax(logits / temperature, dim=-1).gather(1, torch.tensor(sampled)[:, None])[:, 0]
        gaps = [abs(a - b) for a, b in zip(ours.tolist(), served, strict=True)]
        assert max(gaps) < LOGPROB_TOLERANCE, (temperature, max(gaps))


def test_bfcl_v4_plays_through_vllm_in_its_fc_protocol(tmp_path: Path, vllm_url: str) -> None:
    """`spadework bench bfcl-v4 --endpoint`: bfcl-eval's FC protocol through vLLM's hermes parser, one real
    two-turn entry (a ~4,000-token prompt), scored by bfcl-eval's checker."""
    from benchmarks.bfcl.play import all_entries
    from engine.store import read_records
    from tests.benchmarks.runs import bench, results

    completed = bench("bfcl-v4", "--no-progress", "--endpoint", vllm_url, "--model", "default", "--ids",
                      "multi_turn_base_100", "--max-tokens", "48", "--out", str(tmp_path), timeout=900)  # fmt: skip
    assert completed.returncode == 0, completed.stderr[-2000:]
    (record,) = read_records(tmp_path)
    summary = results(tmp_path)
    assert record.status in ("ok", "truncated") and record.reward in (0.0, 1.0), record.detail
    assert summary["endpoint"] == vllm_url and summary["entries"] == {"base": 1}
    assert record.key.seed == next(i for i, e in enumerate(all_entries()) if e.id == "multi_turn_base_100")
    assert len(record.turns) >= 2 and all(turn.prompt_tokens for turn in record.turns)
