"""Causal-structure research: identification of effects from the graph (back-door, front-door,
the ID algorithm), sampled data with the true graph for structure learning, and the true
equivalence classes (CPDAG, MAG, PAG) over any column subset with scores of learned graphs
against them (SHD, SID, F1); estimators of identified effects, their exact true values from
shared-noise worlds, and sensitivity analysis (E-values, robustness values, Manski bounds)."""

from causaltrace.structure.estimands import (
    Distribution,
    Estimand,
    Fraction,
    Probability,
    Product,
    Sum,
    free_variables,
)
from causaltrace.structure.estimation import (
    Estimate,
    aipw,
    backdoor_regression,
    estimate_effect,
    frontdoor_linear,
    ipw,
)
from causaltrace.structure.evaluation import JointDistribution, evaluate, table
from causaltrace.structure.graphs import (
    EndpointGraph,
    TrueGraphs,
    cpdag,
    mag,
    pag,
    scm_truth,
    true_graphs,
)
from causaltrace.structure.identification import (
    Identification,
    NotIdentifiable,
    identify,
    identify_effect,
)
from causaltrace.structure.panel import PooledDataWarning
from causaltrace.structure.scores import PRF, SID, GraphScores, score_graph, shd, sid
from causaltrace.structure.sensitivity import (
    ConfoundingSweep,
    EValue,
    ManskiBounds,
    Robustness,
    confounding_sweep,
    e_value,
    e_value_smd,
    manski_bounds,
    robustness_value,
)
from causaltrace.structure.truth import SliceEffect, TrueEffect, export_truth, true_effect

__all__ = [
    "ConfoundingSweep",
    "Distribution",
    "EValue",
    "EndpointGraph",
    "Estimand",
    "Estimate",
    "Fraction",
    "GraphScores",
    "Identification",
    "JointDistribution",
    "ManskiBounds",
    "NotIdentifiable",
    "PRF",
    "PooledDataWarning",
    "Probability",
    "Product",
    "Robustness",
    "SID",
    "SliceEffect",
    "Sum",
    "TrueEffect",
    "TrueGraphs",
    "aipw",
    "backdoor_regression",
    "confounding_sweep",
    "cpdag",
    "e_value",
    "e_value_smd",
    "estimate_effect",
    "evaluate",
    "export_truth",
    "free_variables",
    "frontdoor_linear",
    "identify",
    "identify_effect",
    "ipw",
    "mag",
    "manski_bounds",
    "pag",
    "robustness_value",
    "scm_truth",
    "score_graph",
    "shd",
    "sid",
    "table",
    "true_effect",
    "true_graphs",
]
