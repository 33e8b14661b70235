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


@dataclass(frozen=True)
class OracleLabel:
    """The ground truth of one episode.

    ``slice`` is the canonical slice text, or ``None`` for causes without a slice (campaign-wide
    and no-signal causes). ``effect_in_slice`` and ``effect_overall`` map KPI name to its
    factual/counterfactual totals after the onset, inside the slice and over the whole panel.
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

    @property
    def slice_order(self) -> int:
        """0 for no slice, 1 for a 1D slice, 2 for a 2D slice."""
        return 0 if not self.slice else self.slice.count("&") + 1

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> OracleLabel:
        data = dict(data)
        for key in ("effect_in_slice", "effect_overall"):
            data[key] = {k: KpiEffect(**v) for k, v in (data.get(key) or {}).items()}
        return cls(**data)
