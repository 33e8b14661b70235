"""Identification of a causal effect from the graph, by delegation to pgmpy.

pgmpy's ``CausalInference`` enumerates back-door and front-door adjustment sets over the
*observed* nodes of ``scm.to_pgmpy()`` (whose ``latents`` are the SCM's unobserved nodes), so a
latent confounder is never offered as an adjustment variable. pgmpy is imported only here, when
a function is called. The graph is the SCM's default view: on an intervened SCM, the mutilated
graph (see :meth:`causaltrace.scm.SCM.graph_view`).

Back-door and front-door are sufficient criteria, not complete ones: an effect reported
``unidentified`` may still be identifiable by do-calculus (the ID algorithm), which pgmpy's
``CausalInference`` does not run. pgmpy enumerates subsets of the observed nodes, so the cost
grows as 2 to the number of observed nodes: meant for small graphs.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from causaltrace.errors import GraphError

if TYPE_CHECKING:  # pragma: no cover
    from causaltrace.scm import SCM

EstimandKind = Literal["backdoor", "frontdoor", "no_effect", "unidentified"]


@dataclass(frozen=True)
class Identification:
    """How (or why not) the effect of ``treatment`` on ``outcome`` is identified.

    ``adjustment_set`` is the smallest set of its kind (ties broken by sorted names), the empty
    set for ``no_effect``, and ``None`` when the effect is not identified; ``reason`` says why.
    ``alternatives`` lists every set pgmpy found for that kind, smallest first.
    """

    treatment: str
    outcome: str
    kind: EstimandKind
    adjustment_set: frozenset[str] | None
    reason: str
    alternatives: tuple[frozenset[str], ...] = ()

    @property
    def identified(self) -> bool:
        return self.adjustment_set is not None


def backdoor_adjustment_sets(scm: SCM, treatment: str, outcome: str) -> tuple[frozenset[str], ...]:
    """Minimal back-door adjustment sets, smallest first; ``()`` if there is none.

    ``(frozenset(),)`` means no adjustment is needed (pgmpy reports that as an empty frozenset,
    and raises when no set exists; both are translated here).
    """
    inference = _inference(scm, treatment, outcome)
    with _quiet():
        try:
            found = inference.get_all_backdoor_adjustment_sets(treatment, outcome)
        except ValueError:  # pgmpy: "No valid adjustment set found"
            return ()
    return _sorted_sets(found) if found else (frozenset(),)


def frontdoor_adjustment_sets(scm: SCM, treatment: str, outcome: str) -> tuple[frozenset[str], ...]:
    """Front-door adjustment sets (observed mediators), smallest first; ``()`` if none."""
    inference = _inference(scm, treatment, outcome)
    with _quiet():
        return _sorted_sets(inference.get_all_frontdoor_adjustment_sets(treatment, outcome))


def identify_effect(scm: SCM, treatment: str, outcome: str) -> Identification:
    """Identify the effect of ``treatment`` on ``outcome``: back-door first, then front-door.

    A latent treatment or outcome is reported ``unidentified`` (its values are not in the
    data); an unknown node name raises :class:`GraphError`.
    """
    _check_names(scm, treatment, outcome)
    for role, node in (("treatment", treatment), ("outcome", outcome)):
        if not scm.nodes[node].observed:
            return _none(treatment, outcome, f"the {role} {node!r} is latent (not observed)")
    if outcome not in scm.descendants(treatment):
        return Identification(
            treatment,
            outcome,
            "no_effect",
            frozenset(),
            f"no directed path from {treatment!r} to {outcome!r}: the effect is zero",
        )
    for kind, finder in (
        ("backdoor", backdoor_adjustment_sets),
        ("frontdoor", frontdoor_adjustment_sets),
    ):
        sets = finder(scm, treatment, outcome)
        if sets:
            return Identification(
                treatment, outcome, kind, sets[0], f"{kind} criterion (pgmpy)", sets
            )
    return _none(
        treatment,
        outcome,
        "no observed set satisfies the back-door or the front-door criterion "
        f"(latent nodes: {', '.join(scm.latent) or 'none'})",
    )


def _none(treatment: str, outcome: str, reason: str) -> Identification:
    return Identification(treatment, outcome, "unidentified", None, reason)


def _check_names(scm: SCM, treatment: str, outcome: str) -> None:
    for role, node in (("treatment", treatment), ("outcome", outcome)):
        if node not in scm.nodes:
            raise GraphError(f"{role}: SCM {scm.name!r} has no node {node!r}")
    if treatment == outcome:
        raise GraphError(f"treatment and outcome are the same node {treatment!r}")


def _inference(scm: SCM, treatment: str, outcome: str):
    """pgmpy's CausalInference over the SCM's graph, after checking both nodes are observed."""
    _check_names(scm, treatment, outcome)
    for role, node in (("treatment", treatment), ("outcome", outcome)):
        if not scm.nodes[node].observed:
            raise GraphError(f"the {role} {node!r} is latent: adjustment needs it observed")
    with _quiet():  # pgmpy 1.x warns about its own deprecated modules on import
        from pgmpy.inference import CausalInference

    return CausalInference(scm.to_pgmpy())


@contextmanager
def _quiet() -> Iterator[None]:
    """Silence pgmpy 1.x's deprecation notices for the CausalInference adjustment API."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        yield


def _sorted_sets(sets) -> tuple[frozenset[str], ...]:
    return tuple(sorted((frozenset(s) for s in sets), key=lambda s: (len(s), sorted(s))))
