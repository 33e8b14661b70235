"""``causaltrace`` command line: quick looks at a domain without writing a dataset.

``causaltrace simulate --domain example`` draws one hidden cause, simulates the factual and
counterfactual worlds with shared noise, and prints what the cause did to each observed node.
Dataset generation and evaluation have their own Hydra apps (``causaltrace-generate``,
``causaltrace-eval``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import numpy as np

from causaltrace.domain import available_domains, load_domain


def simulate_summary(domain_name: str, seed: int, cause: str | None = None) -> str:
    """Text summary of one simulated intervention in ``domain_name``."""
    domain = load_domain(domain_name)
    scm = domain.scm
    rng = np.random.default_rng(np.random.SeedSequence(seed))
    names = list(scm.intervention_points)
    cause = cause or names[int(rng.integers(len(names)))]
    draw = scm.point(cause).sample(rng, scm.panel)
    worlds = scm.simulate(
        scm.interventions_for(draw), seed=np.random.SeedSequence(seed, spawn_key=(1,))
    )
    panel = scm.panel
    mask = draw.slice.mask(panel)
    lines = [
        f"domain {domain_name!r}: {scm}",
        f"panel: {panel.n_cells} cells x {panel.n_time} steps "
        f"({', '.join(f'{d.name}[{len(d.levels)}]' for d in panel.dimensions)}), "
        f"time {panel.time.values[0]} .. {panel.time.values[-1]}",
        f"nodes (topological): {', '.join(scm.order)}",
        f"drawn cause: {draw.as_dict()}",
        f"affected nodes: {', '.join(sorted(worlds.affected))}",
        "",
        f"{'node':<20}{'factual':>14}{'counterfactual':>16}{'effect in slice':>17}{'outside':>10}",
    ]
    after = np.arange(panel.n_time) >= draw.window.onset
    for name in scm.observed:
        f, c = worlds.factual[name], worlds.counterfactual[name]
        inside = float((f - c)[mask][:, after].sum())
        outside = float((f - c)[~mask].sum())
        lines.append(
            f"{name:<20}{float(f.sum()):>14.1f}{float(c.sum()):>16.1f}"
            f"{inside:>17.1f}{outside:>10.1f}"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="causaltrace", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sim = sub.add_parser("simulate", help="simulate one hidden cause and print its effects")
    sim.add_argument("--domain", default="example", help=f"one of {sorted(available_domains())}")
    sim.add_argument("--seed", type=int, default=0)
    sim.add_argument("--cause", default=None, help="intervention point (default: drawn)")
    sub.add_parser("domains", help="list registered domains")
    args = parser.parse_args(argv)
    if args.command == "domains":
        for name, path in sorted(available_domains().items()):
            print(f"{name}\t{path}")
        return 0
    print(simulate_summary(args.domain, args.seed, args.cause))
    return 0


if __name__ == "__main__":
    sys.exit(main())
