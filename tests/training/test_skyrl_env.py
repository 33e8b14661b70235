"""The SkyRL environment against ``skyrl-gym`` as installed (the skyrl extra; it skips without
it, and fails instead under ``CAUSALTRACE_REQUIRE_INTEGRATION=skyrl``). Environments are made
as SkyRL's generator makes them (``skyrl_gym.make(env_class, env_config=<DictConfig>,
extras=<the row's other columns + max_turns>)``), opened with ``init`` and stepped with model
text in every tool-call format the reward reads; the reward is compared with causaltrace's own
scoring of the same answer and of the same transcript (``compute_score``)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from _integration_support import require_integration

skyrl_gym = require_integration("skyrl_gym", "skyrl")

from omegaconf import OmegaConf  # noqa: E402
from skyrl_gym.envs.base_text_env import BaseTextEnv  # noqa: E402

import causaltrace.training.skyrl_env as skyrl_env  # noqa: E402
from causaltrace.datasets.reading import DatasetSource  # noqa: E402
from causaltrace.env.contract import ToolContract  # noqa: E402
from causaltrace.errors import CausalTraceError  # noqa: E402
from causaltrace.scoring import TRACE_WEIGHTS, score_output  # noqa: E402
from causaltrace.training.host_loop import HostLoop  # noqa: E402
from causaltrace.training.records import (  # noqa: E402
    LEAKY_METADATA_KEYS,
    RL_RULES,
    EpisodeRules,
    ground_truth_json,
)
from causaltrace.training.verl_reward import compute_score  # noqa: E402

REPO = Path(skyrl_env.__file__).resolve().parents[2]
ADS_TEST = REPO / "data" / "ads_test"
EPISODE = "test-000012"  # the committed episode the other environment tests use
MAX_REWARD = math.fsum(TRACE_WEIGHTS.values())  # TRACE's maximum: 1.0
SQL = "SELECT count(*) AS n FROM campaigns"


@pytest.fixture(scope="module")
def source() -> DatasetSource:
    return DatasetSource(ADS_TEST)


@pytest.fixture(scope="module", autouse=True)
def _close_hosts():
    yield
    HostLoop.get().close_hosts()


def make(episode: str = EPISODE, max_turns: int = 40, **config):
    """An environment as SkyRL's generator makes one: the env class's config section as a
    DictConfig, the row's extras with the generator's ``max_turns`` added."""
    row = skyrl_env.skyrl_rows(ADS_TEST, episodes=[episode])[0]
    extras = {k: v for k, v in row.items() if k not in ("prompt", "env_class")}
    extras["max_turns"] = max_turns
    env = skyrl_gym.make(row["env_class"], env_config=OmegaConf.create(config), extras=extras)
    prompt, info = env.init(row["prompt"])
    return env, prompt, info


def hermes(name: str, **arguments) -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"


def chatml(actions: list[str], observations: list[str]) -> str:
    """The decoded response as verl's ``compute_score`` gets it (Qwen's ChatML)."""
    out = []
    for i, action in enumerate(actions):
        out.append(action + "<|im_end|>\n")
        if i < len(observations):
            out.append(
                "<|im_start|>user\n<tool_response>\n"
                + observations[i]
                + "\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
            )
    return "".join(out)


def run(env, actions: list[str]) -> tuple[list[dict], list[str]]:
    """Step through ``actions``; the step outputs and the tool outputs the agent read."""
    outputs, observations = [], []
    for action in actions:
        out = env.step(action)
        outputs.append(out)
        observations += [m["content"] for m in out["observations"]]
        if out["done"]:
            break
    return outputs, observations


def test_registration_and_rows(source, tmp_path):
    spec = skyrl_gym.registry[skyrl_env.ENV_CLASS]
    assert spec.entry_point == skyrl_env.ENTRY_POINT
    assert skyrl_env.register_envs() == []  # idempotent (skyrl_gym refuses a second id)

    rows = skyrl_env.skyrl_rows(ADS_TEST)
    assert len(rows) == len(source.episode_ids)
    row = rows[12]
    assert row == {
        "prompt": [{"role": "user", "content": source.prompt(EPISODE)}],
        "env_class": "causaltrace",
        "episode_id": EPISODE,
        "data_source": "causaltrace",
        "dataset": str(ADS_TEST),
    }
    assert not LEAKY_METADATA_KEYS & set(row)  # the label stays in the dataset

    # The Parquet file reads back as SkyRL's PromptDataset reads it (Hugging Face datasets):
    # the prompt, the env class, and every other column is the sample's extras.
    datasets = pytest.importorskip("datasets")
    path = skyrl_env.export_skyrl_parquet(ADS_TEST, tmp_path / "train.parquet", episodes=[EPISODE])
    loaded = datasets.load_dataset("parquet", data_files=path)["train"][0]
    assert loaded.pop("prompt") == row["prompt"] and loaded.pop("env_class") == "causaltrace"
    assert loaded == {"episode_id": EPISODE, "data_source": "causaltrace", "dataset": str(ADS_TEST)}


def test_bad_samples_and_configs_fail_before_any_sandbox():
    with pytest.raises(CausalTraceError, match="episode_id"):
        skyrl_gym.make("causaltrace", env_config={}, extras={"dataset": str(ADS_TEST)})
    with pytest.raises(CausalTraceError, match="no dataset"):
        skyrl_gym.make("causaltrace", env_config={}, extras={"episode_id": EPISODE})
    with pytest.raises(CausalTraceError, match="unknown key"):
        skyrl_gym.make("causaltrace", env_config={"budget": 3}, extras={"episode_id": EPISODE})


@pytest.mark.sandbox
def test_a_scripted_episode_scores_as_causaltrace_scores_it(source):
    label, space = source.label(EPISODE), source.answer_space
    env, prompt, info = make()
    assert isinstance(env, BaseTextEnv)
    assert prompt == [{"role": "user", "content": source.prompt(EPISODE)}]
    assert info == {"episode_id": EPISODE, "tools": ToolContract.for_dataset(ADS_TEST).openai()}

    right = {"root_cause": label.cause, "slice": label.slice or ""}
    actions = [hermes("sql", query=SQL), hermes("submit", **right)]
    outputs, observations = run(env, actions)
    first, last = outputs
    assert first["observations"] == [{"role": "tool", "content": observations[0]}]
    assert "4" in observations[0] and "(1 row)" in observations[0]
    assert (first["reward"], first["done"]) == (0.0, False)
    assert last["done"] and last["observations"] == []
    assert last["reward"] == pytest.approx(MAX_REWARD)
    # causaltrace's own scoring of the same answer, and of the same transcript (as verl's
    # reward worker reads it, by the rules the environment ran under)
    assert (
        last["reward"] == score_output({"name": "submit", "arguments": right}, label, space).score
    )
    truth = ground_truth_json(label, space, rules=RL_RULES)
    assert (
        compute_score("causaltrace", chatml(actions, observations), truth)["score"]
        == (last["reward"])
    )
    assert last["metadata"]["reward"]["full_attribution"] == 1.0
    assert last["metadata"]["reason"] == "submitted" and last["metadata"]["tool_calls"] == 1
    assert env.get_metrics()["score"] == last["reward"]
    with pytest.raises(RuntimeError, match="over"):
        env.step(hermes("sql", query=SQL))
    env.close()

    # A wrong cause scores less: the format term only, as causaltrace scores it.
    env, *_ = make()
    wrong = {"root_cause": next(c for c in space.causes if c != label.cause), "slice": ""}
    actions = [hermes("submit", **wrong)]
    (out,), observations = run(env, actions)
    assert out["done"] and out["reward"] < MAX_REWARD
    assert out["reward"] == pytest.approx(TRACE_WEIGHTS["format"])
    assert out["reward"] == score_output({"name": "submit", "arguments": wrong}, label, space).score
    assert (
        compute_score("causaltrace", chatml(actions, observations), truth)["score"]
        == (out["reward"])
    )
    env.close()


def formats(name: str, arguments: dict) -> dict[str, str]:
    """One call written in every tool-call format the reward's parser reads."""
    text = json.dumps(arguments)
    return {
        "hermes": hermes(name, **arguments),
        "llama3": json.dumps({"name": name, "parameters": arguments}),
        "openai": json.dumps({"type": "function", "function": {"name": name, "arguments": text}}),
        "qwen3_coder": (
            f"<tool_call>\n<function={name}>\n"
            + "".join(f"<parameter={k}>\n{v}\n</parameter>\n" for k, v in arguments.items())
            + "</function>\n</tool_call>"
        ),
        "glm": (
            f"<tool_call>{name}\n"
            + "".join(
                f"<arg_key>{k}</arg_key>\n<arg_value>{v}</arg_value>\n"
                for k, v in arguments.items()
            )
            + "</tool_call>"
        ),
        "kimi": (
            "<|tool_calls_section_begin|><|tool_call_begin|>functions."
            f"{name}:0<|tool_call_argument_begin|>{text}<|tool_call_end|><|tool_calls_section_end|>"
        ),
        "kimi_decoded": f"functions.{name}:0{text}",  # Kimi's markers gone (skip_special_tokens)
    }


@pytest.mark.sandbox
def test_every_tool_call_format_runs_and_scores(source):
    """The environment runs the calls the reward reads: a query and a right submit written in
    each format run, and score what ``compute_score`` gives the same text."""
    label, space = source.label(EPISODE), source.answer_space
    truth = ground_truth_json(label, space, rules=RL_RULES)
    queries = formats("sql", {"query": SQL})
    submits = formats("submit", {"root_cause": label.cause, "slice": label.slice or ""})
    assert set(queries) == {
        "hermes",
        "llama3",
        "openai",
        "qwen3_coder",
        "glm",
        "kimi",
        "kimi_decoded",
    }
    for name in queries:
        env, *_ = make()
        prefix = "Let me count the campaigns first.\n"
        actions = [prefix + queries[name], submits[name]]
        outputs, observations = run(env, actions)
        assert "(1 row)" in observations[0], (name, observations)
        assert outputs[-1]["done"] and outputs[-1]["reward"] == pytest.approx(MAX_REWARD), name
        scored = compute_score("causaltrace", chatml(actions, observations), truth)
        assert scored["score"] == outputs[-1]["reward"] and scored["tool_calls"] == 1.0, name
        env.close()


@pytest.mark.sandbox
def test_two_environments_on_one_episode_share_no_state():
    first, *_ = make()
    second, *_ = make()
    try:
        first.step(hermes("python", code="secret = 41"))
        out = second.step(hermes("python", code="print('secret' in globals())"))
        assert out["observations"][0]["content"].strip() == "False"
        out = second.step(hermes("python", code="print(secret)"))
        assert "NameError" in out["observations"][0]["content"]
        out = first.step(hermes("python", code="print(secret + 1)"))
        assert out["observations"][0]["content"].strip() == "42"
        assert out["metadata"]["tool_calls"] == 2
        assert second.step(hermes("sql", query=SQL))["metadata"]["tool_calls"] == 3
    finally:
        first.close()
        second.close()


@pytest.mark.sandbox
def test_past_max_tool_calls_the_episode_ends_with_zero(source):
    """The session's budget ends the episode at the call past it, with no attribution reward,
    as ``compute_score`` scores the same transcript by the same rules."""
    label, space = source.label(EPISODE), source.answer_space
    right = hermes("submit", root_cause=label.cause, slice=label.slice or "")
    env, *_ = make(max_tool_calls=1)
    actions = [hermes("sql", query=SQL), hermes("sql", query=SQL), right]
    outputs, observations = run(env, actions)
    assert len(outputs) == 2  # the second query ended the episode: the submit never ran
    out = outputs[-1]
    assert out["done"] and out["reward"] == 0.0 and out["observations"] == []
    assert out["metadata"]["reason"] == "tool-call budget exhausted"
    assert "budget" in out["metadata"]["observation"]
    assert env.get_metrics()["truncated"] == 1.0
    env.close()
    rules = EpisodeRules(max_tool_calls=1)
    truth = ground_truth_json(label, space, rules=rules)
    assert (
        compute_score("causaltrace", chatml(actions, [*observations, "1"]), truth)["score"] == 0.0
    )

    # SkyRL's max_turns (its generator adds generator.max_turns to every sample's extras)
    env, *_ = make(max_turns=2)
    outputs, _ = run(env, [hermes("sql", query=SQL)] * 3)
    assert len(outputs) == 2 and outputs[-1]["done"] and outputs[-1]["reward"] == 0.0
    assert outputs[-1]["metadata"]["reason"] == "turn budget exhausted"
    env.close()


@pytest.mark.sandbox
def test_a_message_without_a_tool_call_gets_a_named_format_error(source):
    label = source.label(EPISODE)
    env, *_ = make()
    out = env.step("The budget looks capped; I am fairly sure.")
    assert (out["reward"], out["done"]) == (0.0, False)
    assert out["metadata"]["format_error"] == skyrl_env.NO_TOOL_CALL == "no_tool_call"
    assert (
        out["observations"] == [{"role": "user", "content": skyrl_env.no_tool_call_message()}]
        and "no_tool_call" in out["observations"][0]["content"]
    )
    # the episode goes on: a right submit still scores the maximum
    out = env.step(hermes("submit", root_cause=label.cause, slice=label.slice or ""))
    assert out["done"] and out["reward"] == pytest.approx(MAX_REWARD)
    assert env.get_metrics()["format_errors"] == 1.0
    env.close()

    # The last message SkyRL allows (max_turns) is the final answer, scored as the harness
    # scores a turn without tool calls: a JSON answer counts, other text scores 0.
    env, *_ = make(max_turns=1)
    out = env.step(json.dumps({"root_cause": label.cause, "slice": label.slice or ""}))
    assert out["done"] and out["reward"] == pytest.approx(MAX_REWARD)
    env.close()
    env, *_ = make(max_turns=1)
    out = env.step("no idea")
    assert (
        out["done"] and out["reward"] == 0.0 and out["metadata"]["format_error"] == "no_tool_call"
    )
    env.close()

    # no init: an error, not a crash of the trainer's loop later
    bare = skyrl_gym.make(
        "causaltrace", env_config={}, extras={"episode_id": EPISODE, "dataset": str(ADS_TEST)}
    )
    with pytest.raises(RuntimeError, match="init"):
        bare.step(hermes("sql", query=SQL))
