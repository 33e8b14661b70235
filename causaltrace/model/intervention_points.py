"""Intervention points: the root causes a model offers, each with a prior over its parameters.

A domain declares *what* can go wrong (a named point that builds interventions from a draw) and
*how* it may be drawn (a prior over slices, strength, onset and profile); the engine samples
draws without knowing the domain. The build function is the only place domain knowledge lives.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from numbers import Real
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

    def onset_range(self, n_time: int) -> tuple[int, int]:
        """``onset`` as time indices of a panel of ``n_time`` steps (negative ones counted
        from the end), first and last, inclusive."""
        first, last = (o if o >= 0 else n_time + o for o in self.onset)
        return first, last

    @property
    def has_slice(self) -> bool:
        """Whether any candidate slice is narrower than the whole panel."""
        return any(self.slice_dims)


@dataclass(frozen=True)
class InterventionDraw:
    """One sampled set of parameters for an intervention point (the hidden ground truth).

    ``extras`` holds what the point's prior drew beyond slice, strength, onset and profile
    (:attr:`InterventionPrior.extras`); empty for most points.

    Args:
        point: The intervention point's name.
        slice: The cells the cause touches.
        strength: The drawn strength (the builder decides what it scales).
        window: The onset and profile.
        extras: The prior's extra draws; empty by default.
    """

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
class CauseInfo:
    """What a domain declares about a cause besides its intervention, in the engine's terms.

    - ``group``: the cause's group for metrics and the answer space (e.g. ``"campaign-wide"``;
      empty when the domain declares none).
    - ``confusers``: the causes it is most easily confused with; the verifier rejects an
      episode whose tables one of them explains as well.
    - ``channels``: the channels its signal enters through (e.g. ``volume``, ``mix``, ``rate``),
      for the channel audit; each must be a key (``channel``, or ``channel:detail``) of the
      domain's ``channel_readings``.
    - ``no_signal``: the cause injects nothing (its alerts are false alarms, e.g.
      ``NO_ANOMALY``).
    - ``typical_snr``: the median detection SNR of its accepted episodes at the domain's default
      difficulty, the unit of a difficulty tier's SNR band (None: not measured; read as 1).
    - ``extra``: the domain's own keys, which the engine never reads (e.g. the change-history
      edit a cause makes).

    :meth:`of` is the one conversion from what a domain may declare (a ``CauseInfo``, a mapping
    with these keys, or None)."""

    group: str = ""
    confusers: tuple[str, ...] = ()
    channels: tuple[str, ...] = ()
    no_signal: bool = False
    typical_snr: float | None = None
    extra: Mapping[str, Any] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        if not isinstance(self.group, str):
            raise InterventionError(f"cause info: group must be a string, got {self.group!r}")
        for name in ("confusers", "channels"):
            value = getattr(self, name)
            if isinstance(value, str) or not isinstance(value, Sequence | frozenset | set):
                raise InterventionError(
                    f"cause info: {name} must be a sequence of names, got {value!r}"
                )
            names = tuple(value)
            bad = [v for v in names if not isinstance(v, str) or not v]
            if bad:
                raise InterventionError(f"cause info: {name} holds non-names {bad!r}")
            object.__setattr__(self, name, names)
        if not isinstance(self.no_signal, bool):
            raise InterventionError(f"cause info: no_signal must be a bool, got {self.no_signal!r}")
        snr = self.typical_snr
        if snr is not None:
            if isinstance(snr, bool) or not isinstance(snr, Real) or not snr > 0:
                raise InterventionError(
                    f"cause info: typical_snr must be a positive number or None, got {snr!r}"
                )
            object.__setattr__(self, "typical_snr", float(snr))
        if not isinstance(self.extra, Mapping):
            raise InterventionError(f"cause info: extra must be a mapping, got {self.extra!r}")
        clash = sorted(set(self.extra) & _CAUSE_INFO_FIELDS)
        if clash:
            raise InterventionError(
                f"cause info: extra repeats the typed field(s) {clash}; set them directly"
            )
        object.__setattr__(self, "extra", dict(self.extra))

    @classmethod
    def of(cls, declared: CauseInfo | Mapping[str, Any] | None) -> CauseInfo:
        """``declared`` as a ``CauseInfo``: itself, None as the default, or a mapping whose keys
        are this class's fields (a ``None`` value counts as not declared); any other key goes
        to :attr:`extra`."""
        if isinstance(declared, CauseInfo):
            return declared
        if declared is None:
            return cls()
        if not isinstance(declared, Mapping):
            raise InterventionError(
                f"cause info must be a CauseInfo or a mapping, got {type(declared).__name__}"
            )
        typed = {
            k: v
            for k, v in declared.items()
            if k in _CAUSE_INFO_FIELDS and k != "extra" and v is not None
        }
        extra = {k: v for k, v in declared.items() if k not in _CAUSE_INFO_FIELDS}
        extra.update(declared.get("extra") or {})
        if "no_signal" in typed:
            typed["no_signal"] = bool(typed["no_signal"])
        return cls(**typed, extra=extra)


_CAUSE_INFO_FIELDS = frozenset(f.name for f in fields(CauseInfo))


@dataclass(frozen=True)
class InterventionPoint:
    """A named root cause: a builder from draws to interventions, and a prior over draws.

    ``info`` is what the domain declares about the cause (:class:`CauseInfo`: its group, the
    channels its signal enters through, the causes it is most easily confused with, ...); a
    mapping with the same keys is converted by :meth:`CauseInfo.of`.

    Args:
        name: The cause's name (its label in answers).
        build: Maps a draw to the interventions it stands for.
        prior: What may be drawn; by default the whole panel, strength 1, onset 0, a step.
        description: A one-line description; empty by default.
        info: What the domain declares about the cause; empty by default.

    Raises:
        InterventionError: ``info`` is not a valid :class:`CauseInfo` or mapping.
    """

    name: str
    build: Builder
    prior: InterventionPrior = field(default_factory=InterventionPrior)
    description: str = ""
    info: CauseInfo = field(default_factory=CauseInfo)

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "info", CauseInfo.of(self.info))
        except InterventionError as exc:
            raise InterventionError(f"intervention point {self.name!r}: {exc}") from None

    def slice_orders(self) -> tuple[int, ...]:
        """The slice orders (0 = no slice, 1 = 1D, 2 = 2D, ...) this point's prior can draw."""
        return tuple(sorted({len(d) for d in self.prior.slice_dims}))

    def sample(
        self, rng: np.random.Generator, panel: Panel, slice_order: int | None = None
    ) -> InterventionDraw:
        """Draw a slice, strength, onset and profile from the prior.

        ``slice_order`` restricts the draw to slices with that many conditions (a dataset's
        composition may ask for so many 2D slices); the prior's weights are renormalised.

        Args:
            rng: The generator to draw from (consumed in a fixed order).
            panel: The panel the slice and onset must fit.
            slice_order: Only slices with this many conditions; any order by default.

        Raises:
            InterventionError: No slice of that order, no cell matches, or the onset range is
                outside the panel.
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
        first, last = prior.onset_range(panel.n_time)
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
        """The interventions ``draw`` stands for (this point's builder applied to it).

        Args:
            draw: A draw of this point.

        Raises:
            InterventionError: The draw is of another point.
        """
        if draw.point != self.name:
            raise InterventionError(f"draw for {draw.point!r} given to point {self.name!r}")
        return tuple(self.build(draw))


def candidate_slices(
    panel: Panel, dims: tuple[str, ...], allowed_levels: Mapping[str, tuple[str, ...]]
) -> list[Slice]:
    """Slices on ``dims`` with at least one cell, restricted to ``allowed_levels``.

    Args:
        panel: The panel.
        dims: The dimensions each slice conditions on.
        allowed_levels: Dimension -> the levels a slice may use; a dimension not listed
            allows every level.
    """
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
