"""No adapter's reset, state or training row holds the ground truth (OpenEnv PR 611 asks this
of environments): what each adapter installed here hands a trainer or a model when an episode
starts (Gymnasium's reset observation and info, SkyRL's init prompt and metadata and its
rows, TRL's rows and reset, the session host's ``open`` reply as ``causaltrace serve`` sends
it, the MCP server's tool list, and the Harbor task's agent-side files) is serialized and
searched for what would give the answer away: a key naming the label (``cause``, ``slice``,
``onset``, ``effect``...: ``LEAKY_METADATA_KEYS``) and the label's own values (its slice as
written, its onset time, its effect numbers). The prompt's list of possible causes is not a
leak, so the cause's bare name is searched only as a JSON value. Three ``ads_test`` episodes with
slices, so a leak of the slice cannot hide behind a NO_ANOMALY label. OpenEnv, ORS and
verifiers run in venvs of their own and check the same in their tests
(tests/serve/test_openenv.py::test_labels_never_reach_observations_or_state,
tests/serve/test_ors.py, tests/training/test_verifiers_env.py)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from causaltrace.datasets.reading import DatasetSource
from causaltrace.training.records import LEAKY_METADATA_KEYS

pytestmark = pytest.mark.sandbox

ROOT = Path(__file__).resolve().parents[2]
DATASET = ROOT / "data" / "ads_test"


@pytest.fixture(scope="module")
def episodes() -> list[str]:
    source = DatasetSource(DATASET)
    sliced = [e for e in source.episode_ids if source.label(e).slice]
    return sliced[:3]


def _markers(source: DatasetSource, episode: str) -> list[str]:
    """Strings whose presence would give the label away (outside the prompt)."""
    label = source.label(episode).to_dict()
    found = [f'"{label["cause"]}"']  # the cause as a JSON value, not as a word of the prompt
    if label.get("slice"):
        found.append(str(label["slice"]))
    if label.get("onset_time"):
        found.append(str(label["onset_time"]))
    for effect in (label.get("effect_in_slice") or {}).values():
        found += [repr(float(v)) for v in effect.values() if float(v) not in (0.0, 1.0)]
    return found


def _keys(value: Any) -> set[str]:
    """The keys of every mapping in ``value``."""
    if isinstance(value, dict):
        return {str(k) for k in value} | {k for v in value.values() for k in _keys(v)}
    if isinstance(value, list | tuple):
        return {k for v in value for k in _keys(v)}
    return set()


def _without_tools(value: Any, schemas: list) -> Any:
    """``value`` with every ``tools`` entry taken out, after checking it is the contract's
    schemas: the same for every episode of the dataset (they list every cause), so they carry
    nothing of one episode's label."""
    if isinstance(value, dict):
        if "tools" in value:
            assert json.loads(json.dumps(value["tools"], default=str)) == schemas
        return {k: _without_tools(v, schemas) for k, v in value.items() if k != "tools"}
    if isinstance(value, list | tuple):
        return [_without_tools(v, schemas) for v in value]
    return value


def assert_no_ground_truth(where: str, seen: Any, source: DatasetSource, episode: str) -> None:
    from causaltrace.env.contract import ToolContract

    schemas = json.loads(json.dumps(ToolContract.for_dataset(source).openai()))
    seen = _without_tools(seen, schemas)
    text = json.dumps(seen, default=str, sort_keys=True)
    text = text.replace(json.dumps(source.prompt(episode))[1:-1], "<prompt>")  # the page itself
    leaky = sorted(_keys(seen) & LEAKY_METADATA_KEYS)
    assert not leaky, f"{where}: keys {leaky} carry the label"
    for marker in _markers(source, episode):
        assert marker not in text, f"{where}: {marker!r} of the label is in {text[:400]}"


def test_the_marker_search_finds_a_planted_label(episodes):
    """The check can fail: the label itself, and its slice in a state dict, are found."""
    source = DatasetSource(DATASET)
    episode = episodes[0]
    with pytest.raises(AssertionError, match="carry the label"):
        assert_no_ground_truth("planted", source.label(episode).to_dict(), source, episode)
    with pytest.raises(AssertionError, match="of the label is in"):
        state = {"note": f"acts on {source.label(episode).slice}"}
        assert_no_ground_truth("planted", state, source, episode)


def test_gymnasium_reset_holds_no_ground_truth(episodes):
    from causaltrace.env.gymnasium_env import CausalTraceGymEnv

    source = DatasetSource(DATASET)
    env = CausalTraceGymEnv(dataset_dir=DATASET)
    try:
        for episode in episodes:
            observation, info = env.reset(options={"episode": episode})
            assert observation == source.prompt(episode)
            assert_no_ground_truth("gymnasium reset", [observation, info], source, episode)
    finally:
        env.close()


def test_the_session_hosts_open_reply_holds_no_ground_truth(episodes):
    """What ``causaltrace serve``'s POST /sessions returns (the host's open reply)."""
    from causaltrace.serve import SessionHost

    source = DatasetSource(DATASET)

    async def opened() -> list[dict]:
        host = SessionHost()
        host.sources[str(DATASET)] = source
        try:
            replies = []
            for episode in episodes:
                reply = await host.open(str(DATASET), episode)
                replies.append(reply)
                await host.close_session(reply["session_id"])
            return replies
        finally:
            await host.close()

    for episode, reply in zip(episodes, asyncio.run(opened()), strict=True):
        assert set(reply) == {"session_id", "prompt", "tools"}
        assert_no_ground_truth("host open", reply, source, episode)


def test_skyrl_init_and_rows_hold_no_ground_truth(episodes):
    pytest.importorskip("skyrl_gym")
    from omegaconf import OmegaConf
    from skyrl_gym import make

    from causaltrace.training.host_loop import HostLoop
    from causaltrace.training.skyrl_env import register_envs, skyrl_rows

    register_envs()
    source = DatasetSource(DATASET)
    try:
        for row in skyrl_rows(DATASET, episodes=episodes):
            episode = row["episode_id"]
            assert_no_ground_truth("skyrl row", row, source, episode)
            extras = {k: v for k, v in row.items() if k not in ("prompt", "env_class")}
            env = make(row["env_class"], env_config=OmegaConf.create({}), extras=extras)
            prompt, metadata = env.init(row["prompt"])
            assert_no_ground_truth("skyrl init", [prompt, metadata], source, episode)
            env.close()
    finally:
        HostLoop.get().close_hosts()


def test_trl_rows_and_reset_hold_no_ground_truth(episodes):
    from causaltrace.training.host_loop import HostLoop
    from causaltrace.training.trl_env import make_trl_environment, trl_rows

    source = DatasetSource(DATASET)
    env_cls = make_trl_environment(DATASET)
    rows = {row["episode_id"]: row for row in trl_rows(env_cls)}
    try:
        for episode in episodes:
            assert_no_ground_truth("trl row", rows[episode], source, episode)
            env = env_cls()
            assert env.reset(**rows[episode]) is None  # the prompt is the row's
            state = {k: v for k, v in vars(env).items() if k in ("_session", "_result")}
            assert_no_ground_truth("trl reset", state, source, episode)
            env._close()
    finally:
        HostLoop.get().close_hosts()
