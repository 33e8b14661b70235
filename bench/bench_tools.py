"""Benchmarks of the agent tools (issue 6), each side by side with its baseline, in one run.

* sql: ``EpisodeTools.sql`` against the same query on a bare DuckDB connection holding the same
  tables (goal: p50 overhead at most 1.5x);
* python round trip: ``EpisodeTools.python`` against the same code in a Jupyter kernel driven by
  ``jupyter_client`` with the same tables loaded (goal: at least as fast);
* episode start: claiming a warm sandboxed worker and loading the episode (both tools) against
  starting a Jupyter kernel (goal: 10x faster);
* memory per live episode (its Python worker's PSS, its SQL worker's PSS, plus this process's
  RSS growth per episode: bookkeeping) against the in-memory (pandas) size of its tables (goal:
  at most 3x).

Needs the ``bench`` extras ``jupyter_client`` and ``ipykernel``. Run from the repo root::

    python bench/bench_tools.py                 # full run (a few minutes on 2 cores)
    python bench/bench_tools.py --quick         # smoke run

It prints a Markdown table (p50 / p95 in milliseconds) and, with ``--json PATH``, writes the raw
numbers.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd

from causaltrace.tools import ToolConfig, ToolRuntime

SQL_QUERIES = {
    "group-by": "SELECT region, device, sum(revenue) AS revenue, avg(units) AS units "
    "FROM orders GROUP BY ALL ORDER BY revenue DESC",
    "filter-top": "SELECT day, region, revenue FROM orders WHERE channel = 'search' "
    "ORDER BY revenue DESC LIMIT 20",
    "daily-window": "SELECT day, revenue, avg(revenue) OVER (ORDER BY day ROWS 6 PRECEDING) AS ma7 "
    "FROM (SELECT day, sum(revenue) AS revenue FROM orders GROUP BY day) ORDER BY day LIMIT 50",
    "join": "SELECT c.segment, count(*) AS n, sum(o.revenue) AS revenue FROM orders o "
    "JOIN customers c USING (customer_id) GROUP BY ALL ORDER BY n DESC",
}
PYTHON_SNIPPETS = {
    "expression": "1 + 1",
    "groupby": "orders.groupby(['region', 'device']).revenue.sum().sort_values().tail(5)",
    "stateful": "mask = orders.units > 3\nint(mask.sum())",
}


def make_dataset(root: Path, rows: int, seed: int = 0) -> Path:
    """A synthetic episode: ``orders`` (``rows`` rows) and ``customers`` (rows / 20)."""
    rng = np.random.default_rng(seed)
    visible = root / f"episode-{rows}" / "visible"
    visible.mkdir(parents=True)
    n_customers = max(rows // 20, 10)
    days = pd.date_range("2025-01-01", periods=365, freq="D").strftime("%Y-%m-%d").to_numpy()
    orders = pd.DataFrame(
        {
            "day": rng.choice(days, rows),
            "region": rng.choice(["us", "eu", "apac", "latam"], rows),
            "device": rng.choice(["mobile", "desktop", "tablet"], rows),
            "channel": rng.choice(["search", "social", "email", "direct"], rows),
            "customer_id": rng.integers(0, n_customers, rows),
            "units": rng.integers(1, 9, rows),
            "revenue": rng.gamma(2.0, 40.0, rows).round(2),
            "cost": rng.gamma(2.0, 15.0, rows).round(2),
        }
    )
    customers = pd.DataFrame(
        {
            "customer_id": np.arange(n_customers),
            "segment": rng.choice(["new", "returning", "vip"], n_customers),
            "signup_day": rng.choice(days, n_customers),
        }
    )
    orders.to_parquet(visible / "orders.parquet", index=False)
    customers.to_parquet(visible / "customers.parquet", index=False)
    (visible / "data_dictionary.json").write_text(json.dumps({"orders": {}, "customers": {}}))
    return visible


def table_bytes(visible: Path) -> tuple[int, int]:
    """(in-memory pandas size, Parquet size on disk) of the episode's tables."""
    memory = disk = 0
    for path in visible.glob("*.parquet"):
        memory += int(pd.read_parquet(path).memory_usage(deep=True).sum())
        disk += path.stat().st_size
    return memory, disk


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q))


def summary(values: list[float]) -> dict[str, float]:
    return {"p50": pct(values, 50), "p95": pct(values, 95), "n": len(values)}


# -- jupyter baseline -------------------------------------------------------------------------
class Kernel:
    """A Jupyter kernel (ipykernel, this interpreter) driven through jupyter_client."""

    def __init__(self) -> None:
        from jupyter_client.manager import start_new_kernel

        self.km, self.kc = start_new_kernel(kernel_name="python3")

    def run(self, code: str) -> str:
        out: list[str] = []

        def hook(msg: dict) -> None:
            content = msg["content"]
            if msg["msg_type"] == "stream":
                out.append(content["text"])
            elif msg["msg_type"] in ("execute_result", "display_data"):
                out.append(content["data"].get("text/plain", ""))
            elif msg["msg_type"] == "error":
                out.append("\n".join(content["traceback"]))

        reply = self.kc.execute_interactive(code, timeout=120, output_hook=hook)
        if reply["content"]["status"] != "ok":
            raise RuntimeError(f"kernel error: {''.join(out)[-500:]}")
        return "".join(out)

    def close(self) -> None:
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=True)


def load_code(visible: Path) -> str:
    return (
        "import pandas as pd, numpy as np\n"
        f"orders = pd.read_parquet({str(visible / 'orders.parquet')!r})\n"
        f"customers = pd.read_parquet({str(visible / 'customers.parquet')!r})\n"
    )


# -- benchmarks -------------------------------------------------------------------------------
async def bench_sql(runtime: ToolRuntime, visible: Path, reps: int) -> dict:
    bare = duckdb.connect(config={"threads": 1})
    for name in ("orders", "customers"):
        bare.execute(
            f"CREATE TABLE {name} AS SELECT * FROM read_parquet(?)",
            [str(visible / f"{name}.parquet")],
        )
    bare.execute("CHECKPOINT")  # the same compressed storage as the database file the tool opens
    results = {}
    async with runtime.episode(visible) as tools:
        await tools.memory_usage()  # waits until both tools are loaded
        for label, query in SQL_QUERIES.items():
            tool_t, bare_t = [], []
            for i in range(reps + 5):
                t0 = time.perf_counter()
                bare.execute(query).fetchall()
                t1 = time.perf_counter()
                out = await tools.sql(query)
                t2 = time.perf_counter()
                assert not out.startswith("Error"), out
                if i >= 5:  # warm-up
                    bare_t.append((t1 - t0) * 1e3)
                    tool_t.append((t2 - t1) * 1e3)
            results[label] = {"tool": summary(tool_t), "bare": summary(bare_t)}
    bare.close()
    return results


async def bench_python(runtime: ToolRuntime, visible: Path, reps: int) -> dict:
    kernel = await asyncio.to_thread(Kernel)
    results = {}
    try:
        await asyncio.to_thread(kernel.run, load_code(visible))
        async with runtime.episode(visible) as tools:
            for label, code in PYTHON_SNIPPETS.items():
                tool_t, jup_t = [], []
                for i in range(reps + 5):
                    t0 = time.perf_counter()
                    a = await tools.python(code)
                    t1 = time.perf_counter()
                    b = kernel.run(code)
                    t2 = time.perf_counter()
                    assert a.strip() == b.strip(), (a, b)
                    if i >= 5:
                        tool_t.append((t1 - t0) * 1e3)
                        jup_t.append((t2 - t1) * 1e3)
                results[label] = {"tool": summary(tool_t), "jupyter": summary(jup_t)}
    finally:
        await asyncio.to_thread(kernel.close)
    return results


async def bench_start(runtime: ToolRuntime, visible: Path, reps: int, kernel_reps: int) -> dict:
    assert runtime.pool is not None
    started, warm, cold = [], [], []
    for _ in range(reps):
        await runtime.wait_warm(timeout=300)
        t0 = time.perf_counter()
        tools = runtime.episode(visible)
        await tools.start()  # returns at once; loading goes on in the background
        t1 = time.perf_counter()
        await tools.ready()  # both tools loaded: what an agent's first call may wait for
        t2 = time.perf_counter()
        started.append((t1 - t0) * 1e3)
        warm.append((t2 - t0) * 1e3)
        assert (await tools.python("len(orders) > 0")) == "True"
        await tools.close()
    # Cold: no idle worker, the episode waits for a new sandbox to start.
    cold_runtime = ToolRuntime(ToolConfig(warm_workers=0))
    async with cold_runtime:
        for _ in range(max(3, reps // 4)):
            t0 = time.perf_counter()
            async with cold_runtime.episode(visible) as tools:
                await tools.ready()
                cold.append((time.perf_counter() - t0) * 1e3)
    kernel, kernel_loaded = [], []
    for _ in range(kernel_reps):
        t0 = time.perf_counter()
        k = await asyncio.to_thread(Kernel)
        t1 = time.perf_counter()
        await asyncio.to_thread(k.run, load_code(visible))
        t2 = time.perf_counter()
        await asyncio.to_thread(k.close)
        kernel.append((t1 - t0) * 1e3)
        kernel_loaded.append((t2 - t0) * 1e3)
    return {
        "start-returns": summary(started),
        "warm-episode": summary(warm),
        "cold-episode": summary(cold),
        "jupyter-kernel": summary(kernel),
        "jupyter-kernel+tables": summary(kernel_loaded),
    }


def rss_bytes() -> int:
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


async def bench_memory(config: ToolConfig, visible: Path, episodes: int) -> dict:
    """Memory per live episode: its two workers' PSS plus this process's RSS growth per episode."""
    mem_tables, disk_tables = table_bytes(visible)
    async with ToolRuntime(config) as runtime:
        live = []
        # One throwaway episode first, so that one-off costs (DuckDB's first database) are not
        # charged to the episodes measured.
        async with runtime.episode(visible) as first:
            await first.memory_usage()
        before = rss_bytes()
        for _ in range(episodes):
            tools = runtime.episode(visible)
            await tools.start(wait=True)
            await tools.python("orders.groupby('region').revenue.sum()")
            await tools.sql("SELECT region, sum(revenue) FROM orders GROUP BY region")
            live.append(tools)
        usages = [await t.memory_usage() for t in live]
        await asyncio.sleep(1.0)
        host_per_episode = (rss_bytes() - before) / episodes
        pss = [t._worker.memory_pss() for t in live]
        sql_pss = [u["sql_pss_bytes"] for u in usages]
        for t in live:
            await t.close()
    per_episode = [p + q + host_per_episode for p, q in zip(pss, sql_pss, strict=True)]
    return {
        "episodes": episodes,
        "table_bytes_in_memory": mem_tables,
        "table_bytes_parquet": disk_tables,
        "python_pss_bytes": summary(pss),
        "sql_pss_bytes": summary(sql_pss),
        "duckdb_reported_bytes": summary([u["sql_bytes"] for u in usages]),
        "host_rss_per_episode_bytes": host_per_episode,
        "per_episode_bytes": summary(per_episode),
        "ratio_to_tables": statistics.median(per_episode) / mem_tables,
    }


def ms(d: dict) -> str:
    return f"{d['p50']:.2f} / {d['p95']:.2f}"


def report(res: dict, command: str) -> str:
    lines = [
        f"Command: `{command}`",
        "",
        f"Machine: {res['machine']}; sandbox: {res['sandbox']}; dataset: {res['rows']:,} orders rows "
        f"({res['table_mb']:.1f} MB in pandas, {res['parquet_mb']:.1f} MB Parquet).",
        "",
        "| benchmark | causaltrace p50 / p95 (ms) | baseline p50 / p95 (ms) | p50 ratio | goal |",
        "|---|---|---|---|---|",
    ]
    for label, r in res["sql"].items():
        ratio = r["tool"]["p50"] / r["bare"]["p50"]
        lines.append(
            f"| sql `{label}` vs bare DuckDB | {ms(r['tool'])} | {ms(r['bare'])} | {ratio:.2f}x | <= 1.5x |"
        )
    for label, r in res["python"].items():
        ratio = r["tool"]["p50"] / r["jupyter"]["p50"]
        lines.append(
            f"| python `{label}` vs Jupyter kernel | {ms(r['tool'])} | {ms(r['jupyter'])} | "
            f"{ratio:.2f}x | <= 1x |"
        )
    s = res["start"]
    names = {
        "jupyter-kernel": "Jupyter kernel ready",
        "jupyter-kernel+tables": "Jupyter kernel ready + tables read",
    }
    for theirs in ("jupyter-kernel", "jupyter-kernel+tables"):
        ratio = s[theirs]["p50"] / s["warm-episode"]["p50"]
        lines.append(
            f"| episode start until both tools are loaded (warm worker) vs {names[theirs]} | "
            f"{ms(s['warm-episode'])} | {ms(s[theirs])} | {ratio:.1f}x faster | >= 10x faster |"
        )
    ratio = s["jupyter-kernel"]["p50"] / s["start-returns"]["p50"]
    lines.append(
        f"| `await tools.start()` returns (loading goes on in the background) vs Jupyter "
        f"kernel ready | {ms(s['start-returns'])} | {ms(s['jupyter-kernel'])} | "
        f"{ratio:.0f}x faster | >= 10x faster |"
    )
    lines.append(
        f"| episode start until loaded, cold (no idle worker: a sandbox starts) | "
        f"{ms(s['cold-episode'])} | | | |"
    )
    for m in res["memory"]:
        per = m["per_episode_bytes"]
        lines.append(
            f"| memory per live episode, {m['rows']:,} rows ({m['episodes']} live; MB) | "
            f"{per['p50'] / 2**20:.1f} / {per['p95'] / 2**20:.1f} (Python worker PSS "
            f"{m['python_pss_bytes']['p50'] / 2**20:.1f} + SQL worker PSS "
            f"{m['sql_pss_bytes']['p50'] / 2**20:.1f} + host RSS "
            f"{m['host_rss_per_episode_bytes'] / 2**20:.1f}) "
            f"| tables {m['table_bytes_in_memory'] / 2**20:.1f} MB | {m['ratio_to_tables']:.2f}x | <= 3x |"
        )
    return "\n".join(lines)


async def main(args: argparse.Namespace) -> dict:
    root = Path(tempfile.mkdtemp(prefix="causaltrace-bench-"))
    try:
        return await run_all(args, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


async def run_all(args: argparse.Namespace, root: Path) -> dict:
    visible = make_dataset(root, args.rows)
    config = ToolConfig(warm_workers=args.warm, python_timeout=120, sql_timeout=120)
    mem_tables, disk_tables = table_bytes(visible)
    res: dict = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "rows": args.rows,
        "table_mb": mem_tables / 2**20,
        "parquet_mb": disk_tables / 2**20,
    }
    async with ToolRuntime(config) as runtime:
        res["sandbox"] = runtime.sandbox
        assert runtime.pool is not None
        await runtime.wait_warm(timeout=300)
        print("sql ...", file=sys.stderr)
        res["sql"] = await bench_sql(runtime, visible, args.reps)
        print("python ...", file=sys.stderr)
        res["python"] = await bench_python(runtime, visible, args.reps)
        print("episode start ...", file=sys.stderr)
        res["start"] = await bench_start(runtime, visible, args.start_reps, args.kernel_reps)
    res["memory"] = []
    for rows in args.memory_rows:
        print(f"memory ({rows} rows) ...", file=sys.stderr)
        data = visible if rows == args.rows else make_dataset(root, rows, seed=1)
        m = await bench_memory(ToolConfig(warm_workers=0), data, args.episodes)
        m["rows"] = rows
        res["memory"].append(m)
    return res


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--reps", type=int, default=200)
    parser.add_argument("--start-reps", type=int, default=40)
    parser.add_argument("--kernel-reps", type=int, default=10)
    parser.add_argument("--episodes", type=int, default=16)
    parser.add_argument("--memory-rows", type=int, nargs="+", default=[200_000, 1_000_000])
    parser.add_argument("--warm", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="few repetitions, small data")
    parser.add_argument("--json", type=Path, help="write the raw results here")
    args = parser.parse_args()
    if args.quick:
        args.rows, args.reps, args.start_reps, args.kernel_reps = 20_000, 20, 5, 2
        args.episodes, args.memory_rows = 4, [20_000]
    results = asyncio.run(main(args))
    command = "python " + " ".join([sys.argv[0], *sys.argv[1:]])
    print(report(results, command))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
