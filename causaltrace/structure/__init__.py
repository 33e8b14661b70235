"""Causal-structure research: identification of effects from the graph (back-door, front-door,
the ID algorithm), sampled data with the true graph for structure learning, and the true
equivalence classes (CPDAG, MAG, PAG) over any column subset with scores of learned graphs
against them (SHD, SID, F1)."""

from causaltrace.structure.estimands import (
    Distribution,
    Estimand,
    Fraction,
    Probability,
    Product,
    Sum,
    free_variables,
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

__all__ = [
    "Distribution",
    "EndpointGraph",
    "Estimand",
    "Fraction",
    "GraphScores",
    "Identification",
    "JointDistribution",
    "NotIdentifiable",
    "PRF",
    "PooledDataWarning",
    "Probability",
    "Product",
    "SID",
    "Sum",
    "TrueGraphs",
    "cpdag",
    "evaluate",
    "free_variables",
    "identify",
    "identify_effect",
    "mag",
    "pag",
    "scm_truth",
    "score_graph",
    "shd",
    "sid",
    "table",
    "true_graphs",
]
