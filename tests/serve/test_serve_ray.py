"""RayHost on a local Ray instance: episode affinity, a full episode, back-pressure across
actors, recovery of a killed actor's sessions by replay, and the named errors (SessionLost,
CallTimeout) that replace hangs. One pool of three actors serves the whole module."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from _training_support import small_dataset

from causaltrace.datasets.reading import open_episode
from causaltrace.env import DatasetSource
from causaltrace.serve.host import HostFull, UnknownSession

ray = pytest.importorskip("ray")

from causaltrace.serve.ray_host import CallTimeout, RayHost, SessionLost  # noqa: E402

NUM_ACTORS = 3
PER_ACTOR = 2  # max_sessions of each actor's SessionHost


pytestmark = [pytest.mark.ray, pytest.mark.sandbox]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    return small_dataset(tmp_path_factory.mktemp("serve_ray") / "ds")


@pytest.fixture(scope="module")
def runner() -> Iterator[asyncio.Runner]:
    """One event loop for the module, so the pool (and its asyncio locks) outlives a test."""
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    with asyncio.Runner() as run:
        yield run
    ray.shutdown()


@pytest.fixture(scope="module")
def host(runner, dataset) -> Iterator[RayHost]:
    pool = RayHost(
        NUM_ACTORS,
        actor_options={"num_cpus": 0},  # 3 actors on a 2-CPU instance
        host_config={"max_sessions": PER_ACTOR, "min_available_mb": 256},
        tool_config={"warm_workers": 1},
        call_timeout=60.0,
    )
    runner.run(pool.start())
    yield pool
    runner.run(pool.close())


@pytest.fixture
def run(runner, host):
    """Run a coroutine on the module loop; every test starts and ends with no open session
    and a full pool of ready actors."""
    runner.run(_wait_ready(host))
    assert host.health()["sessions"] == 0
    yield runner.run
    runner.run(_close_all(host))


async def _wait_ready(host: RayHost, timeout: float = 120.0) -> float:
    started = time.perf_counter()
    while host.health()["ready_actors"] < host.num_actors:
        assert time.perf_counter() - started < timeout, host.health()
        await asyncio.sleep(0.1)
    return time.perf_counter() - started


async def _close_all(host: RayHost) -> None:
    for sid in list(host.sessions):
        with contextlib.suppress(SessionLost, UnknownSession):
            await host.close_session(sid)


def answer(dataset: Path, episode: str) -> dict:
    label = DatasetSource(dataset).label(episode)
    return {"root_cause": label.cause, "slice": label.slice or ""}


def python(code: str) -> dict:
    return {"name": "python", "arguments": {"code": code}}


def pid_of(host: RayHost, slot: int) -> int:
    return host.health()["actors"][slot]["pid"]


def spread_path(host: RayHost, dataset: Path, episodes: list[str]) -> Path:
    """A path of the dataset under which its episodes hash to at least two actors.

    The ring hashes the dataset's path with the episode, and the module's temporary path
    changes from run to run: under about 1 path in 243 (3 x 3^-6) all six episodes land on one
    actor. A symlink under another name is the same dataset, hashed anew."""
    path = dataset
    for k in range(1, 50):
        if len({host.owner(str(path), e) for e in episodes}) >= 2:
            return path
        path = dataset.with_name(f"{dataset.name}-{k}")
        if not path.exists():
            path.symlink_to(dataset, target_is_directory=True)
    raise AssertionError("no name spreads the episodes: the ring is broken")


def test_sessions_of_one_episode_share_an_actor_and_episodes_spread(run, host, dataset):
    episodes = DatasetSource(dataset).episode_ids
    # Over many keys the ring uses every actor (64 points each: the chance one is missed is
    # about 3 x (2/3)^60, 3e-11).
    assert {host.owner(str(dataset), f"episode-{i}") for i in range(60)} == set(range(NUM_ACTORS))
    dataset = spread_path(host, dataset, episodes)
    owners = {e: host.owner(str(dataset), e) for e in episodes}
    first = episodes[0]
    other = next(e for e in episodes if owners[e] != owners[first])

    async def main():
        a = await host.open(str(dataset), first)
        b = await host.open(str(dataset), first)
        c = await host.open(str(dataset), other)
        assert a["prompt"] == b["prompt"] != c["prompt"]
        assert {t["function"]["name"] for t in a["tools"]} == {"sql", "python", "submit"}
        slots = [host.where(s["session_id"]) for s in (a, b, c)]
        assert slots[0] == slots[1] == owners[first] and slots[2] == owners[other]
        # different actor processes, not just different slot numbers
        assert pid_of(host, slots[0]) != pid_of(host, slots[2])
        actors = {p["slot"]: p for p in await host.probe()}
        assert actors[slots[0]]["sessions"] == 2 and actors[slots[2]]["sessions"] == 1

    run(main())


def test_a_full_episode_through_the_pool(run, host, dataset):
    episode = DatasetSource(dataset).episode_ids[2]

    async def main():
        sid = (await host.open(str(dataset), episode))["session_id"]
        sql = await host.step(
            sid, {"name": "sql", "arguments": {"query": "SELECT count(*) AS n FROM campaigns"}}
        )
        assert sql["reward"] == 0.0 and not sql["terminated"] and "n" in sql["observation"]
        await host.step(sid, python("n = len(creatives)"))
        out = await host.turn(sid, [python("print(n * 10)")], content="checking")
        # the python worker keeps its variables between calls: n ads, read again from the file
        creatives = pd.read_parquet(open_episode(dataset, episode) / "creatives.parquet")
        assert out[0]["observation"].strip() == str(len(creatives) * 10)
        assert out[0]["info"]["tool_calls"] == 3
        done = await host.step(sid, {"name": "submit", "arguments": answer(dataset, episode)})
        assert done["terminated"] and done["reward"] == pytest.approx(1.0)
        assert done["info"]["reason"] == "submitted" and done["info"]["parse_error"] is None
        assert done["info"]["reward"]["full_attribution"] == pytest.approx(1.0)
        transcript = await host.close_session(sid)
        assert transcript["result"]["reward"]["score"] == pytest.approx(1.0)
        assert [m["role"] for m in transcript["messages"]].count("tool") == 4
        with pytest.raises(UnknownSession):
            await host.step(sid, python("1"))

    run(main())


def test_host_full_falls_back_then_propagates(run, host, dataset):
    episodes = DatasetSource(dataset).episode_ids
    first = episodes[0]
    owner = host.owner(str(dataset), first)

    async def main():
        same = [await host.open(str(dataset), first) for _ in range(PER_ACTOR + 1)]
        slots = [host.where(s["session_id"]) for s in same]
        assert slots[:PER_ACTOR] == [owner] * PER_ACTOR
        assert slots[PER_ACTOR] != owner  # the owner refused; the least-loaded actor took it
        while len(host.sessions) < NUM_ACTORS * PER_ACTOR:
            await host.open(str(dataset), episodes[len(host.sessions) % len(episodes)])
        assert set(host.load().values()) == {PER_ACTOR}
        refused = host.refused
        with pytest.raises(HostFull, match="every actor refused"):
            await host.open(str(dataset), episodes[1])
        assert host.refused == refused + 1
        await host.close_session(same[0]["session_id"])  # a free slot: opens work again
        reopened = await host.open(str(dataset), first)
        assert host.where(reopened["session_id"]) == owner

    run(main())


def test_killed_actor_sessions_continue_elsewhere_with_state_replayed(run, host, dataset):
    episode = DatasetSource(dataset).episode_ids[0]
    owner = host.owner(str(dataset), episode)

    async def main():
        a = (await host.open(str(dataset), episode))["session_id"]
        b = (await host.open(str(dataset), episode))["session_id"]
        await host.step(a, python("x = 41"))
        await host.turn(b, [python("y = 6"), python("y = y * 7")])
        killed_pid = pid_of(host, owner)
        before = host.health()
        ray.kill(host.slots[owner].actor)

        started = time.perf_counter()
        out = await host.step(a, python("print(x + 1)"))
        first_recovery = time.perf_counter() - started
        assert out["observation"].strip() == "42"  # the namespace was rebuilt by replay
        assert out["info"] == {"tool_calls": 2, "turns": 2}  # and so were the budgets
        # on a live actor: another slot's, or the owner slot's replacement when it was ready
        # first (the full suite on a loaded 2-core machine saw the latter once, 2026-12-07)
        assert pid_of(host, host.where(a)) != killed_pid

        # the other session of the dead actor is rebuilt on its next call
        out_b = await host.step(b, python("print(y)"))
        assert out_b["observation"].strip() == "42" and out_b["info"]["tool_calls"] == 3

        after = host.health()
        assert after["replaced"] == before["replaced"] + 1
        assert after["recovered"] == before["recovered"] + 2 and after["lost"] == before["lost"]
        refill = await _wait_ready(host)
        assert host.health()["ready_actors"] == NUM_ACTORS  # the pool is back to its size
        assert pid_of(host, owner) != killed_pid

        transcript = await host.close_session(a)  # the replayed transcript, not a stub
        roles = [m["role"] for m in transcript["messages"]]
        assert roles == ["user", "assistant", "tool", "assistant", "tool"]
        print(
            f"\nrecovery: first call after the kill {first_recovery:.2f} s; "
            f"replays {after['recovery_seconds'][-2:]} s; replacement ready "
            f"{refill:.2f} s later"
        )

    run(main())


def test_unrecoverable_sessions_raise_session_lost(run, host, dataset):
    episode = DatasetSource(dataset).episode_ids[1]
    owner = host.owner(str(dataset), episode)

    async def main():
        mid_submit = (await host.open(str(dataset), episode))["session_id"]
        bad_replay = (await host.open(str(dataset), episode))["session_id"]
        await host.step(mid_submit, python("x = 1"))
        await host.step(bad_replay, python("x = 1"))
        host.sessions[bad_replay].episode = "no-such-episode"  # its replay cannot open
        lost = host.health()["lost"]
        ray.kill(host.slots[owner].actor)

        started = time.perf_counter()
        with pytest.raises(SessionLost, match="during a submit"):
            await host.step(mid_submit, {"name": "submit", "arguments": answer(dataset, episode)})
        with pytest.raises(SessionLost, match="replay failed"):
            await host.step(bad_replay, python("print(x)"))
        assert time.perf_counter() - started < 30  # named errors, not hangs
        assert host.health()["lost"] == lost + 2
        for sid in (mid_submit, bad_replay):  # dropped: the trainer counts and moves on
            with pytest.raises(UnknownSession):
                await host.step(sid, python("1"))

    run(main())


def test_a_call_past_its_deadline_raises_call_timeout(run, host, dataset):
    episode = DatasetSource(dataset).episode_ids[3]

    async def main():
        sid = (await host.open(str(dataset), episode))["session_id"]
        saved, host.call_timeout = host.call_timeout, 1.0
        try:
            started = time.perf_counter()
            with pytest.raises(CallTimeout) as err:
                await host.step(sid, python("import time; time.sleep(4)"))
            assert time.perf_counter() - started < 3
            assert isinstance(err.value, SessionLost)
        finally:
            host.call_timeout = saved
        assert sid not in host.sessions
        await asyncio.sleep(4)  # the actor ends the session once the sleep returns
        assert all(p.get("sessions", 0) == 0 for p in await host.probe())

    run(main())
