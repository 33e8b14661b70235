"""DoWhy's effect estimators on what identification returns (imports dowhy: the ``dowhy`` extra).

``CausalModel(data, treatment, outcome, graph=...)``, then DoWhy's own ``identify_effect()``,
then ``estimate_effect(method_name=...)`` with the back-door set of our
:class:`~causaltrace.structure.identification.Identification` (DoWhy's choice is recorded, and
replaced by ours when it differs, so that both libraries estimate the same regression). With
``backdoor.linear_regression`` and the same set, DoWhy's value equals
:func:`causaltrace.structure.estimation.backdoor_regression` with ``interacted=False`` (both
fit the outcome on the treatment and one-hot categories, first level dropped); its standard
error is statsmodels' classical one. ``tests/structure/test_dowhy_estimation.py`` checks the
equality to 1e-8.

Not loaded by ``import causaltrace`` or ``causaltrace.structure``: import this module.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import networkx as nx
import numpy as np
from dowhy import CausalModel

from causaltrace.errors import CausalTraceError
from causaltrace.structure.estimation import Estimate
from causaltrace.structure.identification import Identification
from causaltrace.structure.regression import is_categorical

__all__ = ["DowhyEstimate", "dowhy_estimate", "sufficient_graph"]


@dataclass(frozen=True)
class DowhyEstimate:
    """DoWhy's estimate as an :class:`Estimate`, with the set DoWhy chose itself.

    Args:
        estimate: The value, DoWhy's standard error and interval (statsmodels' classical
            ones for ``backdoor.linear_regression``; ``nan`` for other methods, whose DoWhy
            default is a slow bootstrap), the method and the set used.
        dowhy_set: The back-door set DoWhy's own identification chose on ``graph`` (with
            several minimal sets, its choice may follow Python's string hashing, so it can
            differ between processes).
    """

    estimate: Estimate
    dowhy_set: tuple[str, ...]


def sufficient_graph(identification: Identification) -> nx.DiGraph:
    """The smallest graph on which the identification's back-door set is DoWhy's answer:
    each adjustment node a parent of the treatment and of the outcome, the treatment a parent
    of the outcome."""
    t, y = identification.treatments[0], identification.outcomes[0]
    g = nx.DiGraph([(t, y)])
    for z in sorted(identification.adjustment_set or ()):
        g.add_edges_from([(z, t), (z, y)])
    return g


def dowhy_estimate(
    frame,
    identification: Identification,
    *,
    graph: nx.DiGraph | None = None,
    method_name: str = "backdoor.linear_regression",
    treat: float = 1.0,
    control: float = 0.0,
    adjustment: Sequence[str] | None = None,
    effect_modifiers: Sequence[str] = (),
    method_params: Mapping | None = None,
    level: float = 0.95,
) -> DowhyEstimate:
    """Estimate the effect with DoWhy, adjusting for the identification's back-door set.

    Args:
        frame: Pooled rows (a DataFrame) with the treatment, outcome and set as columns.
        identification: A back-door answer of ``identify_effect``.
        graph: The causal graph DoWhy identifies on (nodes absent from ``frame`` are hidden
            to it); :func:`sufficient_graph` by default.
        method_name: DoWhy's estimator (``backdoor.linear_regression``,
            ``backdoor.propensity_score_weighting``, ...).
        treat: The contrast's treatment value.
        control: Its control value.
        adjustment: Another set than the identification's.
        effect_modifiers: Passed to DoWhy's ``estimate_effect``; none by default, so that its
            linear regression is the additive one (given ``None``, DoWhy reads them from the
            graph and interacts the treatment with every one present in the data).
        method_params: Passed to DoWhy's ``estimate_effect``.
        level: The interval's coverage.

    Raises:
        CausalTraceError: A multi-node or non-back-door query without ``adjustment``.
    """
    if len(identification.treatments) != 1 or len(identification.outcomes) != 1:
        raise CausalTraceError("DoWhy's estimators here take one treatment and one outcome")
    if adjustment is None and identification.kind not in ("backdoor", "no_effect"):
        raise CausalTraceError(
            f"the effect is identified by {identification.kind!r}, not back-door adjustment"
        )
    t, y = identification.treatments[0], identification.outcomes[0]
    adjust = sorted(adjustment if adjustment is not None else identification.adjustment_set or ())
    graph = sufficient_graph(identification) if graph is None else graph
    others = sorted(n for n in graph if n in frame.columns and n not in {t, y, *adjust})
    columns = [t, y, *adjust, *others]
    data = frame[columns].reset_index(drop=True)
    for c in columns[2:]:  # categories as DoWhy encodes them (dates too)
        if is_categorical(data[c]) and str(data[c].dtype) != "category":
            data[c] = data[c].astype(str).astype("category")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # DoWhy's deprecation and convergence notices
        model = CausalModel(data=data, treatment=t, outcome=y, graph=nx.DiGraph(graph.edges()))
        estimand = model.identify_effect(proceed_when_unidentifiable=True)
        chosen = tuple(sorted(estimand.get_backdoor_variables()))
        if method_name.startswith("backdoor") and list(chosen) != adjust:
            for key in list(estimand.backdoor_variables):
                estimand.set_backdoor_variables(list(adjust), key=key)
        result = model.estimate_effect(
            estimand,
            method_name=method_name,
            control_value=control,
            treatment_value=treat,
            confidence_intervals=False,
            effect_modifiers=None if effect_modifiers is None else list(effect_modifiers),
            method_params=dict(method_params or {}),
        )
        se = low = high = float("nan")
        if method_name == "backdoor.linear_regression":  # others bootstrap (slow)
            se = float(np.ravel(result.get_standard_error())[0])
            low, high = np.ravel(result.get_confidence_intervals(confidence_level=level))[:2]
    estimate = Estimate(
        float(result.value),
        se,
        float(low),
        float(high),
        f"dowhy:{method_name}",
        tuple(adjust),
        n=len(data),
    )
    return DowhyEstimate(estimate, chosen)
