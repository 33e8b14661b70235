"""What attributing every change costs, and how close its pairwise estimate is to the exact one.

    python bench/bench_change_shares.py              # 12 episodes of the default ads account
    python bench/bench_change_shares.py --episodes 24 --preset small

Two measurements, side by side in one run (the machine is shared and noisy: the ratios hold,
absolute times are context):

1. Generation cost: the same episodes accepted with ``verifier.background_share`` on (0.10) and
   off, interleaved episode by episode; the ratio of the total times, and attempts per accepted
   episode for each.
2. Estimator accuracy: on accepted episodes with at most ``--max-exact`` players, every share
   from the pairwise estimator against the exact Shapley value (every coalition simulated); the
   largest absolute difference and the largest efficiency residual, and the worlds each needed.
"""

from __future__ import annotations

import argparse
import time

from causaltrace import load_domain
from causaltrace.episodes.acceptance import accept_episode
from causaltrace.episodes.change_shares import attribute_changes
from causaltrace.episodes.composition import assignments
from causaltrace.episodes.sampling import EpisodeSpec, episode_id
from causaltrace.episodes.verify import VerifierConfig

SEED, SPLIT = 20261206, "bench"


def specs(domain, n: int) -> list[EpisodeSpec]:
    plan = assignments(domain.scm, {"kind": "prior"}, split=SPLIT, dataset_seed=SEED, n_episodes=n)
    return [
        EpisodeSpec(episode_id(SPLIT, i), SPLIT, i, SEED, a.cause, a.slice_order, also=a.also)
        for i, a in enumerate(plan)
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=12)
    parser.add_argument("--preset", default="default")
    parser.add_argument("--max-exact", type=int, default=7)
    args = parser.parse_args()
    domain = load_domain("ads", {"preset": args.preset})
    on, off = VerifierConfig(background_share=0.10, check_oracle_set=True), VerifierConfig()
    seconds = {"on": 0.0, "off": 0.0}
    attempts = {"on": 0, "off": 0}
    accepted = []
    for spec in specs(domain, args.episodes):
        for name, verifier in (("off", off), ("on", on)):
            started = time.perf_counter()
            episode, verdicts = accept_episode(domain, spec, verifier, max_attempts=400)
            seconds[name] += time.perf_counter() - started
            attempts[name] += len(verdicts)
            if name == "on":
                accepted.append(episode)
    n = args.episodes
    print(f"episodes {n}, ads preset {args.preset!r}")
    for name in ("off", "on"):
        print(
            f"  background_share {name:>3}: {seconds[name]:7.1f} s, "
            f"{attempts[name] / n:.2f} attempts per accepted episode"
        )
    print(f"  cost ratio on/off: {seconds['on'] / seconds['off']:.2f}x")
    worst, residual, compared, worlds = 0.0, 0.0, 0, {"exact": 0, "pairwise": 0}
    for episode in accepted:
        players = len(episode.draws) + sum(1 for c in episode.background.changes if c.interventions)
        if players > args.max_exact:
            continue
        t = {}
        started = time.perf_counter()
        exact = attribute_changes(domain, episode, exact_players=players)
        t["exact"] = time.perf_counter() - started
        started = time.perf_counter()
        pairwise = attribute_changes(domain, episode, exact_players=0)
        t["pairwise"] = time.perf_counter() - started
        worlds["exact"] += exact.worlds
        worlds["pairwise"] += pairwise.worlds
        compared += 1
        for group in ("causes", "background"):
            for name, shares in getattr(exact, group).items():
                for alert, value in shares.items():
                    worst = max(worst, abs(getattr(pairwise, group)[name][alert] - value))
        residual = max(residual, *(abs(r) for r in pairwise.residual.values()))
    print(
        f"pairwise vs exact on {compared} accepted episodes (<= {args.max_exact} players): "
        f"largest |share difference| {worst:.4f}, largest |residual| {residual:.4f}, "
        f"worlds simulated {worlds['pairwise']} vs {worlds['exact']}"
    )


if __name__ == "__main__":
    main()
