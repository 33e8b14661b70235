"""Oracle labels: the hidden truth of an episode, kept apart from what the agent sees.

A label is written by the episode sampler and read by reward functions and metrics; it is never
rendered into agent-visible tables, prompts or tool results.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class KpiEffect:
    """A KPI's factual and counterfactual totals over the post-onset window."""

    factual: float
    counterfactual: float

    @property
    def effect(self) -> float:
        """Factual minus counterfactual: what the cause did (negative: it lost that much)."""
        return self.factual - self.counterfactual

    @property
    def relative(self) -> float:
        return self.effect / self.counterfactual if self.counterfactual else 0.0


def _effects(data: Mapping[str, Any] | None) -> dict[str, KpiEffect]:
    return {k: v if isinstance(v, KpiEffect) else KpiEffect(**v) for k, v in (data or {}).items()}


@dataclass(frozen=True)
class ConcurrentCause:
    """A further root cause of a concurrent episode (the label's ``also``).

    The fields mean what the label's own fields of the same name mean, for this cause. Its
    effects are the factual world (both causes) against the counterfactual (neither), read on
    *this* cause's slice and from *its* onset: where the two causes' slices overlap, that is the
    pair's effect, not this cause's alone (no world with one cause only is simulated).
    """

    cause: str
    group: str
    slice: str | None
    onset: int
    onset_time: str | None
    strength: float
    profile: str
    effect_in_slice: Mapping[str, KpiEffect] = field(default_factory=dict)
    effect_overall: Mapping[str, KpiEffect] = field(default_factory=dict)
    extra: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ConcurrentCause:
        data = dict(data)
        for key in ("effect_in_slice", "effect_overall"):
            data[key] = _effects(data.get(key))
        return cls(**data)


@dataclass(frozen=True)
class OracleLabel:
    """The ground truth of one episode.

    ``slice`` is the canonical slice text, or ``None`` for causes without a slice (campaign-wide
    and no-signal causes). ``effect_in_slice`` and ``effect_overall`` map KPI name to its
    factual/counterfactual totals after the onset, inside the slice and over the whole panel.

    A concurrent episode (two simultaneous root causes) keeps its first cause in these fields
    and lists the others in ``also`` (:class:`ConcurrentCause`); :attr:`causes` is the set of
    ``(cause, slice)`` pairs an answer is scored against. Its effects are of the pair: the
    factual world has every cause, the counterfactual none. A single-cause label has no
    ``also`` (and its dictionary form has no such key, as before concurrent episodes).
    """

    episode_id: str
    cause: str
    group: str
    slice: str | None
    onset: int
    onset_time: str | None
    strength: float
    profile: str
    effect_in_slice: Mapping[str, KpiEffect] = field(default_factory=dict)
    effect_overall: Mapping[str, KpiEffect] = field(default_factory=dict)
    extra: Mapping[str, Any] = field(default_factory=dict)
    also: tuple[ConcurrentCause, ...] = ()

    @property
    def causes(self) -> tuple[tuple[str, str | None], ...]:
        """The true ``(cause, slice)`` pairs, the first cause first (one pair for a
        single-cause episode)."""
        return ((self.cause, self.slice), *((c.cause, c.slice) for c in self.also))

    @property
    def concurrent(self) -> bool:
        return bool(self.also)

    @property
    def slice_order(self) -> int:
        """0 for no slice, 1 for a 1D slice, 2 for a 2D slice."""
        return 0 if not self.slice else self.slice.count("&") + 1

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        if not self.also:
            del data["also"]  # single-cause labels keep the form they had before
        return data

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> OracleLabel:
        data = dict(data)
        for key in ("effect_in_slice", "effect_overall"):
            data[key] = _effects(data.get(key))
        data["also"] = tuple(
            c if isinstance(c, ConcurrentCause) else ConcurrentCause.from_dict(c)
            for c in data.get("also") or ()
        )
        return cls(**data)
