"""Generation benchmark (issue 4): where an accepted episode's time goes, worker scaling,
lazy against materialized opening, and peak memory against run length.

    python bench/bench_generation.py            # default ads account
    python bench/bench_generation.py --quick    # fewer repetitions

Everything that is compared is measured side by side in this one run, interleaved, because the
machine is shared and noisy: ratios are the figures that hold, absolute times are context.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import ClassVar

from causaltrace import load_domain
from causaltrace.core.seeds import episode_streams
from causaltrace.datasets.generation import Job
from causaltrace.datasets.reading import dataset_domain, find_spec, open_episode
from causaltrace.datasets.storage import read_episode_tables, write_episode_dir
from causaltrace.episodes import acceptance
from causaltrace.episodes.composition import assignments
from causaltrace.episodes.sampling import EpisodeSpec, build_visible

ROOT = Path(__file__).resolve().parents[1]


STAGES = (
    "simulate",
    "alert gate",
    "render+label",
    "verify",
    "cause shares",
    "oracle",
    "change shares",
)


class StageClock:
    """Wall time per stage of :func:`accept_episode`, by wrapping the functions it calls in
    :mod:`causaltrace.episodes.acceptance` (the real loop runs, unchanged)."""

    NAMES: ClassVar[dict[str, str]] = {
        "simulate_attempt": "simulate",
        "monitor_explanation": "alert gate",
        "complete_episode": "render+label",
        "verify_episode": "verify",
        "cause_alert_shares": "cause shares",
        "oracle_measurements": "oracle",
        "attribute_changes": "change shares",
    }

    def __init__(self):
        self.seconds = dict.fromkeys(STAGES, 0.0)
        self.saved = {}

    def __enter__(self):
        for name, stage in self.NAMES.items():
            original = getattr(acceptance, name)
            self.saved[name] = original

            def timed(*args, _original=original, _stage=stage, **kwargs):
                t = time.perf_counter()
                try:
                    return _original(*args, **kwargs)
                finally:
                    self.seconds[_stage] += time.perf_counter() - t

            setattr(acceptance, name, timed)
        return self

    def __exit__(self, *exc):
        for name, original in self.saved.items():
            setattr(acceptance, name, original)


def episode_costs(domain, preset: str, n: int) -> dict[str, float]:
    """Seconds per accepted episode of the training prior (``dataset=ads_train``), the real
    :func:`accept_episode` loop timed whole and by stage, and the bare simulation of each
    accepted attempt (both worlds, interventions already built) right after it, on the same warm
    caches; plus the table write a materialized split adds. Sums over ``n`` episodes: the
    attempts per episode vary, so the ratio of sums is the cost of the split."""
    job = Job.from_config(
        {
            "out_dir": "unused",
            "domain": {"name": "ads", "preset": preset},
            "dataset": {"name": "bench", "split": "bench", "seed": 99, "n_episodes": n},
        }
    )
    plan = assignments(
        domain.scm, job.dataset.composition, split="bench", dataset_seed=99, n_episodes=n
    )
    whole = bare = write = 0.0
    attempts = 0
    with StageClock() as clock:
        for index in range(n):
            spec = EpisodeSpec(
                f"bench-{index:06d}", "bench", index, 99, plan[index].cause,
                plan[index].slice_order, also=plan[index].also,
            )  # fmt: skip
            t = time.perf_counter()
            episode, verdicts = acceptance.accept_episode(domain, spec, job.verifier, 400)
            whole += time.perf_counter() - t
            attempts += len(verdicts)
            interventions = tuple(episode.worlds.interventions)
            base = domain.scm
            if episode.background.interventions:
                base = base.intervene(episode.background.interventions)
            streams = episode_streams(99, "bench", index, episode.spec.attempt)
            t = time.perf_counter()
            base.simulate(interventions, seed=streams.noise)
            bare += time.perf_counter() - t
            with tempfile.TemporaryDirectory() as tmp:
                t = time.perf_counter()
                write_episode_dir(
                    Path(tmp), episode.tables, episode.prompt, domain.data_dictionary()
                )
                write += time.perf_counter() - t
    stages = {k: v / n for k, v in clock.seconds.items()}
    return {
        "whole": whole / n,
        "bare_simulation": bare / n,
        "write": write / n,
        "attempts": attempts / n,
        **stages,
    }


def run_cli(out: Path, *overrides: str, multirun: bool = False) -> float:
    args = [
        sys.executable,
        "-m",
        "causaltrace.apps.generate",
        *(["-m"] if multirun else []),
        f"out_dir={out}",
        "progress=false",
        *overrides,
    ]
    t = time.perf_counter()
    subprocess.run(args, check=True, capture_output=True, cwd=ROOT)
    return time.perf_counter() - t


def peak_rss_mb(out: Path, n: int, domain: str) -> float:
    code = (
        "import resource, sys\n"
        "from causaltrace.datasets.generation import Job, run\n"
        f"job = Job.from_config({{'out_dir': {str(out)!r}, 'domain': {{'name': 'ads', "
        f"'preset': {domain!r}}}, 'dataset': {{'name': 'mem', 'split': 'mem', 'seed': 3, "
        f"'n_episodes': {n}, 'materialize': False, 'shard_size': 16}}}})\n"
        "run(job, show_progress=False)\n"
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True, cwd=ROOT
    )
    return float(done.stdout.strip().splitlines()[-1])


def open_costs(tmp: Path, preset: str, n: int) -> dict[str, float]:
    """Median seconds to open an episode of a lazy split (rebuilt from its spec) and of a
    materialized one, three ways: to pandas through files, to pandas in memory, and until an
    agent's SQL and Python tools have the tables (warm sandbox pool)."""
    frozen, lazy = tmp / "frozen", tmp / "lazy"
    run_cli(frozen, f"domain.preset={preset}", "dataset=ads_smoke")
    run_cli(lazy, f"domain.preset={preset}", "dataset=ads_smoke", "dataset.materialize=false")
    domain = dataset_domain(lazy)
    times: dict[str, list[float]] = {k: [] for k in OPEN_KINDS}
    for i in range(n):
        episode = f"ads_smoke-{i:06d}"
        t = time.perf_counter()
        read_episode_tables(open_episode(frozen, episode))
        times["materialized: read tables"].append(time.perf_counter() - t)
        t = time.perf_counter()
        read_episode_tables(open_episode(lazy, episode, cache_dir=tmp / "cache-files"))
        times["lazy: rebuild, write, read"].append(time.perf_counter() - t)
        t = time.perf_counter()
        build_visible(domain, find_spec(lazy, episode))
        times["lazy: rebuild in memory"].append(time.perf_counter() - t)
    times.update(asyncio.run(agent_ready_costs(tmp, frozen, lazy, n)))
    return {k: statistics.median(v) for k, v in times.items()}


OPEN_KINDS = (
    "materialized: read tables",
    "lazy: rebuild, write, read",
    "lazy: rebuild in memory",
)


async def agent_ready_costs(tmp: Path, frozen: Path, lazy: Path, n: int) -> dict[str, list]:
    """Open an episode until both tools hold its tables, from a warm sandbox pool."""
    from causaltrace.tools import ToolConfig, ToolRuntime

    out: dict[str, list[float]] = {"materialized: tools ready": [], "lazy: tools ready": []}
    async with ToolRuntime(ToolConfig(warm_workers=2)) as runtime:
        for i in range(n):
            episode = f"ads_smoke-{i:06d}"
            for kind, source in (("materialized", frozen), ("lazy", lazy)):
                await runtime.wait_warm(timeout=300)
                t = time.perf_counter()
                directory = await asyncio.to_thread(
                    open_episode, source, episode, tmp / "cache-tools"
                )
                tools = runtime.episode(directory)
                await tools.start()
                await tools.ready()
                out[f"{kind}: tools ready"].append(time.perf_counter() - t)
                await tools.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--preset", default="default")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--episodes", type=int, default=1000, help="episodes of the 1-vs-2-worker comparison"
    )
    args = parser.parse_args()
    n_stage = 12 if args.quick else 36
    n_scale = 64 if args.quick else args.episodes
    domain = load_domain("ads", {"preset": args.preset})
    print(f"machine: {os.cpu_count()} cores; preset {args.preset}; panel {domain.scm.panel.shape}")

    costs = episode_costs(domain, args.preset, n_stage)
    bare = costs["bare_simulation"]
    print(
        f"\n1. an accepted episode of the training prior, mean over {n_stage} "
        f"({costs['attempts']:.2f} attempts each), against the bare simulation of its "
        "accepted attempt"
    )
    for k in ("whole", *STAGES, "write", "bare_simulation"):
        print(f"   {k:<16}{costs[k] * 1000:8.1f} ms  ({costs[k] / bare:5.2f}x bare)")
    whole_lazy = costs["whole"]
    whole_frozen = whole_lazy + costs["write"]
    print(
        f"   per accepted episode: {whole_lazy / bare:.2f}x a bare simulation lazy, "
        f"{whole_frozen / bare:.2f}x materialized  (goal <= 2x lazy, <= 3x materialized)"
    )

    tmp = Path(tempfile.mkdtemp(prefix="bench-gen-"))
    try:
        common = [
            f"domain.preset={args.preset}",
            "dataset=ads_train",
            f"dataset.n_episodes={n_scale}",
            "dataset.shard_size=8",  # small shards: a worker that is done early takes over
        ]
        times1, times2, attempts = [], [], 0
        for rep in range(2):  # interleave 1 and 2 workers
            times1.append(run_cli(tmp / f"w1-{rep}", *common))
            times2.append(
                run_cli(
                    tmp / f"w2-{rep}",
                    *common,
                    "launcher=joblib",
                    "num_workers=2",
                    "worker_index=0,1",
                    multirun=True,
                )
            )
            same = all(
                f.read_bytes() == (tmp / f"w2-{rep}" / "done" / f.name).read_bytes()
                for f in sorted((tmp / f"w1-{rep}" / "done").glob("*.json"))
            )
            assert same, "1 and 2 workers wrote different bytes"
            attempts = attempts_of(tmp / f"w1-{rep}")
        print(
            f"   (the scaling run below: {attempts / n_scale:.3f} attempts per episode on "
            f"{n_scale} episodes)"
        )
        t1, t2 = min(times1), min(times2)
        print(
            f"\n2. {n_scale} verified lazy episodes: 1 worker {t1:.1f} s, 2 workers {t2:.1f} s "
            f"-> speed-up {t1 / t2:.2f}x  (goal >= 1.8x); the two outputs are byte-identical"
        )
        print(
            f"   2 workers: {t2 / n_scale * 1000:.0f} ms per accepted episode (start-up "
            f"included); 10,000 episodes ~ {10000 * t2 / n_scale / 60:.1f} min (context goal "
            "< 10 min)"
        )

        opens = open_costs(tmp, args.preset, 6 if args.quick else 12)
        base = opens["materialized: read tables"]
        print("\n3. open an episode (median of episodes of ads_smoke):")
        for k, v in opens.items():
            print(f"   {k:<30}{v * 1000:8.1f} ms")
        ratios = {
            "files": opens["lazy: rebuild, write, read"] / base,
            "memory": opens["lazy: rebuild in memory"] / base,
            "tools": opens["lazy: tools ready"] / opens["materialized: tools ready"],
        }
        print(
            f"   lazy / materialized: {ratios['files']:.1f}x through files, "
            f"{ratios['memory']:.1f}x in memory, {ratios['tools']:.1f}x until the tools are "
            "ready  (goal <= 3x)"
        )

        small, large = 16, 160
        rss = [peak_rss_mb(tmp / f"mem-{n}", n, args.preset) for n in (small, large)]
        print(
            f"\n4. peak RSS: {small} episodes {rss[0]:.0f} MB, {large} episodes {rss[1]:.0f} MB "
            f"-> {rss[1] / rss[0]:.2f}x  (goal: flat, ~1x)"
        )
        print(
            json.dumps(
                {
                    "episode_ms": {
                        k: round(v * 1000, 1) for k, v in costs.items() if k != "attempts"
                    },
                    "attempts_per_episode": round(costs["attempts"], 3),
                    "attempts_per_episode_scaling_run": round(attempts / n_scale, 3),
                    "whole_over_bare_lazy": round(whole_lazy / bare, 2),
                    "whole_over_bare_materialized": round(whole_frozen / bare, 2),
                    "seconds_1_worker": round(t1, 1),
                    "seconds_2_workers": round(t2, 1),
                    "speedup_2_workers": round(t1 / t2, 2),
                    "open_ms": {k: round(v * 1000, 1) for k, v in opens.items()},
                    "lazy_over_materialized": {k: round(v, 2) for k, v in ratios.items()},
                    "rss_mb": rss,
                }
            )
        )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def attempts_of(out: Path) -> int:
    """Episode attempts (accepted and rejected) of a generated dataset, from its stats."""
    return sum(
        row["attempts"]
        for path in (out / "private" / "stats").glob("*.json")
        for row in json.loads(path.read_text())
    )


if __name__ == "__main__":
    main()
