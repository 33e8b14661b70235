"""Estimands as expressions: a small tree of probability terms, sums, products and fractions.

The ID algorithm (:mod:`causaltrace.structure.id_algorithm`) builds one;
:mod:`causaltrace.structure.evaluation` computes its value on a discrete joint distribution;
``str()`` renders the text form identification has always printed:

- ``Probability(("A", "B"), ("C",))``, text ``P(A,B | C)``: the observational ``P(a, b | c)``;
- ``Probability(("A",), ("C",), source=d)``, text ``[e](A | C)``: the conditional of the
  derived distribution ``d`` (``[e]``, over its domain ``D``): ``e`` summed over ``D`` except
  ``A, C``, divided by ``e`` summed over ``D`` except ``C``;
- ``Distribution(e, domain)``, text ``[e]``: ``e`` read as a distribution over ``domain``;
- ``Sum(("A",), e)``, text ``sum_{A} [e]``: ``e`` summed over every value of ``A``;
- ``Product((e, f))``, text ``e f`` (``(e) (f)`` when ``grouped``): the product;
- ``Fraction(e, f)``, text ``(e) / (f)``: the ratio.

``Distribution`` marks the distributions ID derives as it recurses (its line 2 marginalizes the
non-ancestors of the outcome, its line 7 restricts to one c-component); a ``Probability`` with a
``source`` conditions such a distribution, as ``P`` conditions the observational one.

**Free variables** (:func:`free_variables`): the values the estimand is a function of. For
``P(y | do(x))`` they are the outcome's and the treatment's, and also any node ID's line 3 adds
to the treatment (a node that does not reach the outcome once the treatment is fixed: acting
on it too changes nothing). Such a node is fixed at one value like a treatment; on a model
that the graph describes, every value gives the same answer (the napkin estimand is free in
``W2``). A conditional effect (IDC) adds the conditioning nodes.
"""

from __future__ import annotations

from dataclasses import dataclass


class Estimand:
    """Base of the expression nodes (frozen dataclasses: they compare and hash)."""

    def __str__(self) -> str:  # pragma: no cover - every node overrides it
        raise NotImplementedError

    @property
    def free_variables(self) -> tuple[str, ...]:
        """The variables the value depends on, in order of first appearance."""
        return free_variables(self)


@dataclass(frozen=True)
class Distribution(Estimand):
    """``body`` read as a distribution over ``domain`` (rendered ``[body]``).

    Args:
        body: The expression (a function of ``domain`` and possibly of fixed variables).
        domain: The variables it is a distribution over; conditioning sums over these only,
            so fixed variables (a treatment's value) stay fixed.
    """

    body: Estimand
    domain: tuple[str, ...]

    def __str__(self) -> str:
        return f"[{self.body}]"


@dataclass(frozen=True)
class Probability(Estimand):
    """``P(variables | given)`` of the observational joint, or of ``source`` when given.

    Args:
        variables: The variables whose probability it is.
        given: The conditioning variables (none by default).
        source: A derived distribution to condition instead of the observational ``P``.
    """

    variables: tuple[str, ...]
    given: tuple[str, ...] = ()
    source: Distribution | None = None

    def __str__(self) -> str:
        head = "P" if self.source is None else str(self.source)
        inside = ",".join(self.variables)
        if self.given:
            inside += " | " + ",".join(self.given)
        return f"{head}({inside})"


@dataclass(frozen=True)
class Sum(Estimand):
    """``body`` summed over every value of ``over`` (rendered ``sum_{A,B} [body]``).

    Args:
        over: The variables marginalized; an empty tuple leaves ``body`` as it is.
        body: The summand.
    """

    over: tuple[str, ...]
    body: Estimand

    def __str__(self) -> str:
        if not self.over:
            return str(self.body)
        return f"sum_{{{','.join(self.over)}}} [{self.body}]"


@dataclass(frozen=True)
class Product(Estimand):
    """The product of ``terms`` (rendered side by side).

    Args:
        terms: The factors.
        grouped: Render each factor in parentheses (ID's line 4: one factor per c-component),
            so a factor that is itself a product reads as one.
    """

    terms: tuple[Estimand, ...]
    grouped: bool = False

    def __str__(self) -> str:
        if self.grouped:
            return " ".join(f"({t})" for t in self.terms)
        return " ".join(str(t) for t in self.terms)


@dataclass(frozen=True)
class Fraction(Estimand):
    """``numerator / denominator`` (IDC's normalization: ``P'(y, z) / sum_y P'(y, z)``).

    Args:
        numerator: The expression divided.
        denominator: The expression dividing.
    """

    numerator: Estimand
    denominator: Estimand

    def __str__(self) -> str:
        return f"({self.numerator}) / ({self.denominator})"


def summed(over: tuple[str, ...], body: Estimand) -> Estimand:
    """``Sum(over, body)``, or ``body`` itself when ``over`` is empty (no node for a no-op)."""
    return Sum(over, body) if over else body


def product(terms: tuple[Estimand, ...]) -> Estimand:
    """``Product(terms)``, or the one term itself."""
    return terms[0] if len(terms) == 1 else Product(terms)


def free_variables(expr: Estimand) -> tuple[str, ...]:
    """The variables ``expr``'s value depends on, in order of first appearance.

    A derived distribution's fixed variables (those of its body outside its domain) stay free
    when it is conditioned; summed variables are bound.

    Args:
        expr: The estimand.
    """
    return tuple(dict.fromkeys(_free(expr)))


def _free(expr: Estimand) -> list[str]:
    if isinstance(expr, Probability):
        out = [*expr.variables, *expr.given]
        if expr.source is not None:
            domain = set(expr.source.domain)
            out += [v for v in _free(expr.source.body) if v not in domain]
        return out
    if isinstance(expr, Distribution):
        return _free(expr.body)
    if isinstance(expr, Sum):
        bound = set(expr.over)
        return [v for v in _free(expr.body) if v not in bound]
    if isinstance(expr, Product):
        return [v for t in expr.terms for v in _free(t)]
    if isinstance(expr, Fraction):
        return _free(expr.numerator) + _free(expr.denominator)
    raise TypeError(f"not an estimand: {type(expr).__name__}")
