"""Generation cost of two versions of the code, side by side: what a change to the generator
(a new gate, a richer domain) costs per accepted episode.

    python bench/bench_generation_ab.py --before /path/to/old/checkout \
        --before-python /path/to/old/venv/bin/python --dataset ads_train --episodes 32 --reps 2

Both versions generate the same split (the first ``--episodes`` episodes of ``--dataset``, lazy,
one worker), alternating run by run so that both see the same machine load. For each it
reports the attempts per accepted episode (from the split's private stats), the wall time per
attempt and per accepted episode, and the after/before ratios. ``--before`` is a source tree
(a ``git worktree`` of the old commit); ``--before-python`` an interpreter whose environment has
the old tree's dependencies (the old tree is put first on ``PYTHONPATH``, so the editable
install of the current tree is not what it imports).
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

ROOT = Path(__file__).resolve().parents[1]


def attempts_of(out_dir: Path) -> tuple[int, int]:
    """(accepted episodes, attempts) of a generated split, from its private stats."""
    episodes = attempts = 0
    for path in sorted((out_dir / "private" / "stats").glob("shard-*.json")):
        for stat in json.loads(path.read_text()):
            episodes += 1
            attempts += int(stat["attempts"])
    return episodes, attempts


def run_once(python: str, tree: Path, args: argparse.Namespace, out_dir: Path) -> float:
    """Wall seconds of one generation run of ``tree``'s code into ``out_dir``."""
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONHASHSEED": "0"}
    command = [
        python,
        "-c",
        "from causaltrace.apps.generate import main; main()",
        f"dataset={args.dataset}",
        f"dataset.n_episodes={args.episodes}",
        "dataset.materialize=false",
        f"out_dir={out_dir}",
        "progress=false",
        *args.override,
    ]
    start = time.perf_counter()
    done = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{tree}: generation failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, type=Path, help="the old source tree")
    parser.add_argument("--before-python", default=sys.executable)
    parser.add_argument(
        "--dataset", default="ads_train", help="a dataset config (prior composition)"
    )
    parser.add_argument("--episodes", type=int, default=32)
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("override", nargs="*", help="further Hydra overrides for both versions")
    args = parser.parse_args()

    sides = {"before": (args.before_python, args.before.resolve()), "after": (sys.executable, ROOT)}
    walls: dict[str, list[float]] = {name: [] for name in sides}
    counts: dict[str, tuple[int, int]] = {}
    scratch = Path(tempfile.mkdtemp(prefix="bench_gen_ab_"))
    try:
        for rep in range(args.reps):
            order = list(sides) if rep % 2 == 0 else list(reversed(sides))
            for name in order:
                out_dir = scratch / f"{name}-{rep}"
                walls[name].append(run_once(*sides[name], args, out_dir))
                counts[name] = attempts_of(out_dir)
                shutil.rmtree(out_dir)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    print(
        f"dataset {args.dataset}, first {args.episodes} episodes, lazy, 1 worker, {args.reps} runs"
    )
    print(
        "| version | episodes / attempts | attempts per episode | s per attempt | s per episode |"
    )
    print("| --- | --- | ---: | ---: | ---: |")
    per_episode = {}
    per_attempt = {}
    for name in sides:
        episodes, attempts = counts[name]
        wall = statistics.median(walls[name])
        per_attempt[name] = wall / attempts
        per_episode[name] = wall / episodes
        print(
            f"| {name} | {episodes} / {attempts} | {attempts / episodes:.2f} | "
            f"{per_attempt[name]:.3f} | {per_episode[name]:.3f} |"
        )
    print(
        f"\nafter / before: per attempt {per_attempt['after'] / per_attempt['before']:.2f}x, "
        f"per accepted episode {per_episode['after'] / per_episode['before']:.2f}x "
        "(wall includes start-up: the same for both)"
    )


if __name__ == "__main__":
    main()
