"""Measurements of the services domain behind docs/domain-services.md.

``python -m causaltrace_domains.services.measure DATASET_DIR [--time N]`` prints, for a generated split:

- which causes' signatures fire on each accepted episode (every cause's verifier statistic on
  every one of its candidate slices at the episode's onset, significant after the verifier's
  Bonferroni correction over the scan and with an SNR of at least 1), by true cause: the
  diagonal is detection, the rest is what an agent must see through;
- each cause's median detection SNR on its own slice (its ``typical_snr``);
- with ``--time N``, the seconds one attempt takes (draw, simulate both worlds, render, label,
  verify) over N attempts spread over the causes, in this process.
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict

import numpy as np

from causaltrace.datasets.reading import dataset_domain, load_index, rebuild_episode
from causaltrace.episodes.acceptance import verify_episode
from causaltrace.episodes.sampling import EpisodeSpec, build_episode
from causaltrace.episodes.verify import VerifierConfig, fires, scan_stats, scan_threshold


def cross_signatures(out_dir: str) -> tuple[dict, dict, dict]:
    domain = dataset_domain(out_dir)
    scm, no_signal = domain.scm, set(domain.no_signal_causes())
    signal = [c for c in scm.intervention_points if c not in no_signal]
    fired: dict = defaultdict(lambda: defaultdict(int))
    count: dict = defaultdict(int)
    snr: dict = defaultdict(list)
    for row in load_index(out_dir):
        episode = rebuild_episode(out_dir, row["episode_id"])
        true = episode.draw.point
        count[true] += 1
        onset = domain.alert_onset() if true in no_signal else episode.draw.window.onset
        evidence = domain.evidence(episode.tables)
        if true not in no_signal:
            sl = episode.draw.slice
            cells = None if sl.is_whole_panel else sl.mask(scm.panel)
            snr[true].append(evidence.statistic(true, cells, onset).snr)
        for other in signal:
            found = scan_stats(evidence, scm, other, onset)
            hit, _, _ = fires(found, scan_threshold(0.05, len(found)), VerifierConfig())
            fired[true][other] += int(hit)
    return fired, count, {c: float(np.median(v)) for c, v in snr.items()}


def seconds_per_attempt(n: int, seed: int = 99) -> float:
    from causaltrace import load_domain

    domain = load_domain("services")
    causes = list(domain.scm.intervention_points)
    build_episode(domain, EpisodeSpec("w-000000", "w", 0, seed, causes[0], None))  # warm up
    start = time.perf_counter()
    for i in range(n):
        spec = EpisodeSpec(f"w-{i:06d}", "w", i, seed, causes[i % len(causes)], None)
        verify_episode(domain, build_episode(domain, spec), VerifierConfig())
    return (time.perf_counter() - start) / n


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset")
    parser.add_argument("--time", type=int, default=0, help="time this many attempts")
    args = parser.parse_args(argv)
    fired, count, snr = cross_signatures(args.dataset)
    domain = dataset_domain(args.dataset)
    signal = [c for c in domain.scm.intervention_points if c not in domain.no_signal_causes()]
    print("| true cause | n | " + " | ".join(signal) + " |")
    print("| --- | ---: | " + " | ".join("---:" for _ in signal) + " |")
    for true in domain.scm.intervention_points:
        if count[true]:
            cells = " | ".join(str(fired[true][c]) for c in signal)
            print(f"| {true} | {count[true]} | {cells} |")
    print("median detection SNR:", {c: round(v, 1) for c, v in snr.items()})
    if args.time:
        print(f"seconds per attempt: {seconds_per_attempt(args.time):.3f}")


if __name__ == "__main__":
    main()
