"""Generation benchmark (issue 4): where an accepted episode's time goes, worker scaling,
lazy against materialized opening, and peak memory against run length.

    python bench/bench_generation.py            # default ads account
    python bench/bench_generation.py --quick    # fewer repetitions

Everything that is compared is measured side by side in this one run, interleaved, because the
machine is shared and noisy: ratios are the figures that hold, absolute times are context.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from causaltrace import load_domain
from causaltrace.episodes import EpisodeSpec, make_label
from causaltrace.generation import open_episode
from causaltrace.seeds import episode_streams
from causaltrace.storage import read_episode_tables, write_episode_dir
from causaltrace.verify import verify

ROOT = Path(__file__).resolve().parents[1]


def stage_costs(domain, n: int) -> dict[str, float]:
    """Median seconds per stage of one episode attempt, and the bare simulation of the same
    episode (the factual and counterfactual worlds only, interventions already built)."""
    scm = domain.scm
    causes = list(scm.intervention_points)
    rows = []
    for i in range(n):
        cause = causes[i % len(causes)]
        streams = episode_streams(99, "bench", i, 0)
        t0 = time.perf_counter()
        draw = scm.point(cause).sample(streams.draw, scm.panel)
        background = domain.background(streams.background)
        base = scm.intervene(background.interventions)
        interventions = scm.interventions_for(draw)
        t1 = time.perf_counter()
        worlds = base.simulate(interventions, seed=streams.noise)
        t2 = time.perf_counter()
        tables = domain.render(worlds.factual, draw, background, streams.render)
        prompt = domain.task_prompt(tables)
        make_label(domain, EpisodeSpec("b", "bench", i, 99, cause, None), draw, worlds)
        t3 = time.perf_counter()
        verify(
            scm,
            domain.evidence(tables),
            draw,
            alert_onset=domain.alert_onset(),
            no_signal=domain.no_signal_causes(),
        )
        t4 = time.perf_counter()
        with tempfile.TemporaryDirectory() as tmp:
            write_episode_dir(Path(tmp), tables, prompt, domain.data_dictionary())
        t5 = time.perf_counter()
        # The bare simulation of the same episode, right after, on the same warm caches.
        s0 = time.perf_counter()
        base.simulate(interventions, seed=streams.noise)
        s1 = time.perf_counter()
        rows.append(
            {
                "draw": t1 - t0,
                "simulate": t2 - t1,
                "render+label": t3 - t2,
                "verify": t4 - t3,
                "write": t5 - t4,
                "bare_simulation": s1 - s0,
            }
        )
    return {k: statistics.median(r[k] for r in rows) for k in rows[0]}


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
        "from causaltrace.generation import Job, run\n"
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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--preset", default="default")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    n_stage = 12 if args.quick else 36
    n_scale = 32 if args.quick else 64
    domain = load_domain("ads", {"preset": args.preset})
    print(f"machine: {os.cpu_count()} cores; preset {args.preset}; panel {domain.scm.panel.shape}")

    costs = stage_costs(domain, n_stage)
    whole = sum(v for k, v in costs.items() if k != "bare_simulation")
    print(
        "\n1. one episode attempt, median seconds by stage "
        f"(n={n_stage}, interleaved with the bare simulation)"
    )
    for k, v in costs.items():
        print(f"   {k:<16}{v * 1000:8.1f} ms")
    print(f"   whole / bare simulation = {whole / costs['bare_simulation']:.2f}x  (goal <= 2x)")

    tmp = Path(tempfile.mkdtemp(prefix="bench-gen-"))
    try:
        preset = f"domain.preset={args.preset}"
        common = [
            preset,
            "dataset=ads_train",
            f"dataset.n_episodes={n_scale}",
            "dataset.shard_size=8",
        ]
        times1, times2 = [], []
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
        t1, t2 = min(times1), min(times2)
        print(
            f"\n2. {n_scale} verified lazy episodes: 1 worker {t1:.1f} s, 2 workers {t2:.1f} s "
            f"-> speed-up {t1 / t2:.2f}x  (goal >= 1.8x)"
        )
        per_episode = t1 / n_scale
        print(
            f"   1 worker: {per_episode * 1000:.0f} ms per accepted episode (incl. start-up); "
            f"10,000 episodes on 2 workers ~ {10000 * per_episode / (t1 / t2) / 60:.1f} min "
            "(context goal < 10 min)"
        )

        frozen, lazy = tmp / "frozen", tmp / "lazy"
        run_cli(frozen, preset, "dataset=ads_smoke")
        run_cli(lazy, preset, "dataset=ads_smoke", "dataset.materialize=false")
        lazy_t, frozen_t = [], []
        for i in range(12):
            episode = f"smoke-{i:06d}"
            t = time.perf_counter()
            read_episode_tables(open_episode(frozen, episode))
            frozen_t.append(time.perf_counter() - t)
            t = time.perf_counter()
            read_episode_tables(open_episode(lazy, episode, cache_dir=tmp / "cache"))
            lazy_t.append(time.perf_counter() - t)
        lz, fz = statistics.median(lazy_t), statistics.median(frozen_t)
        print(
            f"\n3. open an episode and load its tables: lazy rebuild {lz * 1000:.0f} ms, "
            f"materialized {fz * 1000:.0f} ms -> {lz / fz:.1f}x  (goal <= 3x)"
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
                    "stage_ms": {k: round(v * 1000, 1) for k, v in costs.items()},
                    "whole_over_bare": round(whole / costs["bare_simulation"], 2),
                    "speedup_2_workers": round(t1 / t2, 2),
                    "lazy_over_materialized": round(lz / fz, 2),
                    "rss_mb": rss,
                }
            )
        )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
