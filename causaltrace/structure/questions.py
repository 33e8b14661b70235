"""Research questions about a domain's causes, answered from its SCM: which node each cause
intervenes on, and whether its effect on a KPI is identifiable from the observed tables.

A researcher asking "which ads causes are identifiable from the observed tables?" needed the
source for the first step (issue 45): a cause is an intervention point, and the nodes it acts
on are only known by building its interventions. :func:`cause_nodes` makes that mapping public
(read off fixed draws of each cause's prior, as the concurrent-episode composition does), and
:func:`identify_causes` asks :func:`~causaltrace.structure.identification.identify_effect`
for each cause's nodes jointly against an outcome, on the SCM's observed graph (panel
coordinates included where they confound). A cause whose nodes are latent is unidentified for
the plain reason that its treatment is not in the data: the tables show its symptoms, not its
dose.

    python -m causaltrace.structure.questions --domain ads --outcome conversions
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from causaltrace.episodes.composition import target_nodes
from causaltrace.episodes.domain import load_domain
from causaltrace.errors import CausalTraceError
from causaltrace.structure.identification import Identification, identify_effect


@dataclass(frozen=True)
class CauseIdentification:
    """One cause's answer: the nodes it intervenes on, which of them are latent, and how (or
    why not) its effect on ``outcome`` is identified."""

    cause: str
    nodes: tuple[str, ...]
    latent: tuple[str, ...]
    outcome: str
    identification: Identification

    @property
    def identified(self) -> bool:
        return self.identification.kind != "unidentified"

    def row(self) -> dict[str, str]:
        """The answer as one table row (text cells)."""
        found = self.identification
        adjustment = found.adjustment_set
        return {
            "cause": self.cause,
            "nodes": ", ".join(self.nodes),
            "latent": ", ".join(self.latent) or "-",
            "identified": found.kind,
            "adjustment": "-" if adjustment is None else ", ".join(sorted(adjustment)) or "{}",
            "reason": found.reason,
        }


def cause_nodes(scm) -> dict[str, tuple[str, ...]]:
    """Each intervention point's target nodes, sorted; causes that act on no node (no-signal
    causes) are left out.

    Args:
        scm (SCM): The model.
    """
    out = {}
    for cause in scm.intervention_points:
        nodes = tuple(sorted(target_nodes(scm, cause)))
        if nodes:
            out[cause] = nodes
    return out


def identify_causes(scm, outcome: str, **options) -> list[CauseIdentification]:
    """Whether each cause's effect on ``outcome`` is identifiable from the observed tables.

    Args:
        scm (SCM): The model.
        outcome: An observed node (a KPI).
        **options: More arguments of :func:`identify_effect` (``with_panel``,
            ``max_enumerated``...).

    Raises:
        CausalTraceError: ``outcome`` is not a node of the SCM, or not an observed one.
    """
    node = scm.nodes.get(outcome)
    if node is None:
        raise CausalTraceError(
            f"outcome {outcome!r} is not a node of {scm.name}; observed nodes: "
            f"{sorted(scm.observed)}"
        )
    if not node.observed:
        raise CausalTraceError(f"outcome {outcome!r} is latent in {scm.name}: pick an observed KPI")
    answers = []
    for cause, nodes in cause_nodes(scm).items():
        latent = tuple(n for n in nodes if not scm.nodes[n].observed)
        treatment = nodes[0] if len(nodes) == 1 else nodes
        found = identify_effect(scm, treatment, outcome, **options)
        answers.append(CauseIdentification(cause, nodes, latent, outcome, found))
    return answers


def _table(rows: list[dict[str, str]]) -> str:
    header = list(rows[0]) if rows else []
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    lines += ["| " + " | ".join(r[h] for h in header) + " |" for r in rows]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    """Print, for each cause of a domain, its nodes and whether its effect is identifiable."""
    parser = argparse.ArgumentParser(
        prog="python -m causaltrace.structure.questions", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--domain", required=True, help="a registered domain (ads, services...)")
    parser.add_argument("--outcome", required=True, help="an observed KPI node")
    args = parser.parse_args(argv)
    try:
        answers = identify_causes(load_domain(args.domain).scm, args.outcome)
    except CausalTraceError as exc:
        print(f"causaltrace questions: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    print(_table([a.row() for a in answers]))
    found = sum(a.identified for a in answers)
    print(f"\n{found} of {len(answers)} causes identifiable on {args.outcome}.")


if __name__ == "__main__":
    main()
