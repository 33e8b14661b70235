"""causaltrace: diagnostic environments built from structural causal models.

A domain declares a structural causal model over a panel of segments x time, with intervention
points (root causes). The engine samples a hidden intervention, simulates the factual world and
its counterfactual with the same exogenous noise, and keeps the oracle label apart from what an
analyst sees. This module stays light on purpose: pgmpy, matplotlib, DuckDB and pandas are
imported only by the functions that need them.
"""

from causaltrace.core.version import __version__
from causaltrace.episodes.alerts import (
    AlertExplanation,
    AlertReading,
    explain_alert,
    raised_alert,
    raised_alerts,
)
from causaltrace.episodes.domain import (
    Background,
    BackgroundChange,
    Domain,
    DomainContractError,
    DomainError,
    Monitor,
    available_domains,
    domain_has_monitor,
    load_domain,
)
from causaltrace.errors import (
    AbductionError,
    CausalTraceError,
    CycleError,
    GraphError,
    InterventionError,
    MechanismError,
    NoCounterfactualError,
    NotInvertibleError,
    PanelError,
    SliceError,
)
from causaltrace.model.counterfactuals import abduct_noise, counterfactual_from_observations
from causaltrace.model.intervention_points import (
    CauseInfo,
    InterventionDraw,
    InterventionPoint,
    InterventionPrior,
    candidate_slices,
)
from causaltrace.model.interventions import Do, Intervention, Replace, Scale, Shift
from causaltrace.model.node import (
    Constant,
    Exogenous,
    IntervalInvertibleMechanism,
    InvertibleMechanism,
    Linear,
    Mechanism,
    Node,
)
from causaltrace.model.noise import NoiseSpec, NoiseStreams, NoNoise, Normal, Uniform
from causaltrace.model.panel import Dimension, Panel, TimeAxis
from causaltrace.model.profiles import Decay, Pulse, Ramp, Step, Window
from causaltrace.model.scm import SCM, Independence
from causaltrace.model.simulate import World, Worlds, sample, simulate
from causaltrace.model.slices import WHOLE_PANEL, Slice, enumerate_slices, parse_slice
from causaltrace.structure.identification import (
    Identification,
    NotIdentifiable,
    Projection,
    backdoor_adjustment_sets,
    frontdoor_adjustment_sets,
    id_estimand,
    identify_effect,
    latent_projection,
)

__all__ = [
    "SCM",
    "AbductionError",
    "NotInvertibleError",
    "abduct_noise",
    "counterfactual_from_observations",
    "AlertExplanation",
    "AlertReading",
    "Background",
    "BackgroundChange",
    "CausalTraceError",
    "CauseInfo",
    "Domain",
    "DomainContractError",
    "DomainError",
    "Monitor",
    "available_domains",
    "domain_has_monitor",
    "explain_alert",
    "load_domain",
    "raised_alert",
    "raised_alerts",
    "Constant",
    "CycleError",
    "Decay",
    "Dimension",
    "Do",
    "Exogenous",
    "GraphError",
    "Identification",
    "Independence",
    "backdoor_adjustment_sets",
    "frontdoor_adjustment_sets",
    "identify_effect",
    "id_estimand",
    "latent_projection",
    "NotIdentifiable",
    "Projection",
    "Intervention",
    "InterventionDraw",
    "InterventionError",
    "InterventionPoint",
    "InterventionPrior",
    "IntervalInvertibleMechanism",
    "InvertibleMechanism",
    "Linear",
    "Mechanism",
    "MechanismError",
    "NoCounterfactualError",
    "NoNoise",
    "Node",
    "NoiseSpec",
    "NoiseStreams",
    "Normal",
    "Panel",
    "PanelError",
    "Pulse",
    "Ramp",
    "Replace",
    "Scale",
    "Shift",
    "Slice",
    "SliceError",
    "Step",
    "TimeAxis",
    "Uniform",
    "WHOLE_PANEL",
    "Window",
    "World",
    "Worlds",
    "__version__",
    "candidate_slices",
    "enumerate_slices",
    "parse_slice",
    "sample",
    "simulate",
]
