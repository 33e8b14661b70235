"""Intervention points: the root causes a model offers, each with a prior over its parameters.

A domain declares *what* can go wrong (a named point that builds interventions from a draw) and
*how* it may be drawn (a prior over slices, strength, onset and profile); the engine samples
draws without knowing the domain. The build function is the only place domain knowledge lives.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from causaltrace.errors import InterventionError
from causaltrace.model.interventions import Intervention
from causaltrace.model.panel import Panel
from causaltrace.model.profiles import Profile, Step, Window, profile_name
from causaltrace.model.slices import Slice, enumerate_slices

ExtrasSampler = Callable[[np.random.Generator, Panel, Slice], Mapping[str, Any]]


@dataclass(frozen=True)
class InterventionPrior:
    """Where, how strongly, when and how an intervention point may act.

    - ``slice_dims``: candidate dimension sets, e.g. ``((),)`` for "no slice" or
      ``(("device",), ("geo",), ("device", "geo"))``; chosen with ``slice_dim_weights``.
    - ``allowed_levels``: optional restriction of the levels a slice may use, per dimension.
    - ``strength``: ``(low, high)``; drawn uniformly, or log-uniformly with ``log_strength``.
    - ``onset``: ``(first, last)`` time indices, inclusive; negative counts from the end.
    - ``profiles`` and ``profile_weights``: the onset profiles and their probabilities.
    - ``extras``: an optional sampler of further parameters a cause needs beyond slice,
      strength, onset and profile (e.g. which campaigns a budget cut reaches), called last with
      the same generator and the slice, so a point without one draws what it always drew. Its
      values must be plain JSON data (they are recorded in the label).
    """

    slice_dims: tuple[tuple[str, ...], ...] = ((),)
    slice_dim_weights: tuple[float, ...] | None = None
    allowed_levels: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    strength: tuple[float, float] = (1.0, 1.0)
    log_strength: bool = False
    onset: tuple[int, int] = (0, 0)
    profiles: tuple[Profile, ...] = (Step(),)
    profile_weights: tuple[float, ...] | None = None
    extras: ExtrasSampler | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "slice_dims", tuple(tuple(d) for d in self.slice_dims))
        if not self.slice_dims:
            raise InterventionError("prior.slice_dims is empty: use ((),) for 'no slice'")
        for name, weights, options in (
            ("slice_dim_weights", self.slice_dim_weights, self.slice_dims),
            ("profile_weights", self.profile_weights, self.profiles),
        ):
            if weights is not None and (
                len(weights) != len(options) or min(weights) < 0 or sum(weights) <= 0
            ):
                raise InterventionError(f"prior.{name} must be {len(options)} non-negative weights")
        lo, hi = self.strength
        if lo > hi or (self.log_strength and lo <= 0):
            raise InterventionError(f"prior.strength {self.strength} is not a valid range")

    @property
    def has_slice(self) -> bool:
        """Whether any candidate slice is narrower than the whole panel."""
        return any(self.slice_dims)


@dataclass(frozen=True)
class InterventionDraw:
    """One sampled set of parameters for an intervention point (the hidden ground truth).

    ``extras`` holds what the point's prior drew beyond slice, strength, onset and profile
    (:attr:`InterventionPrior.extras`); empty for most points."""

    point: str
    slice: Slice
    strength: float
    window: Window
    extras: Mapping[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        profile = self.window.profile
        data = {
            "point": self.point,
            "slice": self.slice.canonical() or None,
            "strength": float(self.strength),
            "onset": int(self.window.onset),
            "end": None if self.window.end is None else int(self.window.end),
            "profile": profile_name(profile),
            "profile_params": {k: v for k, v in vars(profile).items()},
        }
        if self.extras:  # (draws without extras keep the form they had before)
            data["extras"] = dict(self.extras)
        return data


Builder = Callable[[InterventionDraw], Sequence[Intervention]]


@dataclass(frozen=True)
class InterventionPoint:
    """A named root cause: a builder from draws to interventions, and a prior over draws.

    ``metadata`` carries what the domain wants to declare about the cause (its group, the
    channels its signal enters through, the causes it is most easily confused with).
    """

    name: str
    build: Builder
    prior: InterventionPrior = field(default_factory=InterventionPrior)
    description: str = ""
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def slice_orders(self) -> tuple[int, ...]:
        """The slice orders (0 = no slice, 1 = 1D, 2 = 2D, ...) this point's prior can draw."""
        return tuple(sorted({len(d) for d in self.prior.slice_dims}))

    def sample(
        self, rng: np.random.Generator, panel: Panel, slice_order: int | None = None
    ) -> InterventionDraw:
        """Draw a slice, strength, onset and profile from the prior.

        ``slice_order`` restricts the draw to slices with that many conditions (a dataset's
        composition may ask for so many 2D slices); the prior's weights are renormalised.
        """
        prior = self.prior
        options = list(range(len(prior.slice_dims)))
        if slice_order is not None:
            options = [i for i in options if len(prior.slice_dims[i]) == slice_order]
            if not options:
                raise InterventionError(
                    f"intervention point {self.name!r} has no {slice_order}D slices; its "
                    f"prior draws orders {self.slice_orders()}"
                )
        weights = (
            None
            if prior.slice_dim_weights is None
            else [prior.slice_dim_weights[i] for i in options]
        )
        dims = prior.slice_dims[options[_choice(rng, len(options), weights)]]
        candidates = candidate_slices(panel, dims, prior.allowed_levels)
        if not candidates:
            raise InterventionError(
                f"intervention point {self.name!r}: no cell of the panel matches slice dims "
                f"{dims} with allowed levels {dict(prior.allowed_levels)}"
            )
        sl = candidates[int(rng.integers(len(candidates)))]
        lo, hi = prior.strength
        if prior.log_strength:
            strength = float(np.exp(rng.uniform(np.log(lo), np.log(hi))))
        else:
            strength = float(rng.uniform(lo, hi)) if hi > lo else float(lo)
        first, last = (o if o >= 0 else panel.n_time + o for o in prior.onset)
        if not 0 <= first <= last < panel.n_time:
            raise InterventionError(
                f"intervention point {self.name!r}: onset range {prior.onset} is outside the "
                f"panel's {panel.n_time} time steps"
            )
        onset = int(rng.integers(first, last + 1))
        profile = prior.profiles[_choice(rng, len(prior.profiles), prior.profile_weights)]
        extras = {} if prior.extras is None else dict(prior.extras(rng, panel, sl))
        return InterventionDraw(
            self.name, sl, strength, Window(onset=onset, profile=profile), extras
        )

    def interventions(self, draw: InterventionDraw) -> tuple[Intervention, ...]:
        if draw.point != self.name:
            raise InterventionError(f"draw for {draw.point!r} given to point {self.name!r}")
        return tuple(self.build(draw))


def candidate_slices(
    panel: Panel, dims: tuple[str, ...], allowed_levels: Mapping[str, tuple[str, ...]]
) -> list[Slice]:
    """Slices on ``dims`` with at least one cell, restricted to ``allowed_levels``."""
    out = []
    for sl in enumerate_slices(panel, dims):
        if all(level in allowed_levels.get(d, (level,)) for d, level in sl.conditions):
            out.append(sl)
    return out


def _choice(rng: np.random.Generator, n: int, weights: Sequence[float] | None) -> int:
    if n == 1:
        return 0
    if weights is None:
        return int(rng.integers(n))
    p = np.asarray(weights, dtype=np.float64)
    return int(rng.choice(n, p=p / p.sum()))
