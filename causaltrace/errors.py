"""Exceptions raised by the engine, in two families.

- :class:`CausalTraceError`: the user's input is wrong (a cyclic graph, an unknown node, a
  malformed config or answer, a damaged file). The commands print one line and exit with
  status 2. Every such error names the culprit (a node, a dimension, a level, a config key) so
  that a user reading it from deep inside a generation run knows what to fix.
- :class:`RunFailure`: the input was fine but the run could not complete (a model or
  environment server that failed, a remote session that was lost, a replay that diverged). The
  commands print one line and exit with status 1.

Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations


class CausalTraceError(Exception):
    """Base class of every error the engine raises on bad input (exit status 2)."""


class RunFailure(Exception):
    """The run could not complete for a reason outside the user's input (exit status 1); the
    message says why."""


class GraphError(CausalTraceError):
    """The causal graph is malformed: a cycle, an unknown parent, a duplicate node."""


class CycleError(GraphError):
    """The graph has a directed cycle; ``cycle`` lists its nodes in order."""

    def __init__(self, cycle: list[str]):
        self.cycle = list(cycle)
        path = " -> ".join([*self.cycle, self.cycle[0]])
        super().__init__(f"the causal graph has a cycle: {path}")


class MechanismError(CausalTraceError):
    """A mechanism raised, or returned an array of the wrong shape or dtype."""


class PanelError(CausalTraceError):
    """A panel, dimension or level is malformed or unknown."""


class SliceError(PanelError):
    """A slice names an unknown dimension or level, or is malformed."""


class InterventionError(CausalTraceError):
    """An intervention targets an unknown node or has invalid parameters."""


class NoCounterfactualError(CausalTraceError):
    """A counterfactual quantity was asked of worlds simulated with ``counterfactual=False``."""


class AbductionError(CausalTraceError):
    """Exogenous noise cannot be recovered from the given observations (see
    :mod:`causaltrace.model.counterfactuals`): a missing or misshapen observation, a count whose
    counterfactual the observation does not pin down and no ``rng`` to draw it, or an abducted
    noise that does not reproduce the observation."""


class NotInvertibleError(AbductionError):
    """A node's mechanism declares no inverse in its noise (it is neither an
    ``InvertibleMechanism`` nor an ``IntervalInvertibleMechanism``),
    so its noise, and hence its counterfactual, is not determined by the observations."""
