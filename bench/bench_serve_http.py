"""Load test of sessions over HTTP (issue 16), on loopback only, bounded in count and time.

Starts ``causaltrace serve`` as a separate process on 127.0.0.1, then drives it with
:class:`~causaltrace.serve.client.HttpHost`:

* baseline: one session at a time (``--baseline-rounds`` of them), the same script;
* load: ``--sessions`` sessions at once (default 32), each opening, making 5 tool calls (sql,
  python, sql, python, python), submitting, and closing.

Every session tags its calls with a unique token: the SQL result must echo it, the Python
namespace must start without any token, store it, and read it back, and the closed transcript
must hold its own token and no other session's. Any failure, missing transcript or foreign
token counts as a lost or crossed session. Run from the repo root::

    python bench/bench_serve_http.py                  # 32 sessions, about 1-2 minutes on 2 cores
    python bench/bench_serve_http.py --sessions 8     # smoke run

It prints a Markdown table of p50 / p95 / p99 latency per call type (milliseconds), load
against the one-session baseline, and the p99 ratio; ``--json PATH`` writes the raw numbers.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import json
import os
import platform
import socket
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from uuid import uuid4

import numpy as np

from causaltrace.env import DatasetSource
from causaltrace.serve import HostConfig, SessionHost
from causaltrace.serve.client import HttpHost

KINDS = ("open", "sql (first)", "sql", "python (first)", "python", "submit", "close")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def small_dataset(out: Path) -> Path:
    """Six ads episodes of the small preset (the trainer tests' fixture)."""
    from causaltrace.datasets.generation import Job, run

    job = Job.from_config(
        {
            "out_dir": str(out),
            "domain": {"name": "ads", "preset": "small"},
            "dataset": {
                "name": "servebench",
                "split": "servebench",
                "seed": 5,
                "n_episodes": 6,
                "composition": {"kind": "quotas", "total": 6, "sliced": 4, "two_d": 1},
                "shard_size": 3,
            },
        }
    )
    run(job, show_progress=False)
    return out


async def wait_healthy(url: str, proc: subprocess.Popen, seconds: float) -> dict:
    deadline = time.monotonic() + seconds
    async with HttpHost(url, timeout=5, health_retries=1) as host:
        while True:
            if proc.poll() is not None:
                raise SystemExit(f"the server exited with status {proc.returncode}")
            try:
                return await host.health()
            except Exception:
                if time.monotonic() > deadline:
                    raise SystemExit(f"the server did not answer within {seconds:g} s") from None
                await asyncio.sleep(0.25)


async def one_session(
    host: HttpHost, dataset: str, episode: str, answer: dict, times: dict[str, list[float]]
) -> tuple[list[str], str, str]:
    """One scripted episode: the problems found (empty: intact and not crossed), its token,
    and its transcript's tool outputs (to look for other sessions' tokens)."""
    token = uuid4().hex
    problems: list[str] = []

    async def timed(kind: str, coro):
        started = time.perf_counter()
        result = await coro
        times[kind].append(time.perf_counter() - started)
        return result

    opened = await timed("open", host.open(dataset, episode))
    sid = opened["session_id"]
    calls = [
        ("sql", f"SELECT '{token}' AS tag, count(*) AS n FROM perf_daily", token),
        ("python", "print('token' in globals())", "False"),
        ("sql", "SELECT campaign_id, sum(cost) AS cost FROM perf_daily GROUP BY 1 ORDER BY 2", ""),
        ("python", f"token = '{token}'\nprint(len(perf_daily))", ""),
        ("python", "print(token)", token),
    ]
    try:
        seen: set[str] = set()
        for name, code, expect in calls:
            key = "query" if name == "sql" else "code"
            # A session's first call of each tool claims a worker (from the warm pool, or a
            # new one when the pool is empty): timed apart from the later calls.
            kind = name if name in seen else f"{name} (first)"
            seen.add(name)
            step = await timed(kind, host.step(sid, {"name": name, "arguments": {key: code}}))
            if expect and expect not in step["observation"]:
                problems.append(
                    f"{sid}: {name} {code[:40]!r} answered {step['observation'][:80]!r}"
                )
        done = await timed("submit", host.step(sid, {"name": "submit", "arguments": answer}))
        if not done["terminated"] or done["info"].get("reason") != "submitted":
            problems.append(f"{sid}: submit did not end the episode: {done['info']}")
    finally:
        transcript = await timed("close", host.close_session(sid))
    outputs = " ".join(str(m.get("content")) for m in transcript["messages"] if m["role"] == "tool")
    if transcript["tool_calls"] != len(calls) or token not in outputs:
        problems.append(f"{sid}: transcript lost calls ({transcript['tool_calls']} recorded)")
    return problems, token, outputs


def percentiles(values: list[float]) -> tuple[float, float, float]:
    p50, p95, p99 = np.percentile(np.asarray(values) * 1000, [50, 95, 99])
    return float(p50), float(p95), float(p99)


async def drive(
    host, dataset: str, sessions: int, baseline_rounds: int, settle: float = 0.0
) -> dict:
    """Warm-up, baseline and load against ``host`` (an HttpHost or an in-process SessionHost:
    the same methods)."""
    source = DatasetSource(dataset)
    episodes = source.episode_ids
    answers = {
        e: {"root_cause": source.label(e).cause, "slice": source.label(e).slice or ""}
        for e in episodes
    }
    warm: dict[str, list[float]] = defaultdict(list)
    await one_session(host, dataset, episodes[0], answers[episodes[0]], warm)  # warm-up
    base: dict[str, list[float]] = defaultdict(list)
    for i in range(baseline_rounds):
        e = episodes[i % len(episodes)]
        problems, _, _ = await one_session(host, dataset, e, answers[e], base)
        assert not problems, problems
    await asyncio.sleep(settle)  # let a large warm pool fill before the load
    load: dict[str, list[float]] = defaultdict(list)
    started = time.perf_counter()
    results = await asyncio.gather(
        *(
            one_session(
                host,
                dataset,
                episodes[i % len(episodes)],
                answers[episodes[i % len(episodes)]],
                load,
            )
            for i in range(sessions)
        ),
        return_exceptions=True,
    )
    wall = time.perf_counter() - started
    health = host.health()  # SessionHost.health is synchronous, HttpHost.health is not
    if inspect.isawaitable(health):
        health = await health
    problems: list[str] = []
    tokens = [r[1] for r in results if not isinstance(r, BaseException)]
    for r in results:
        if isinstance(r, BaseException):
            problems.append(f"lost: {type(r).__name__}: {r}")
            continue
        problems += r[0]
        foreign = [t for t in tokens if t != r[1] and t in r[2]]
        if foreign:
            problems.append(f"crossed: a transcript holds {len(foreign)} other session token(s)")
    if health["sessions"] != 0:
        problems.append(f"{health['sessions']} session(s) still open after the run")
    return {
        "sessions": sessions,
        "completed": len(tokens),
        "wall_seconds": wall,
        "sessions_per_second": len(tokens) / wall,
        "calls_per_second": sum(len(v) for v in load.values()) / wall,
        "baseline": {k: percentiles(v) for k, v in base.items()},
        "load": {k: percentiles(v) for k, v in load.items()},
        "samples": {k: len(v) for k, v in load.items()},
        "problems": problems,
        "sandbox": health.get("sandbox"),
    }


async def http_floor(host: HttpHost, clients: int, calls: int = 5) -> tuple[float, float, float]:
    """``GET /health`` from ``clients`` tasks at once: the HTTP stack's own cost (no tools)."""
    times: list[float] = []

    async def one() -> None:
        for _ in range(calls):
            started = time.perf_counter()
            await host.health()
            times.append(time.perf_counter() - started)

    await asyncio.gather(*(one() for _ in range(clients)))
    return percentiles(times)


def table(report: dict) -> str:
    inproc = report.get("in_process")
    head = "| call | n | HTTP, 1 session p50 / p95 / p99 | HTTP, load p50 / p95 / p99 | p99 ratio |"
    rule = "| --- | ---: | ---: | ---: | ---: |"
    if inproc:
        head += " in-process, load p50 / p99 |"
        rule += " ---: |"
    lines = [head, rule]
    for kind in KINDS:
        b, lo = report["baseline"][kind], report["load"][kind]
        row = (
            f"| {kind} | {report['samples'][kind]} | {b[0]:.0f} / {b[1]:.0f} / {b[2]:.0f} "
            f"| {lo[0]:.0f} / {lo[1]:.0f} / {lo[2]:.0f} | {lo[2] / b[2]:.1f}x |"
        )
        if inproc:
            ip = inproc["load"][kind]
            row += f" {ip[0]:.0f} / {ip[2]:.0f} |"
        lines.append(row)
    return "\n".join(lines)


def summary(name: str, report: dict) -> str:
    return (
        f"{name}: {report['completed']}/{report['sessions']} sessions at once in "
        f"{report['wall_seconds']:.1f} s: {report['sessions_per_second']:.2f} sessions/s, "
        f"{report['calls_per_second']:.1f} requests/s; lost or crossed: {len(report['problems'])}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=32, help="concurrent sessions (<= 128)")
    parser.add_argument("--baseline-rounds", type=int, default=5)
    parser.add_argument("--dataset", default=None, help="a generated dataset (default: generate)")
    parser.add_argument(
        "--no-in-process",
        action="store_true",
        help="skip the same load on an in-process SessionHost (the cost of the HTTP layer)",
    )
    parser.add_argument(
        "--warm-workers",
        type=int,
        default=None,
        help="ToolConfig.warm_workers of the server and the in-process host (default: 2)",
    )
    parser.add_argument(
        "--settle", type=float, default=0.0, help="seconds to wait after the baseline"
    )
    parser.add_argument("--max-seconds", type=float, default=170, help="abort past this")
    parser.add_argument("--json", default=None, metavar="PATH")
    args = parser.parse_args()
    if not 1 <= args.sessions <= 128:
        parser.error("--sessions must be between 1 and 128 (a bounded load test)")
    started = time.monotonic()

    def remaining() -> float:
        return max(1.0, args.max_seconds - (time.monotonic() - started))

    with tempfile.TemporaryDirectory(prefix="serve_bench_") as tmp:
        dataset = args.dataset or str(small_dataset(Path(tmp) / "ds"))
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        command = [
            sys.executable,
            "-m",
            "causaltrace",
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--max-sessions",
            str(args.sessions + 8),
            "--min-available-mb",
            "0",
            "--log-level",
            "warning",
        ]
        tools = {} if args.warm_workers is None else {"warm_workers": args.warm_workers}
        if tools:
            (Path(tmp) / "tools.json").write_text(json.dumps(tools))
            command += ["--tool-config", str(Path(tmp) / "tools.json")]
        proc = subprocess.Popen(command)
        try:

            async def over_http() -> dict:
                await wait_healthy(url, proc, 120)
                async with HttpHost(url, timeout=300) as host:
                    report = await asyncio.wait_for(
                        drive(host, dataset, args.sessions, args.baseline_rounds, args.settle),
                        remaining(),
                    )
                    report["health_1"] = await http_floor(host, 1)
                    report["health_load"] = await http_floor(host, args.sessions)
                    return report

            report = asyncio.run(over_http())
        finally:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
        if not args.no_in_process:

            async def in_process() -> dict:
                config = HostConfig(max_sessions=args.sessions + 8, min_available_mb=0)
                async with SessionHost(tools, config=config) as host:
                    return await asyncio.wait_for(
                        drive(host, dataset, args.sessions, args.baseline_rounds, args.settle),
                        remaining(),
                    )

            report["in_process"] = asyncio.run(in_process())
    report["machine"] = f"{platform.machine()}, {os.cpu_count()} cores, {platform.python_version()}"
    report["warm_workers"] = args.warm_workers or 2
    print(
        f"sandbox {report['sandbox']}; warm_workers {report['warm_workers']}; {report['machine']}"
    )
    print(summary("HTTP", report))
    if "in_process" in report:
        print(summary("in-process SessionHost", report["in_process"]))
    h1, hn = report["health_1"], report["health_load"]
    print(
        f"HTTP alone (GET /health, no tools): 1 client p50 {h1[0]:.1f} / p99 {h1[2]:.1f} ms; "
        f"{args.sessions} clients at once p50 {hn[0]:.1f} / p99 {hn[2]:.1f} ms"
    )
    print("latency in ms; 1 session: one session at a time; p99 ratio: HTTP load / HTTP 1 session")
    print(table(report))
    problems = report["problems"] + report.get("in_process", {}).get("problems", [])
    for problem in problems[:10]:
        print("  " + problem)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
