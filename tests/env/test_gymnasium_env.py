"""The Gymnasium registration, against Gymnasium as installed (the gym extra): every committed
split and every domain preset has an id, ``gymnasium.make`` gives a real ``gymnasium.Env`` that
runs an episode of the ads test split with the sandboxed tools and the environment's own reward,
``check_env`` passes, budgets apply, and two environments made side by side share no state."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from _integration_support import require_integration

gymnasium = require_integration("gymnasium", "gym")

from gymnasium.utils.env_checker import check_env  # noqa: E402

import causaltrace.env.gymnasium_env as gym_env  # noqa: E402
from causaltrace.datasets.reading import DatasetSource  # noqa: E402
from causaltrace.env.contract import ToolContract  # noqa: E402
from causaltrace.env.gym import DiagnosisEnv  # noqa: E402
from causaltrace.errors import CausalTraceError  # noqa: E402
from causaltrace.scoring import TRACE_WEIGHTS  # noqa: E402

REPO = Path(gym_env.__file__).resolve().parents[2]
ADS_TEST = REPO / "data" / "ads_test"
ADS_ID = "causaltrace/ads-test-v0"
EPISODE = "test-000012"  # the committed episode the other environment tests use
MAX_REWARD = math.fsum(TRACE_WEIGHTS.values())  # the default reward's maximum (TRACE: 1.0)


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    """Rebuilt episodes of the committed split go here, not into the repository's data/."""
    return tmp_path_factory.mktemp("gym-episodes")


def call(name: str, **arguments) -> str:
    """An action: one tool call as JSON text (the action space's form)."""
    return json.dumps({"name": name, "arguments": arguments})


def correct_submit(episode: str) -> str:
    """The right answer, read from the label through the dataset API (the test's side only)."""
    label = DatasetSource(ADS_TEST).label(episode)
    return call("submit", root_cause=label.cause, slice=label.slice or "")


def test_every_split_and_domain_preset_has_an_id():
    # The ids are registered on import; a dataset generated under ./data since (other tests in
    # this process write some) or a preset added since gets its id from this call.
    gym_env.register_envs()
    registry = gymnasium.envs.registry
    committed = sorted(p.parent.name for p in (REPO / "data").glob("*/manifest.json"))
    assert "ads_test" in committed and "services_test" in committed
    presets = gym_env.domain_presets()
    assert presets["ads_test"] == "ads" and presets["services_test"] == "services"
    for name in set(committed) | set(presets):
        spec = registry[gym_env.env_id(name)]
        assert spec.entry_point == gym_env.ENTRY_POINT and spec.kwargs == {"dataset": name}
        assert spec.namespace == "causaltrace" and spec.version == 0
        assert spec.max_episode_steps is None  # the session's budgets end episodes
    assert gym_env.env_id("ads_test") == ADS_ID
    assert registry[gym_env.GENERIC_ID].kwargs == {}
    assert gym_env.register_envs() == []  # idempotent: a second call registers nothing


def test_make_with_the_module_prefix_registers_in_a_fresh_interpreter(tmp_path):
    """Gymnasium 1.x has no plug-in entry points: ``gymnasium.make("module:id")`` imports the
    module that registers the ids. (A preset not generated under ``data_root`` fails in the
    environment's constructor with the message saying how to generate it, before any sandbox.)"""
    code = (
        "import gymnasium\n"
        "from causaltrace.errors import CausalTraceError\n"
        "try:\n"
        "    gymnasium.make('causaltrace.env.gymnasium_env:causaltrace/ads-validation-v0',\n"
        f"                   data_root={str(tmp_path)!r})\n"
        "except CausalTraceError as exc:\n"
        "    print(exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "causaltrace-generate domain=ads dataset=ads_validation" in out.stdout, out.stderr


def test_an_ungenerated_preset_says_how_to_generate_it(tmp_path):
    with pytest.raises(CausalTraceError, match="causaltrace-generate domain=ads"):
        gym_env.resolve_dataset("ads_validation", data_root=tmp_path)
    with pytest.raises(CausalTraceError, match="dataset_dir"):
        gym_env.resolve_dataset(None)


def test_the_spaces_hold_any_text():
    space = gym_env.AnyText(10)
    assert isinstance(space, gymnasium.spaces.Text)
    assert "é\n{}ü ∆" in space and "" in space and "x" * 11 not in space and b"x" not in space
    assert space.sample() in space


@pytest.mark.sandbox
def test_make_runs_an_episode_scored_by_the_environment(cache):
    env = gymnasium.make(ADS_ID, cache_dir=cache)
    try:
        raw = env.unwrapped
        assert isinstance(raw, gymnasium.Env) and isinstance(raw, DiagnosisEnv)
        assert isinstance(env.observation_space, gymnasium.spaces.Text)
        assert isinstance(env.action_space, gymnasium.spaces.Text)
        prompt, info = env.reset(options={"episode": EPISODE})
        assert prompt == DatasetSource(ADS_TEST).prompt(EPISODE) and "ALERT:" in prompt
        assert prompt in env.observation_space and info["episode_id"] == EPISODE
        assert info["tools"] == ToolContract.for_dataset(ADS_TEST).openai()

        obs, reward, terminated, truncated, info = env.step(
            call("sql", query="SELECT count(*) AS n FROM campaigns")
        )
        assert "4" in obs and "(1 row)" in obs and obs in env.observation_space
        assert (reward, terminated, truncated) == (0.0, False, False)
        env.step(call("python", code="n = len(creatives)"))
        obs, *_ = env.step(call("python", code="print(n * 10)"))
        assert obs.strip() == "120"  # the namespace persists between calls

        obs, reward, terminated, truncated, info = env.step(correct_submit(EPISODE))
        assert terminated and not truncated and reward == pytest.approx(MAX_REWARD)
        assert "reward" not in obs and info["reward"]["full_attribution"] == 1.0
        assert info["tool_calls"] == 3

        # A wrong cause scores less (the format term only).
        env.reset(options={"episode": EPISODE})
        wrong = next(c for c in raw.source.answer_space.causes if c != "BUDGET_CAP")
        _, reward, terminated, _, _ = env.step(call("submit", root_cause=wrong, slice=""))
        assert terminated and reward < MAX_REWARD
        assert reward == pytest.approx(TRACE_WEIGHTS["format"])

        # Text that is not a tool call is a message without one: the final answer.
        env.reset(options={"episode": EPISODE})
        answer = json.dumps({"root_cause": "BUDGET_CAP", "slice": ""})
        _, reward, terminated, _, info = env.step(answer)
        assert terminated and reward == pytest.approx(MAX_REWARD) and info["tool_calls"] == 0
        env.reset(options={"episode": EPISODE})
        _, reward, terminated, _, info = env.step("it is the budget")
        assert terminated and reward == 0.0 and info["parse_error"]

        # Seeds: episode seed % n, as DiagnosisEnv; reset() draws from the seeded np_random.
        ids = raw.source.episode_ids
        assert env.reset(seed=12)[1]["episode_id"] == ids[12]
        first = [env.reset()[1]["episode_id"] for _ in range(3)]
        env.reset(seed=12)
        assert [env.reset()[1]["episode_id"] for _ in range(3)] == first
    finally:
        env.close()


@pytest.mark.sandbox
def test_the_budgets_are_the_sessions(cache):
    with gymnasium.make(ADS_ID, cache_dir=cache, config={"max_tool_calls": 1}) as env:
        env.reset(options={"episode": EPISODE})
        env.step(call("sql", query="SELECT 1"))
        obs, reward, terminated, truncated, info = env.step(call("sql", query="SELECT 1"))
        assert truncated and not terminated and "budget" in obs and reward == 0.0
        assert info["reason"] == "tool-call budget exhausted"


@pytest.mark.sandbox
def test_check_env_passes(cache):
    """Gymnasium's own checker, every check included: spaces, seeded resets and steps (a sampled
    action is printable text that is not a tool call, so the episode ends scored), returned data
    not shared between calls, and close twice."""
    env = gymnasium.make(ADS_ID, cache_dir=cache)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            check_env(env.unwrapped)
        gymnasium_warnings = [str(w.message) for w in caught if "WARN:" in str(w.message)]
        assert gymnasium_warnings == []
    finally:
        env.close()


@pytest.mark.sandbox
def test_two_environments_share_no_state(cache):
    """Per-sample isolation: two environments on the same episode, side by side, each with its
    own sandbox, Python namespace and budget."""
    first = gymnasium.make(ADS_ID, cache_dir=cache)
    second = gymnasium.make(ADS_ID, cache_dir=cache)
    try:
        first.reset(options={"episode": EPISODE})
        second.reset(options={"episode": EPISODE})
        first.step(call("python", code="secret = 41"))
        obs, *_ = second.step(call("python", code="print('secret' in globals())"))
        assert obs.strip() == "False"
        obs, *_ = second.step(call("python", code="print(secret)"))
        assert "NameError" in obs
        obs, _, _, _, info = first.step(call("python", code="print(secret + 1)"))
        assert obs.strip() == "42" and info["tool_calls"] == 2
        _, reward, terminated, _, _ = second.step(correct_submit(EPISODE))
        assert terminated and reward == pytest.approx(MAX_REWARD)
        obs, _, terminated, _, info = first.step(call("python", code="print(secret)"))
        assert obs.strip() == "41" and not terminated and info["tool_calls"] == 3
    finally:
        first.close()
        second.close()
