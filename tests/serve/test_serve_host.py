"""SessionHost: sessions of many episodes in one process, with back-pressure that refuses with a
named error before the machine runs out of memory, and idle expiry."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from _training_support import small_dataset

from causaltrace.errors import CausalTraceError
from causaltrace.serve import HostConfig, HostFull, SessionHost, UnknownSession
from causaltrace.serve.host import available_mb

pytestmark = pytest.mark.sandbox


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    return small_dataset(tmp_path_factory.mktemp("host") / "ds")


def run(coro):
    return asyncio.run(coro)


def test_sessions_are_isolated_and_slots_are_freed(dataset):
    async def main():
        async with SessionHost(config=HostConfig(max_sessions=2)) as host:
            a = await host.open(str(dataset), "ads-trainsmoke-000000")
            b = await host.open(str(dataset), "ads-trainsmoke-000000")
            assert a["session_id"] != b["session_id"] and "ALERT" in a["prompt"]
            await host.step(a["session_id"], {"name": "python", "arguments": {"code": "x = 1"}})
            seen = await host.step(b["session_id"], {"name": "python", "arguments": {"code": "x"}})
            assert "NameError" in seen["observation"]
            with pytest.raises(HostFull, match="capacity 2"):
                await host.open(str(dataset), "ads-trainsmoke-000001")
            transcript = await host.close_session(a["session_id"])
            assert (
                transcript["episode_id"] == "ads-trainsmoke-000000"
                and transcript["tool_calls"] == 1
            )
            await host.open(str(dataset), "ads-trainsmoke-000001")  # the slot is free again
            with pytest.raises(UnknownSession):
                await host.step(
                    a["session_id"], {"name": "sql", "arguments": {"query": "SELECT 1"}}
                )
            assert host.health()["refused"] == 1

    run(main())


def test_capacity_follows_the_memory_a_session_needs(dataset):
    free = available_mb()
    assert free is not None  # Linux: /proc/meminfo

    async def main():
        # Room for two sessions of session_mb above the floor, whatever max_sessions says.
        config = HostConfig(max_sessions=100, min_available_mb=int(free) - 2500, session_mb=1000)
        async with SessionHost(config=config) as host:
            assert host.capacity in (1, 2, 3)  # other processes move MemAvailable a little
            for _ in range(host.capacity):
                await host.open(str(dataset), "ads-trainsmoke-000002")
            with pytest.raises(HostFull, match="session_mb=1000"):
                await host.open(str(dataset), "ads-trainsmoke-000002")
        too_big = HostConfig(min_available_mb=int(free) + 10_000)
        async with SessionHost(config=too_big) as host:
            assert host.capacity == 0
            with pytest.raises(HostFull, match="no memory for any session"):
                await host.open(str(dataset), "ads-trainsmoke-000002")

    run(main())


def test_bad_requests_are_named_errors_and_idle_sessions_expire(dataset):
    async def main():
        async with SessionHost(config=HostConfig(max_sessions=2, idle_seconds=0.2)) as host:
            with pytest.raises(CausalTraceError, match="no episode 'nope'"):
                await host.open(str(dataset), "nope")
            assert host.health()["sessions"] == 0  # the failed open gave its slot back
            sid = (await host.open(str(dataset), "ads-trainsmoke-000003"))["session_id"]
            await asyncio.sleep(0.3)
            assert await host.expire_idle() == 1
            with pytest.raises(UnknownSession):
                await host.close_session(sid)
        with pytest.raises(CausalTraceError, match="unknown key"):
            HostConfig.from_mapping({"max_session": 3})

    run(main())


@pytest.mark.parametrize("session_id", ["a/b", "../x", "..", "", "x" * 257, "a b", "é", "-x"])
def test_a_session_id_that_a_path_or_url_reads_differently_is_refused(dataset, session_id):
    """Issue 42, item 5: such ids were accepted and held slots."""

    async def main():
        async with SessionHost(config=HostConfig(max_sessions=1)) as host:
            with pytest.raises(CausalTraceError, match="is not valid"):
                await host.open(str(dataset), "ads-trainsmoke-000000", session_id=session_id)
            # The refused open held no slot: the one slot opens.
            ok = await host.open(str(dataset), "ads-trainsmoke-000000", session_id="run-1.a:b_2")
            assert ok["session_id"] == "run-1.a:b_2"

    run(main())


def test_a_malformed_reward_config_fails_when_the_session_opens(dataset):
    """Issue 42, item 5: ``weights: "x"`` opened a session and failed only at submit."""

    async def main():
        async with SessionHost(config=HostConfig(max_sessions=1)) as host:
            with pytest.raises(CausalTraceError, match="unknown reward 'weights'"):
                await host.open(str(dataset), "ads-trainsmoke-000000", {"reward": {"weights": "x"}})
            assert not host.sessions
            await host.open(str(dataset), "ads-trainsmoke-000000")  # the slot was released

    run(main())


def test_dataset_roots_keep_a_client_to_the_configured_datasets(dataset, tmp_path):
    """Issue 42, item 5: any path holding a manifest.json opened as a dataset; with
    ``dataset_roots`` only datasets under those directories do (symlinks resolved first)."""
    link = tmp_path / "elsewhere"
    link.symlink_to(dataset, target_is_directory=True)

    async def main():
        config = HostConfig(max_sessions=1, dataset_roots=(str(dataset.parent),))
        async with SessionHost(config=config) as host:
            opened = await host.open(str(dataset), "ads-trainsmoke-000000")  # inside: opens
            await host.close_session(opened["session_id"])
            await host.open(str(link), "ads-trainsmoke-000000")  # a link to it resolves inside
        outside = HostConfig(max_sessions=1, dataset_roots=(str(tmp_path / "other"),))
        async with SessionHost(config=outside) as host:
            for path in (dataset, link, dataset / ".." / dataset.name):
                with pytest.raises(CausalTraceError, match="outside the host's dataset roots"):
                    await host.open(str(path), "ads-trainsmoke-000000")
            assert not host.sessions and host.health()["refused"] == 0

    run(main())
