"""The value of an estimand on a discrete joint distribution of the observed variables.

An :class:`~causaltrace.structure.estimands.Estimand` is a function of its free variables and of
the observational ``P(V)``. Here ``P(V)`` is a :class:`JointDistribution` (a probability table
with one axis per variable: built directly, from a pandas DataFrame of discrete observations
(empirical frequencies), or from a pgmpy ``DiscreteFactor``), and every node of the expression
becomes a :class:`Factor`, a numpy array with one axis per variable it depends on; products and
ratios broadcast, sums reduce axes. :func:`table` returns the estimand over all values of its
free variables, :func:`evaluate` at one.

A conditioning event of probability zero makes a ratio ``0 / 0``: the value there is ``nan``
(positivity fails, and the estimand does not determine the effect at those values).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from causaltrace.errors import CausalTraceError
from causaltrace.structure.estimands import (
    Distribution,
    Estimand,
    Fraction,
    Probability,
    Product,
    Sum,
)

# |sum - 1| allowed for a probability table: float64 sums of up to ~1e6 cells are off by a few
# 1e-12 at most; 1e-9 only catches tables that are not normalized at all.
_NORMALIZED = 1e-9


@dataclass(frozen=True)
class Factor:
    """A non-negative function of discrete variables: ``values[i, j, ...]`` at the ``i``-th
    state of ``variables[0]``, the ``j``-th of ``variables[1]``, ...

    Args:
        variables: One name per axis.
        values: The array (read it with the joint's ``states`` for the values of each axis).
    """

    variables: tuple[str, ...]
    values: np.ndarray


@dataclass(frozen=True)
class JointDistribution:
    """A probability table over discrete variables.

    Args:
        variables: The variables, one axis each.
        states: For each variable, its values in axis order (what :func:`evaluate` takes).
        table: Probabilities, shape ``(len(states[0]), len(states[1]), ...)``, summing to 1.

    Raises:
        CausalTraceError: Shapes that disagree, negative entries, or a sum other than 1.
    """

    variables: tuple[str, ...]
    states: tuple[tuple[object, ...], ...]
    table: np.ndarray

    def __post_init__(self) -> None:
        table = np.asarray(self.table, dtype=np.float64)
        shape = tuple(len(s) for s in self.states)
        if len(self.states) != len(self.variables) or table.shape != shape:
            raise CausalTraceError(
                f"joint distribution: {len(self.variables)} variables with states of sizes "
                f"{shape}, but a table of shape {table.shape}"
            )
        if len(set(self.variables)) != len(self.variables):
            raise CausalTraceError(f"joint distribution: a variable twice in {self.variables}")
        if (table < 0).any() or abs(table.sum() - 1.0) > _NORMALIZED:
            raise CausalTraceError(
                f"joint distribution: probabilities must be >= 0 and sum to 1 (sum {table.sum()})"
            )
        table.setflags(write=False)
        object.__setattr__(self, "table", table)

    @classmethod
    def from_frame(cls, frame, columns: Sequence[str] | None = None) -> JointDistribution:
        """Empirical frequencies of the rows of a pandas DataFrame of discrete values.

        Each distinct value of a column is a state (sorted); a combination never observed has
        probability 0.

        Args:
            frame: The observations, one row each.
            columns: The variables (default: every column).
        """
        names = tuple(frame.columns if columns is None else columns)
        codes, states = [], []
        for name in names:
            levels, code = np.unique(np.asarray(frame[name]), return_inverse=True)
            codes.append(code.ravel())
            states.append(tuple(levels.tolist()))
        shape = tuple(len(s) for s in states)
        flat = np.ravel_multi_index(codes, shape) if names else np.zeros(len(frame), np.int64)
        counts = np.bincount(flat, minlength=int(np.prod(shape))).reshape(shape)
        return cls(names, tuple(states), counts / max(len(frame), 1))

    @classmethod
    def from_factor(cls, factor) -> JointDistribution:
        """A pgmpy ``DiscreteFactor`` over the observed variables (e.g. a joint query of
        ``VariableElimination``), read by its attributes (pgmpy is not imported).

        Args:
            factor: Has ``variables``, ``values`` and ``state_names``.
        """
        names = tuple(factor.variables)
        states = tuple(tuple(factor.state_names[v]) for v in names)
        values = np.asarray(factor.values, dtype=np.float64)
        return cls(names, states, values / values.sum())

    def marginal(self, variables: Sequence[str]) -> Factor:
        """``P(variables)``, axes in the order given.

        Args:
            variables: Variables of the joint, each once.
        """
        self._require(variables, "marginal")
        keep = [self.variables.index(v) for v in variables]
        drop = tuple(i for i in range(len(self.variables)) if i not in keep)
        summed = self.table.sum(axis=drop)
        order = sorted(keep)
        return Factor(tuple(variables), np.transpose(summed, [order.index(i) for i in keep]))

    def cardinality(self, variable: str) -> int:
        self._require([variable], "cardinality")
        return len(self.states[self.variables.index(variable)])

    def _require(self, variables: Sequence[str], what: str) -> None:
        unknown = [v for v in variables if v not in self.variables]
        if unknown:
            raise CausalTraceError(
                f"{what}: variables {unknown} are not in the joint distribution "
                f"({', '.join(self.variables)})"
            )


def table(expr: Estimand, joint: JointDistribution) -> Factor:
    """The estimand at every value of its free variables.

    Args:
        expr: The estimand (e.g. ``identify_effect(...).expression``).
        joint: The observational distribution of (at least) the variables it names.

    Raises:
        CausalTraceError: The estimand names a variable the joint does not have.
    """
    return _factor(expr, joint)


def evaluate(expr: Estimand, joint: JointDistribution, values: Mapping[str, object]) -> float:
    """The estimand's value at ``values`` (a state of each free variable).

    Args:
        expr: The estimand.
        joint: The observational distribution.
        values: A value for every free variable (:attr:`Estimand.free_variables`): treatment,
            outcome, conditioning set, and the nodes ID's line 3 fixed; values of other
            variables of the joint are ignored.

    Raises:
        CausalTraceError: A free variable without a value, a name the joint does not have, or
            a value that is not one of the variable's states.
    """
    factor = _factor(expr, joint)
    joint._require(list(values), "evaluate")
    missing = [v for v in factor.variables if v not in values]
    if missing:
        raise CausalTraceError(f"evaluate: no value for the free variable(s) {missing} of {expr}")
    index = []
    for v in factor.variables:
        states = joint.states[joint.variables.index(v)]
        if values[v] not in states:
            raise CausalTraceError(f"evaluate: {values[v]!r} is not a state of {v!r} {states}")
        index.append(states.index(values[v]))
    return float(factor.values[tuple(index)])


def _factor(expr: Estimand, joint: JointDistribution) -> Factor:
    if isinstance(expr, Probability):
        return _probability(expr, joint)
    if isinstance(expr, Distribution):
        return _factor(expr.body, joint)
    if isinstance(expr, Sum):
        return _sum_out(_factor(expr.body, joint), expr.over, joint)
    if isinstance(expr, Product):
        return _multiply([_factor(t, joint) for t in expr.terms])
    if isinstance(expr, Fraction):
        return _divide(_factor(expr.numerator, joint), _factor(expr.denominator, joint))
    raise TypeError(f"not an estimand: {type(expr).__name__}")


def _probability(expr: Probability, joint: JointDistribution) -> Factor:
    both = tuple(dict.fromkeys((*expr.variables, *expr.given)))
    if expr.source is None:
        numerator = joint.marginal(both)
    else:  # condition a derived distribution: sum its domain except the named variables
        body = _factor(expr.source.body, joint)
        free = set(both)
        numerator = _sum_out(
            body, [d for d in expr.source.domain if d not in free and d in body.variables], joint
        )
    return _divide(numerator, _sum_out(numerator, expr.variables, joint))


def _sum_out(factor: Factor, over: Sequence[str], joint: JointDistribution) -> Factor:
    """Sum over every value of ``over``; a variable the factor does not depend on contributes
    its number of states (the sum of a constant)."""
    values, names = factor.values, list(factor.variables)
    for v in over:
        if v in names:
            values = values.sum(axis=names.index(v))
            names.remove(v)
        else:
            values = values * joint.cardinality(v)
    return Factor(tuple(names), values)


def _aligned(factor: Factor, order: tuple[str, ...]) -> np.ndarray:
    """The factor's array with one axis per name of ``order`` (size 1 where it is constant)."""
    present = [v for v in order if v in factor.variables]
    values = np.transpose(factor.values, [factor.variables.index(v) for v in present])
    return values.reshape([values.shape[present.index(v)] if v in present else 1 for v in order])


def _multiply(factors: list[Factor]) -> Factor:
    order = tuple(dict.fromkeys(v for f in factors for v in f.variables))
    out = np.ones([1] * len(order))
    for f in factors:
        out = out * _aligned(f, order)
    return Factor(order, out)


def _divide(numerator: Factor, denominator: Factor) -> Factor:
    order = tuple(dict.fromkeys((*numerator.variables, *denominator.variables)))
    with np.errstate(divide="ignore", invalid="ignore"):
        out = _aligned(numerator, order) / _aligned(denominator, order)
    return Factor(order, out)
