"""Rollouts at RL scale on one machine (issue 16), measured side by side in one run:

* memory per additional live rollout, for rollouts of distinct episodes and for more rollouts
  of an episode already open (a GRPO group), each as a ratio to the in-memory (pandas) size of
  the episode's tables (goals: <= 3x and <= 0.5x), with workers forked from the fork server
  and with one cold sandbox per worker. The measure is the growth of the summed PSS of every
  process the tool runtime runs (fork servers, warm and live workers: shared pages are counted
  once across them) from k/2 to k live rollouts, divided by k/2;
* a GRPO-shaped load: E episodes x S samples opened at once on one SessionHost, each making a
  sql and a python call, with the host's back-pressure (``min_available_mb``) on: how many
  sessions were served, how many refused with HostFull (never an OOM), and the p50/p95/p99
  tool latency against the one-rollout figure of the same run.

    python bench/bench_rollouts.py --dataset data/ads_test --episodes 16 --samples 16

``--quick`` (CI, about a minute) measures memory at 6 rollouts and loads 4 x 4 sessions. Run it as
a normal user too (``sh scripts/nonroot-check.sh`` does, as root): the fork server then runs in
an unprivileged user namespace. Prints who ran it and whether workers were forked, then a
Markdown table; ``--json PATH`` writes the raw numbers; ``--memory-only`` skips the load.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import time
from pathlib import Path

import pandas as pd

from causaltrace.datasets.reading import DatasetSource
from causaltrace.serve import HostConfig, HostFull, SessionHost
from causaltrace.serve.host import available_mb
from causaltrace.tools import EpisodeData
from causaltrace.tools.pool import process_tree

SQL = {"name": "sql", "arguments": {"query": "SELECT count(*) AS n FROM perf_daily"}}
PY = {"name": "python", "arguments": {"code": "print(len(perf_daily))"}}


def table_bytes(source: DatasetSource, episode: str) -> int:
    """In-memory size of an episode's tables as the python tool holds them (pandas, deep)."""
    data = EpisodeData.from_dir(source.visible_dir(episode))
    total = 0
    for path in data.files:
        if path.suffix == ".parquet":
            total += int(pd.read_parquet(path).memory_usage(deep=True).sum())
    return total


def tools_pss() -> int:
    """Summed PSS (bytes) of every process below this one: the tool runtime's sandboxes."""
    total = 0
    for pid in process_tree(os.getpid())[1:]:
        with contextlib.suppress(OSError), open(f"/proc/{pid}/smaps_rollup") as handle:
            for line in handle:
                if line.startswith("Pss:"):
                    total += int(line.split()[1]) * 1024
    return total


async def timed(host: SessionHost, sid: str, call: dict, out: list[float]) -> str:
    started = time.perf_counter()
    result = await host.step(sid, call)
    out.append(time.perf_counter() - started)
    return result["observation"]


def quantiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)

    def q(p: float) -> float:
        return ordered[min(len(ordered) - 1, int(p * (len(ordered) - 1) + 0.5))] * 1000

    return {"p50": q(0.5), "p95": q(0.95), "p99": q(0.99), "n": len(ordered)}


async def memory_phase(source: DatasetSource, episodes: list[str], k: int) -> dict:
    """Marginal memory of a live rollout, from k/2 to k rollouts: k distinct episodes, then k
    rollouts of one episode; with the fork server and with one sandbox per worker."""
    out: dict[str, dict] = {}
    half = k // 2
    for mode in ("on", "off"):
        tool_config = {"fork_server": mode, "warm_workers": 1}
        for label, chosen in (("distinct", episodes[:k]), ("same", [episodes[0]] * k)):
            async with SessionHost(tool_config, HostConfig(max_sessions=k + 1)) as host:
                forked = host.runtime.forking
                totals = []
                for stage in (chosen[:half], chosen[half:]):
                    for episode in stage:
                        sid = (await host.open(str(source.root), episode))["session_id"]
                        await host.step(sid, SQL)  # both tools hold the tables now
                        await host.step(sid, PY)
                    await asyncio.sleep(1.0)  # let the pools' refills finish
                    totals.append(tools_pss())
            per_rollout = (totals[1] - totals[0]) / (k - half)
            tables = statistics.mean(table_bytes(source, e) for e in chosen[half:])
            out[f"{label}, fork server {mode}"] = {
                "pss_mb_per_rollout": per_rollout / 2**20,
                "tables_mb": tables / 2**20,
                "ratio_to_tables": per_rollout / tables,
                "total_mb_at_k": totals[1] / 2**20,
                "forked": forked,
            }
    return out


async def load_phase(
    source: DatasetSource,
    episodes: list[str],
    samples: int,
    floor_mb: int,
    session_mb: float | None,
):
    """E x S sessions opened at once; each makes a python, a sql and a python call (the first
    ones start its workers and load its tables), then, once every session has, four more calls
    (steady state: every session live at once)."""
    single: list[float] = []
    async with SessionHost(config=HostConfig(max_sessions=1)) as host:
        sid = (await host.open(str(source.root), episodes[0]))["session_id"]
        first: list[float] = []  # its workers start and load the tables
        await timed(host, sid, SQL, first)
        await timed(host, sid, PY, first)
        for _ in range(9):  # within the episode's tool-call budget
            await timed(host, sid, SQL, single)
            await timed(host, sid, PY, single)
    latencies: list[float] = []
    steady: list[float] = []
    served = refused = wrong = finished = 0
    all_open = asyncio.Event()
    lowest = available_mb()
    config = HostConfig(
        max_sessions=len(episodes) * samples, min_available_mb=floor_mb, session_mb=session_mb
    )
    started = time.perf_counter()
    async with SessionHost(config=config) as host:
        capacity, host_session_mb = host.capacity, host.session_mb

        requested = len(episodes) * samples

        def arrived() -> None:
            nonlocal finished
            finished += 1
            if finished == requested:
                all_open.set()

        async def rollout(episode: str, i: int) -> None:
            nonlocal served, refused, wrong, lowest
            try:
                sid = (await host.open(str(source.root), episode))["session_id"]
            except HostFull:
                refused += 1
                arrived()
                return
            mark = f"{episode}-{i}"
            await timed(
                host, sid, {"name": "python", "arguments": {"code": f"m = '{mark}'"}}, latencies
            )
            await timed(host, sid, SQL, latencies)
            seen = await timed(
                host, sid, {"name": "python", "arguments": {"code": "print(m)"}}, latencies
            )
            wrong += seen.strip() != mark
            arrived()
            await all_open.wait()
            for call in (SQL, PY, SQL, PY):
                await timed(host, sid, call, steady)
            seen = await timed(
                host, sid, {"name": "python", "arguments": {"code": "print(m)"}}, steady
            )
            wrong += seen.strip() != mark  # a crossed or lost session
            served += 1
            free = available_mb()
            if free is not None:
                lowest = min(lowest, free)

        await asyncio.gather(*(rollout(e, i) for e in episodes for i in range(samples)))
    return {
        "requested": len(episodes) * samples,
        "served": served,
        "refused_host_full": refused,
        "crossed_or_lost": wrong,
        "lowest_available_mb": lowest,
        "floor_mb": floor_mb,
        "session_mb": host_session_mb,
        "capacity": capacity,
        "seconds": time.perf_counter() - started,
        "one_rollout_first_calls_ms": [1000 * x for x in first],
        "one_rollout_ms": quantiles(single),
        "loaded_ms": quantiles(latencies),
        "steady_ms": quantiles(steady),
    }


async def main_async(args) -> dict:
    source = DatasetSource(args.dataset)
    episodes = source.episode_ids[: args.episodes]
    result = {
        "dataset": str(source.root),
        "episodes": len(episodes),
        "samples": args.samples,
        "uid": os.geteuid(),
    }
    result["memory"] = await memory_phase(
        source, source.episode_ids[: args.memory_k], args.memory_k
    )
    if not args.memory_only:
        result["load"] = await load_phase(
            source, episodes, args.samples, args.floor_mb, args.session_mb
        )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="data/ads_test")
    parser.add_argument("--episodes", type=int, default=16)
    parser.add_argument("--samples", type=int, default=16)
    parser.add_argument("--memory-k", type=int, default=8, help="rollouts in the memory phase")
    parser.add_argument("--floor-mb", type=int, default=4096, help="host min_available_mb")
    parser.add_argument(
        "--session-mb", type=float, default=None, help="host session_mb (default: by mode)"
    )
    parser.add_argument("--json", default=None)
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a short run (CI): --memory-k 6 --episodes 4 --samples 4",
    )
    parser.add_argument(
        "--memory-only", action="store_true", help="the memory phase alone (no GRPO load)"
    )
    args = parser.parse_args()
    if args.quick:
        args.memory_k, args.episodes, args.samples = 6, 4, 4
    result = asyncio.run(main_async(args))
    mem, load = result["memory"], result.get("load")
    who = "root" if result["uid"] == 0 else f"a normal user (uid {result['uid']})"
    print(f"run as {who}; dataset {result['dataset']}\n")
    print("| measure | value |\n| --- | --- |")
    for label, m in mem.items():
        print(
            f"| memory per additional rollout, {label} | {m['pss_mb_per_rollout']:.1f} MB = "
            f"{m['ratio_to_tables']:.2f}x its tables ({m['tables_mb']:.1f} MB); workers "
            f"{'forked' if m['forked'] else 'cold'} |"
        )
    if load is None:
        if args.json:
            Path(args.json).write_text(json.dumps(result, indent=2))
        return
    print(
        f"| GRPO load: requested / served / refused (HostFull) | {load['requested']} / {load['served']} / {load['refused_host_full']} |"
    )
    print(f"| crossed or lost sessions | {load['crossed_or_lost']} |")
    print(
        f"| lowest MemAvailable during the load (floor) | {load['lowest_available_mb']:.0f} MB ({load['floor_mb']} MB) |"
    )
    one, loaded = load["one_rollout_ms"], load["loaded_ms"]
    print(
        "| first sql / python call of one rollout alone (workers start, tables load) | "
        + " / ".join(f"{x:.0f}" for x in load["one_rollout_first_calls_ms"])
        + " ms |"
    )
    print(
        f"| tool latency p50/p95/p99, one rollout, later calls | {one['p50']:.1f} / {one['p95']:.1f} / {one['p99']:.1f} ms |"
    )
    print(
        f"| tool latency p50/p95/p99, first calls under load (workers start) | {loaded['p50']:.1f} / {loaded['p95']:.1f} / {loaded['p99']:.1f} ms (p99 {loaded['p99'] / one['p99']:.1f}x) |"
    )
    steady = load["steady_ms"]
    print(
        f"| tool latency p50/p95/p99, every session live (steady state) | {steady['p50']:.1f} / {steady['p95']:.1f} / {steady['p99']:.1f} ms (p99 {steady['p99'] / one['p99']:.1f}x) |"
    )
    print(f"| wall time of the load | {load['seconds']:.1f} s |")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
