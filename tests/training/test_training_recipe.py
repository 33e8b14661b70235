"""The reference recipe: the CPU smoke of the whole chain (generate, teacher, SFT export, SFT,
RL export, GRPO, evaluation of the trained checkpoint), and the GPU-scale configs checked by the
trainers' own config classes (verl's dataclasses and validate_config; TRL's SFTConfig and
GRPOConfig)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _training_support import require

ROOT = Path(__file__).resolve().parents[2]
TRAIN = ROOT / "causaltrace" / "conf" / "train"


pytestmark = [pytest.mark.train, pytest.mark.sandbox]


def test_smoke_runs_the_whole_recipe(tmp_path):
    require("trl")
    require("torch")
    from causaltrace.training.smoke import run_smoke

    summary = run_smoke(tmp_path, n_train=8, n_eval=2)
    assert summary["teacher"]["counts"]["errors"] == 0
    assert summary["teacher"]["full_attr_at_1"] > 0
    export = summary["sft_export"]
    # Every correct trajectory is written, none cut: rows fit max_length (8192) after compaction.
    assert export["written"] == export["correct"] > 0 and export["over_max_length"] == 0
    assert export["tokens_p95"] <= 8192
    for step in ("sft", "grpo"):
        assert (Path(summary[step]) / "config.json").exists()
        assert (Path(summary[step]) / "tokenizer_config.json").exists()
    evaluation = summary["evaluation"]
    assert evaluation["counts"]["episodes"] == 2 and evaluation["counts"]["errors"] == 0
    assert json.loads((tmp_path / "smoke.json").read_text()) == summary


def _keys(node, prefix=()):
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _keys(value, (*prefix, key))
    else:
        yield prefix


def test_verl_grpo_config_passes_verls_own_checks():
    require("verl")
    import verl
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf
    from verl.utils.config import omega_conf_to_dataclass, validate_config
    from verl.workers.config import FSDPActorConfig, RolloutConfig

    with initialize_config_dir(config_dir=str(TRAIN), version_base=None):
        cfg = compose(config_name="verl_grpo_ads")
    # Every key the recipe sets exists in verl's own config (a typo would be silently added).
    base = OmegaConf.to_container(
        OmegaConf.load(Path(verl.__file__).parent / "trainer/config/_generated_ppo_trainer.yaml")
    )
    ours = OmegaConf.to_container(OmegaConf.load(TRAIN / "verl_grpo_ads.yaml"))
    for path in _keys({k: v for k, v in ours.items() if k not in ("hydra", "defaults")}):
        if path[:3] == ("reward", "custom_reward_function", "reward_kwargs"):
            continue  # passed through to compute_score
        node = base
        for key in path:
            assert isinstance(node, dict) and key in node, f"verl has no {'.'.join(path)}"
            node = node[key]
    rollout = omega_conf_to_dataclass(cfg.actor_rollout_ref.rollout)
    actor = omega_conf_to_dataclass(cfg.actor_rollout_ref.actor)
    algorithm = omega_conf_to_dataclass(cfg.algorithm)
    assert isinstance(rollout, RolloutConfig) and isinstance(actor, FSDPActorConfig)
    assert rollout.multi_turn.enable and rollout.agent.default_agent_loop == "tool_agent"
    assert algorithm.adv_estimator == "grpo" and rollout.n == 16
    validate_config(cfg, use_reference_policy=False, use_critic=False)
    # The reward is our compute_score with the TRACE composite.
    crf = cfg.reward.custom_reward_function
    assert (ROOT / crf.path).exists() and crf.name == "compute_score"
    assert dict(crf.reward_kwargs.reward.terms) == {
        "graded_attribution": 0.65,
        "full_attribution": 0.30,
        "format": 0.05,
    }
    assert (ROOT / cfg.actor_rollout_ref.rollout.multi_turn.tool_config_path).exists()


@pytest.mark.parametrize("name", ["trl_sft", "trl_grpo"])
def test_trl_configs_build_the_trainers_configs(name):
    require("trl")
    from trl import GRPOConfig, SFTConfig

    from causaltrace.training.recipe import load_recipe

    # use_cpu only because this machine has no GPU (bf16 is checked against the device).
    recipe = load_recipe(TRAIN / f"{name}.yaml", {"config.use_cpu": True})
    config = (SFTConfig if name == "trl_sft" else GRPOConfig)(**recipe["config"])
    if name == "trl_sft":
        assert config.assistant_only_loss and config.max_length == 16384
    else:
        assert config.num_generations == 16 and config.max_tool_calling_iterations == 30


def test_hermes_tool_calls_are_read_from_generated_text():
    from causaltrace.agents.transformers_agent import parse_hermes

    text = (
        'Let me look.\n<tool_call>\n{"name": "sql", "arguments": {"query": "SELECT 1"}}\n'
        '</tool_call>\n<tool_call>{"name": "python", "arguments": {"code": "x = 1"}}</tool_call>'
    )
    content, calls = parse_hermes(text)
    assert content == "Let me look."
    assert [(c["name"], json.loads(c["arguments"])) for c in calls] == [
        ("sql", {"query": "SELECT 1"}),
        ("python", {"code": "x = 1"}),
    ]
    # A broken block is still a call (the environment answers it with an error), not text.
    content, calls = parse_hermes("<tool_call>{not json</tool_call>")
    assert content == "" and calls == [{"name": "", "arguments": "{not json"}]
    assert parse_hermes("The answer is NO_ANOMALY.") == ("The answer is NO_ANOMALY.", [])
