"""Channels: which channels (volume, mix, rate, ...) a cause actually moves, against the
channels its intervention point declares (``info.channels``).

Measured from the labels alone, without re-simulating: a label records every KPI's factual and
counterfactual totals after the onset, inside the slice and over the whole panel, and the
domain's optional hook :meth:`causaltrace.Domain.channel_readings` turns one world's totals
into readings keyed ``channel`` or ``channel:detail``. A channel moves in an episode when one of
its readings moves by more than ``threshold`` (relative, factual against counterfactual).
Per cause: the share of episodes in which each channel moved; flags for a declared channel that
moved in at most half of them, and an undeclared one that moved in more than half.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from causaltrace.episodes.domain import Domain


def _side(effects: Mapping[str, Mapping[str, float]], key: str) -> dict[str, float]:
    return {k: float(v[key]) for k, v in effects.items()}


def episode_moves(domain: Domain, label: Mapping) -> dict[str, float] | None:
    """Per channel, the largest relative move of its readings in one episode (None: the domain
    does not measure channels)."""
    inside, overall = label.get("effect_in_slice") or {}, label.get("effect_overall") or {}
    try:
        fact = domain.channel_readings(_side(inside, "factual"), _side(overall, "factual"))
        counter = domain.channel_readings(
            _side(inside, "counterfactual"), _side(overall, "counterfactual")
        )
    except NotImplementedError:
        return None
    moves: dict[str, float] = {}
    for key, value in fact.items():
        base = counter.get(key, np.nan)
        rel = abs(value / base - 1.0) if np.isfinite(base) and abs(base) > 1e-12 else 0.0
        channel = key.split(":", 1)[0]
        moves[channel] = max(moves.get(channel, 0.0), float(rel) if np.isfinite(rel) else 0.0)
    return moves


@dataclass(frozen=True)
class ChannelAudit:
    """Per cause x channel: the share of episodes in which the channel moved."""

    moved: pd.DataFrame  # cause x channel, share of episodes
    episodes: dict[str, int]
    declared: dict[str, tuple[str, ...]]
    threshold: float

    def flags(self) -> list[tuple[str, str, str]]:
        """(cause, channel, problem) for each mismatch between declared and measured."""
        out = []
        for cause in self.moved.index:
            declared = set(self.declared.get(cause, ()))
            for channel in self.moved.columns:
                share = float(self.moved.loc[cause, channel])
                if channel in declared and share <= 0.5:
                    out.append((cause, channel, f"declared, moved in only {share:.0%}"))
                elif channel not in declared and share > 0.5:
                    out.append((cause, channel, f"not declared, moved in {share:.0%}"))
            for channel in sorted(declared - set(self.moved.columns)):
                out.append((cause, channel, "declared, never measured"))
        return out


def channel_audit(
    domain: Domain, labels: Sequence[Mapping], threshold: float = 0.05
) -> ChannelAudit | None:
    """The channel audit of ``labels`` (None if the domain offers no channel readings)."""
    rows: list[dict[str, float]] = []
    causes: list[str] = []
    for label in labels:
        moves = episode_moves(domain, label)
        if moves is None:
            return None
        rows.append({k: float(v > threshold) for k, v in moves.items()})
        causes.append(str(label["cause"]))
    frame = pd.DataFrame(rows).fillna(0.0)
    frame["cause"] = causes
    order = [c for c in domain.scm.intervention_points if c in set(causes)]
    moved = frame.groupby("cause").mean().reindex(order)
    declared = {name: point.info.channels for name, point in domain.scm.intervention_points.items()}
    counts = frame.groupby("cause").size().to_dict()
    return ChannelAudit(moved, {k: int(v) for k, v in counts.items()}, declared, threshold)
