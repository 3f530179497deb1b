"""The training configuration: presets are valid, every knob can be overridden, bad input fails in one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainers.config import PRESETS, ConfigError, TrainConfig, load_config, resumed_config


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_every_preset_is_a_valid_config(preset: str) -> None:
    config = load_config(preset)
    assert isinstance(config, TrainConfig) and config.preset == preset


def test_cpu_tiny_is_small_and_gpu_is_at_scale() -> None:
    tiny, large = load_config("cpu-tiny"), load_config("gpu-qwen3-4b")
    assert tiny.policy.model == "default" and not tiny.policy.endpoints and tiny.agent.mode == "tokens"
    assert (
        large.designer.documents * large.designer.generations > 10 * tiny.designer.documents * tiny.designer.generations
    )
    assert large.policy.model == "Qwen/Qwen3-4B-Instruct-2507"


def test_overrides_are_typed_and_validated() -> None:
    overrides = ["agent.plays=8", "designer.plateau=[0.3, 0.7]", "ablations.no_memory=true",
                 'policy.endpoints=["http://gpu:8000/v1"]', "designer.corpus=docs.jsonl",
                 "agent.suite=reference", "agent.reference_worlds=tau2-telecom,banking"]  # fmt: skip
    config = load_config("cpu-tiny", overrides)
    assert config.agent.reference_worlds == ["banking", "tau2-telecom"]
    assert config.agent.plays == 8 and config.designer.plateau == (0.3, 0.7) and config.ablations.no_memory
    assert config.policy.endpoints == ["http://gpu:8000/v1"] and config.designer.corpus == "docs.jsonl"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["agent.plays=0"], "agent.plays: Input should be greater than or equal to 1 (got 0)"),
        (["agent.plays=many"], "agent.plays: Input should be a valid integer"),
        (["agent.turns=3"], "agent has no knob 'turns'; knobs: plays,"),
        (["agents.plays=3"], "no section 'agents'; sections: policy, designer"),
        (["plays=3"], "write section.knob=value"),
        (["designer.plateau=[0.8, 0.2]"], "designer.plateau must satisfy 0 <= low <= high <= 1"),
        (["ablations.fixed_pool=true", "agent.reference_tasks=0"], "agent.reference_tasks must be > 0"),
        (["update.rows_per_pass=5"], "{'agent': 8, 'designer': 4}, must add up to a multiple of update.rows_per_pass"),
        (['policy.endpoints=["http://gpu:8000/v1"]', "policy.weight_sync=reload"], "cannot serve policy.endpoints"),
        (["policy.server=vllm", "policy.weight_sync=reload"], "cannot serve policy.endpoints or policy.server=vllm"),
        (["policy.weight_sync=vllm-nccl"], "vllm-nccl pushes to vLLM: give policy.endpoints or policy.server=vllm"),
        (['policy.endpoints=["http://gpu:8000/v1"]', "policy.weight_sync=vllm-lora"], "set policy.lora_rank > 0"),
        (["policy.weight_sync=rsync"], "policy.weight_sync: Input should be 'auto', 'reload'"),
        (["designer.invalid_penalty=3"], "designer.invalid_penalty: Input should be less than or equal to 0"),
        (['policy.endpoints=["gpu:8000"]'], "'gpu:8000' is not an http(s) URL with a host"),
        (["agent.reference_worlds=tau3-airline"], "agent.reference_worlds: Value error, no registered world 'tau3-"),
        (["agent.reference_worlds=tau2-retail"], "tau2-retail needs agent.suite=reference (the reference-lite suite"),
    ],
)
def test_a_bad_config_fails_with_one_line_naming_the_knob(overrides: list[str], message: str) -> None:
    with pytest.raises(ConfigError) as error:
        load_config("cpu-tiny", overrides)
    assert message in str(error.value) and "\n" not in str(error.value)


def test_the_designers_rows_come_on_top_of_the_agents_in_an_update() -> None:
    """Every arm of a comparison gives its agent `update.rows_per_update` rows; only the arm whose designer trains
    adds room for its designs (cpu-tiny: 1 document x 4; cpu-selfplay: 2 x 4)."""
    assert load_config("cpu-tiny").update_rows == {"agent": 8, "designer": 4}
    assert load_config("cpu-selfplay").update_rows == {"agent": 8, "designer": 8}
    for ablation in ("frozen_designer", "fixed_pool"):
        assert load_config("cpu-tiny", [f"ablations.{ablation}=true"]).update_rows == {"agent": 8, "designer": 0}


def test_an_unknown_preset_lists_the_known_ones() -> None:
    known = "cpu-tiny, cpu-selfplay, cpu-vllm, gpu-qwen3-4b"
    with pytest.raises(ConfigError, match=f"no preset 'huge'; choose one of: {known}"):
        load_config("huge")


@pytest.mark.parametrize(
    ("overrides", "sync"),
    [
        ([], "reload"),  # the embedded server: export and reload, LoRA merged or not
        (["policy.lora_rank=8"], "reload"),
        (['policy.endpoints=["http://gpu:8000/v1"]'], "vllm-reload"),  # no CUDA here: NCCL cannot run
        (['policy.endpoints=["http://gpu:8000/v1"]', "policy.lora_rank=8"], "vllm-lora"),
        (['policy.endpoints=["http://gpu:8000/v1"]', "policy.weight_sync=none"], "none"),
        (["policy.server=vllm"], "vllm-reload"),  # vLLM's CPU build, started by the run
        (["policy.server=vllm", "policy.lora_rank=8"], "vllm-lora"),
    ],
)
def test_auto_weight_sync_follows_the_server_and_the_adapter(overrides: list[str], sync: str) -> None:
    assert load_config("cpu-tiny", overrides).policy.sync == sync


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["designer.temperature=1.0"], "designer.temperature (1.0) must equal agent.temperature (0.7)"),
        (["update.importance_sampling=token_truncate"], "importance weights need agent.temperature=1.0"),
        (["agent.mode=chat"], "agent.call_schema constrains tokens-mode sampling"),
        (["agent.mode=constrained", "agent.call_schema=false"], "agent.mode=constrained: training rows need"),
        (["agent.mode=chat", "agent.call_schema=false"], "agent.mode=chat: training rows need"),
        (
            ["designer.mode=chat", "designer.vocabulary=free", "designer.task_text=written", "designer.plan_calls=3"],
            "designer.mode=chat: the designer's rows need the token ids",
        ),
        (
            ["agent.temperature=1.0", "designer.temperature=1.0", "update.importance_sampling=token_truncate"],
            "the embedded llama.cpp server reports the unrestricted one under a grammar",
        ),
        (
            ["policy.server=vllm", "update.importance_sampling=token_truncate", "update.grammar_logprobs=full"],
            "vLLM reports the restricted one under a grammar",
        ),
    ],
)
def test_sampling_settings_that_would_make_the_loss_wrong_are_refused(overrides: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        load_config("cpu-tiny", overrides)
    load_config(
        "cpu-tiny", ["designer.temperature=1.0", "ablations.frozen_designer=true"]
    )  # the designer does not train
    load_config("cpu-tiny", ["agent.temperature=1.0", "designer.temperature=1.0",
                             "update.importance_sampling=token_truncate", "update.grammar_logprobs=full"])  # fmt: skip


def test_a_run_that_trains_nothing_may_play_in_chat_mode_and_nothing_else_is_loosened() -> None:
    """`spadework design` updates nothing: chat-mode roles are allowed there (an endpoint whose tokenizer is not at
    hand), but the rules about what a world is stay, and training itself still refuses them."""
    chat = ["agent.mode=chat", "agent.call_schema=false", "designer.mode=chat", "designer.vocabulary=free",
            "designer.task_text=written", "designer.plan_calls=3"]  # fmt: skip
    config = load_config("cpu-tiny", chat, training=False)
    assert (config.agent.mode, config.designer.mode) == ("chat", "chat")
    with pytest.raises(ConfigError, match="rows need the token ids"):
        load_config("cpu-tiny", chat)
    with pytest.raises(ConfigError, match=r"set designer\.mode=tokens"):
        load_config("cpu-tiny", ["designer.mode=chat"], training=False)  # cpu-tiny's designer writes in stages
    with pytest.raises(ConfigError, match=r"set agent\.mode=tokens"):
        load_config("cpu-tiny", ["agent.mode=chat"], training=False)  # a call schema samples tokens


def test_the_cpu_preset_trains_and_measures_on_the_lite_suite() -> None:
    tiny = load_config("cpu-tiny")
    assert tiny.agent.suite == tiny.run.eval_suite == "reference-lite" and tiny.agent.call_schema
    # 90 held-out episodes a measurement: with 50 tasks a world run 18 took 51.8 minutes (evaluations 27), and on
    # its plays 30 tasks a world gave an interval 15.0 points wide against 10.0 at 50 (docs/runs.md)
    assert 3 * tiny.run.eval_tasks >= 90, "at least 90 held-out episodes per measurement"


def test_a_resumed_run_served_by_endpoints_may_move_to_new_ones_and_nothing_else(tmp_path: Path) -> None:
    served = tmp_path / "served.json"
    served.write_text(load_config("gpu-qwen3-4b", ['policy.endpoints=["http://gpu1:8000/v1"]']).model_dump_json())
    moved = resumed_config(served, ['policy.endpoints=["http://gpu2:8000/v1"]', "run.iterations=300"])
    assert moved.policy.endpoints == ["http://gpu2:8000/v1"] and moved.run.iterations == 300
    with pytest.raises(ConfigError, match=r"only run\.\* knobs"):
        resumed_config(served, ["agent.plays=4"])
    with pytest.raises(ConfigError, match="is not an http"):
        resumed_config(served, ['policy.endpoints=["gpu2:8000"]'])
    embedded = tmp_path / "embedded.json"
    embedded.write_text(load_config("cpu-tiny").model_dump_json())
    with pytest.raises(ConfigError, match=r"policy\.endpoints"):  # it serves its own policy: that is what it trains
        resumed_config(embedded, ['policy.endpoints=["http://gpu2:8000/v1"]'])


def test_the_cpu_preset_pays_the_designer_the_band_on_partial_credit() -> None:
    """The reward chosen on recorded plays (benchmarks/studies/designer_rewards.py): a world the agent never solves
    earns its designer nothing, one in the band earns most."""
    from trainers.designer.regret import Play, RewardSettings, designer_reward, regret_of

    designer = load_config("cpu-tiny").designer
    settings = RewardSettings(mode=designer.reward, plateau=designer.plateau, win=designer.win)
    never = regret_of([Play(hinted, 0.0) for hinted in (False, True) for _ in range(4)])
    halfway = regret_of([Play(hinted, 0.5) for hinted in (False, True) for _ in range(4)])
    assert designer_reward(never, settings) == 0.0 and designer_reward(halfway, settings) == 0.6


def test_the_selfplay_preset_is_cpu_tiny_with_more_designs_and_iterations() -> None:
    """cpu-selfplay is built from cpu-tiny: what it does not change stays the main job's."""
    tiny, selfplay = load_config("cpu-tiny"), load_config("cpu-selfplay")
    assert (selfplay.designer.documents, selfplay.designer.generations, selfplay.run.iterations) == (2, 4, 9)
    assert selfplay.designer.reward == tiny.designer.reward and selfplay.agent.call_schema == tiny.agent.call_schema
    assert selfplay.update == tiny.update and selfplay.run.eval_suite == tiny.run.eval_suite
    assert tiny.designer.documents == 1 and tiny.run.iterations == 4  # the overlay left cpu-tiny as it was


def test_derived_task_and_tool_text_need_a_spec_designer() -> None:
    assert load_config("cpu-tiny", ["designer.task_text=derived"]).designer.task_text == "derived"
    with pytest.raises(ConfigError, match=r"designer\.task_text=derived .* set designer\.format=spec"):
        load_config("cpu-tiny", ["designer.task_text=derived", "designer.format=python"])
    assert load_config("cpu-tiny", ["designer.tool_text=derived"]).designer.tool_text == "derived"
    with pytest.raises(ConfigError, match=r"designer\.tool_text=derived .* set designer\.format=spec"):
        load_config("cpu-tiny", ["designer.tool_text=derived", "designer.format=python", "designer.task_text=written"])
    assert load_config("cpu-tiny", ["designer.key_choices=true"]).designer.key_choices
    with pytest.raises(ConfigError, match=r"designer\.key_choices marks a spec's tables: set designer\.format=spec"):
        load_config("cpu-tiny", ["designer.key_choices=true", "designer.format=python", "designer.task_text=written"])


def test_the_cpu_preset_copies_from_the_document_and_a_python_designer_must_not() -> None:
    for preset in ("cpu-tiny", "cpu-selfplay"):
        designer = load_config(preset).designer
        assert (designer.vocabulary, designer.task_text, designer.plan_calls) == ("document", "derived", 1)
    assert load_config("gpu-qwen3-4b").designer.vocabulary == "free"
    python = ["designer.format=python", "designer.task_text=written", "designer.plan_calls=3"]
    with pytest.raises(ConfigError, match=r"designer\.vocabulary=document .* set designer\.format=spec, or designer"):
        load_config("cpu-tiny", python)
    assert load_config("cpu-tiny", [*python, "designer.vocabulary=free"]).designer.format == "python"


def test_plan_rules_need_a_spec_designer() -> None:
    config = load_config("cpu-tiny", ["designer.plans=change", "designer.plan_calls=1"])
    assert (config.designer.plans, config.designer.plan_calls) == ("change", 1)
    with pytest.raises(ConfigError, match=r"designer\.plans and designer\.plan_calls .* set designer\.format=spec"):
        load_config("cpu-tiny", ["designer.plans=change", "designer.format=python", "designer.task_text=written"])
    with pytest.raises(ConfigError, match=r"designer\.plan_calls"):
        load_config("cpu-tiny", ["designer.plan_calls=4"])  # past what a spec's budget holds


@pytest.mark.parametrize(
    ("preset", "overrides", "sampler"),
    [
        ("cpu-tiny", [], "llama.cpp"),
        ("cpu-vllm", [], "vllm"),
        ("cpu-tiny", ['policy.endpoints=["http://gpu:8000/v1"]'], "vllm"),
    ],
)
def test_the_trainer_reads_grammars_by_the_rules_of_the_server_that_sampled(
    preset: str, overrides: list[str], sampler: str
) -> None:
    from trainers.grpo import UpdateSettings

    assert UpdateSettings.of(load_config(preset, overrides)).grammar_sampler == sampler


def test_a_sharded_lora_policy_is_refused_before_anything_starts() -> None:
    with pytest.raises(ConfigError, match=r"update\.sharding=fsdp2 trains all weights"):
        load_config("cpu-tiny", ["update.sharding=fsdp2", "policy.lora_rank=8"])
    assert load_config("cpu-tiny", ["update.sharding=fsdp2"]).update.sharding == "fsdp2"


def test_on_vllm_grammar_rows_are_importance_weighted_under_the_restricted_policy() -> None:
    """vLLM reports the probability the grammar-restricted policy gave each token (tests/engine/test_vllm.py:
    within 5.8e-5 of the trainer's restricted logprob), so the weights compare like with like."""
    config = load_config("cpu-vllm", ["update.importance_sampling=token_truncate"])
    assert config.update.grammar_logprobs == "restricted" and config.agent.call_schema


def test_the_trainers_settings_take_each_knob_from_the_config_and_the_batch_from_both_roles() -> None:
    """One knob, one place: the trainer reads `UpdateConfig` itself; only what the run decides is added."""
    from trainers.grpo import UpdateSettings

    config = load_config("cpu-tiny", ["update.learning_rate=3e-5", "update.rows_per_update=8"])
    settings = UpdateSettings.of(config)
    assert settings.knobs is config.update and settings.knobs.learning_rate == 3e-5
    assert settings.batch_rows == 8 + config.designer.documents * config.designer.generations
    assert settings.temperature == config.agent.temperature
    with pytest.raises(ValueError, match=r"must be a multiple of rows_per_pass \(3\)"):
        UpdateSettings(config.update.model_copy(update={"rows_per_pass": 3}), 8)
