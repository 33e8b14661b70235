"""The TRL adapter against TRL as installed: the environment's tools carry the contract's
schemas as TRL derives them, each reward is counted once, the environment and the reward
function give the same score on every conversation, and GRPO runs a few steps on a tiny model
built from a config with its tool calls executed in the sandbox."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from _training_support import require, small_dataset

trl = require("trl")

from causaltrace.datasets.reading import DatasetSource  # noqa: E402
from causaltrace.env.contract import ToolContract  # noqa: E402
from causaltrace.env.session import EnvConfig  # noqa: E402
from causaltrace.training.records import ground_truth_json  # noqa: E402
from causaltrace.training.trl_env import make_trl_environment, trl_reward, trl_rows  # noqa: E402
from causaltrace.training.trl_rewards import make_reward_function  # noqa: E402

pytestmark = [pytest.mark.train, pytest.mark.sandbox]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    return small_dataset(tmp_path_factory.mktemp("trl") / "ds")


def test_tool_methods_are_the_contract_as_trl_describes_them(dataset):
    from transformers.utils import get_json_schema

    env_cls = make_trl_environment(dataset)
    source = DatasetSource(dataset)
    for concurrent in (False, True):
        contract = ToolContract.for_space(source.answer_space, concurrent)
        methods = contract.python_tools(lambda self, name, args: "")
        for spec in contract.tools:
            assert get_json_schema(methods[spec.name]) == spec.openai()
    # The bound class exposes exactly the contract's tools (TRL treats every public method
    # other than reset and get_reward as a tool).
    public = {n for n in vars(env_cls) | vars(env_cls.__mro__[1]) if not n.startswith("_")}
    assert public - {"reset", "dataset", "config", "tool_config"} == {"sql", "python", "submit"}
    assert not hasattr(env_cls, "get_reward")  # TRL would add it as a second reward


def _conversation(env, steps):
    """Drive ``env`` as TRL does (tool methods called with the model's arguments) and build the
    completion TRL hands to reward functions: assistant turns with tool_calls, tool results."""
    completion = []
    for step in steps:
        if isinstance(step, str):  # a final text turn
            completion.append({"role": "assistant", "content": step})
            continue
        name, arguments = step
        call = {"type": "function", "function": {"name": name, "arguments": arguments}}
        completion.append({"role": "assistant", "content": "", "tool_calls": [call]})
        result = getattr(env, name)(**arguments)
        completion.append({"role": "tool", "name": name, "content": result})
    return completion


def test_environment_and_reward_function_agree_on_every_conversation(dataset):
    budget = 2
    env_cls = make_trl_environment(dataset, EnvConfig(max_tool_calls=budget))
    source = DatasetSource(dataset)
    reward_fn = make_reward_function({"parse": {"max_tool_calls": budget}})
    sql = ("sql", {"query": "SELECT 1 AS one"})
    cases = []
    for episode in source.episode_ids:
        label = source.label(episode)
        right = {"root_cause": label.cause, **({"slice": label.slice} if label.slice else {})}
        wrong = next(c for c in source.answer_space.causes if c != label.cause)
        cases += [
            (episode, [sql, ("submit", right)]),  # slice omitted for slice-free causes
            (episode, [("submit", {"root_cause": wrong})]),
            (episode, [sql, json.dumps(right)]),  # answer in the final text, no submit call
            (episode, [sql, "I could not find the cause."]),
            (episode, [sql]),  # cut off after a tool output
            (episode, [sql, sql, sql, ("submit", right)]),  # over the budget, then right
            (episode, [("submit", {"root_cause": "NOT_A_CAUSE", "slice": ""})]),
            (episode, [("python", {"code": "print(2 + 2)"}), ("submit", right), "Done."]),
        ]
    envs, completions, truths = [], [], []
    for episode, steps in cases:
        env = env_cls()
        env.reset(episode_id=episode)
        completions.append(_conversation(env, steps))
        envs.append(env)
        truths.append(ground_truth_json(source.label(episode), source.answer_space))
    from_env = trl_reward(completions, environments=envs)
    from_text = reward_fn(None, completions, ground_truth=truths)
    assert from_env == pytest.approx(from_text)
    # The cases really differ: right answers score 1, budget overruns and no answers 0.
    assert from_env[0] == pytest.approx(1.0) and from_env[2] == pytest.approx(1.0)
    assert from_env[4] == 0.0 and from_env[5] == 0.0


def test_grpo_counts_the_reward_once_and_runs_tools_in_the_sandbox(dataset, tmp_path):
    """Two GRPO steps on a tiny Qwen3 from a config. A random model never writes a valid tool
    call by chance, so generation is steered with transformers' sequence bias (through
    ``GRPOConfig.generation_kwargs``): first an sql call, then - once a tool result is in the
    context - the right submit for the first row. Everything else is TRL's and ours."""
    require("torch")
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from causaltrace.training.tiny import build_model, build_tokenizer

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    tokenizer = build_tokenizer()
    env_cls = make_trl_environment(dataset)
    rows = trl_rows(env_cls)[:2]
    source = DatasetSource(dataset)
    label = source.label(rows[0]["episode_id"])

    def ids(text):
        return tokenizer(text, add_special_tokens=False)["input_ids"]

    def call(name, arguments):
        payload = json.dumps({"name": name, "arguments": arguments})
        return ids(f"<tool_call>\n{payload}\n</tool_call><|im_end|>")

    first = call("sql", {"query": "SELECT 6 * 7 AS answer"})
    then = call("submit", {"root_cause": label.cause, "slice": label.slice or ""})
    after_tool = ids("</tool_response><|im_end|>\n<|im_start|>assistant\n")
    bias = [[first[: k + 1], 20.0 * (k + 1)] for k in range(len(first))]
    bias += [[after_tool + then[: k + 1], 1000.0 + 20.0 * k] for k in range(len(then))]

    seen = []

    def recorded(completions, environments=None, **kwargs):
        seen.append((completions, kwargs["episode_id"]))
        return trl_reward(completions, environments=environments, **kwargs)

    args = GRPOConfig(
        output_dir=str(tmp_path / "grpo"),
        max_steps=2,
        per_device_train_batch_size=2,
        num_generations=2,
        max_completion_length=256,
        max_tool_calling_iterations=2,
        learning_rate=1e-5,
        use_cpu=True,
        report_to="none",
        logging_steps=1,
        save_strategy="no",
        seed=0,
        generation_kwargs={"sequence_bias": bias},
    )
    trainer = GRPOTrainer(
        model=build_model(tokenizer),
        processing_class=tokenizer,
        args=args,
        train_dataset=Dataset.from_list(rows),
        environment_factory=env_cls,
        reward_funcs=[recorded],
    )
    assert trainer.reward_funcs == [recorded]  # no environment reward added beside ours
    trainer.train()

    steps = [h for h in trainer.state.log_history if "reward" in h]
    assert len(steps) == 2 and all(h["tools/call_frequency"] > 0 for h in steps)
    reward_fn = make_reward_function()
    for (completions, episodes), logged in zip(seen, steps):
        tool_results = [m["content"] for c in completions for m in c if m["role"] == "tool"]
        assert any("42" in r for r in tool_results)  # DuckDB ran the query in the sandbox
        truths = [ground_truth_json(source.label(e), source.answer_space) for e in episodes]
        scores = reward_fn(None, completions, ground_truth=truths)
        assert logged["reward"] == pytest.approx(sum(scores) / len(scores))
    # The first row's samples submitted its right answer: reward 1, not 2.
    assert steps[0]["reward"] == pytest.approx(1.0) or steps[1]["reward"] == pytest.approx(1.0)


def test_environments_run_on_a_given_host_with_back_pressure(dataset):
    """Sessions live on the host the environment is given (here one that holds one session):
    a second rollout is refused with HostFull until the first ends."""
    from causaltrace.serve import HostConfig, HostFull, SessionHost

    env_cls = make_trl_environment(
        dataset, host=lambda: SessionHost(config=HostConfig(max_sessions=1))
    )
    source = DatasetSource(dataset)
    episode = source.episode_ids[1]
    first, second = env_cls(), env_cls()
    first.reset(episode_id=episode)
    assert first.python(code="x = 5") == "(no output)"
    with pytest.raises(HostFull, match="max_sessions=1"):
        second.reset(episode_id=episode)
    label = source.label(episode)
    first.submit(root_cause=label.cause, slice=label.slice or "")
    assert first._reward_of(None)["full_attribution"] == 1.0
    second.reset(episode_id=episode)  # the slot is free again
    assert "NameError" in second.python(code="print(x)")  # a fresh namespace


def test_a_call_that_raises_in_the_environment_is_a_tool_error(dataset, monkeypatch):
    """Issue 42: a raise in the session host (TRL would end the rollout batch) and a raise in
    the tools under the session (the session answers it) both reach the model as a named tool
    error; the episode goes on and scores as usual."""
    from causaltrace.tools.runtime import EpisodeTools

    env_cls = make_trl_environment(dataset)
    source = DatasetSource(dataset)
    episode = source.episode_ids[0]
    env = env_cls()
    env.reset(episode_id=episode)
    real = env._host.step

    async def broken(*args, **kwargs):
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(env._host, "step", broken)
    assert env.sql(query="SELECT 1").startswith(
        "Error: the sql call failed in the environment (RecursionError)"
    )
    monkeypatch.setattr(env._host, "step", real)

    async def raising(self, name, arguments):
        raise ValueError("a forged reply")

    monkeypatch.setattr(EpisodeTools, "call", raising)
    assert env.python(code="1").startswith(
        "Error: the python call failed in the environment (ValueError)"
    )
    monkeypatch.undo()
    assert "42" in env.sql(query="SELECT 6 * 7 AS answer")
    label = source.label(episode)
    right = {"root_cause": label.cause, **({"slice": label.slice} if label.slice else {})}
    env.submit(**right)
    assert trl_reward([[]], environments=[env]) == [pytest.approx(1.0)]
