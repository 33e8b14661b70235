"""Episodes: a hidden cause drawn, both worlds simulated, the reports rendered, the truth kept.

An :class:`EpisodeSpec` is everything needed to rebuild an episode bit for bit (dataset seed,
split, index, accepted attempt, the cause and slice order the split's schedule assigned). It
determines the label, so it is stored with the labels, never with what the agent sees.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from causaltrace.alerts import AlertExplanation, explain_alert
from causaltrace.difficulty import draw_record
from causaltrace.domain import Background, Domain, domain_has_monitor
from causaltrace.intervention_points import InterventionDraw
from causaltrace.labels import KpiEffect, OracleLabel
from causaltrace.seeds import episode_streams
from causaltrace.simulate import Worlds

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd


@dataclass(frozen=True)
class EpisodeSpec:
    """The recipe of one episode (secret: with it, anyone can rebuild the label)."""

    episode_id: str
    split: str
    index: int
    dataset_seed: int
    cause: str
    slice_order: int | None
    attempt: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EpisodeSpec:
        return cls(**dict(data))

    def with_attempt(self, attempt: int) -> EpisodeSpec:
        return EpisodeSpec(
            self.episode_id,
            self.split,
            self.index,
            self.dataset_seed,
            self.cause,
            self.slice_order,
            attempt,
        )


@dataclass(frozen=True)
class Episode:
    """A built episode: the agent-visible part (``tables``, ``prompt``) and the hidden part
    (``spec``, ``draw``, ``worlds``, ``label``, ``alert``). Only the first two may reach an
    agent. ``alert`` says how much of the prompt's alert the cause explains (None if the domain
    has no monitor or its tables raise no alert)."""

    spec: EpisodeSpec
    draw: InterventionDraw
    background: Background
    worlds: Worlds
    tables: dict[str, pd.DataFrame]
    prompt: str
    label: OracleLabel
    alert: AlertExplanation | None = None


def episode_id(split: str, index: int) -> str:
    """Public episode id: the split and index, nothing about the cause."""
    return f"{split}-{index:06d}"


def _simulate(
    domain: Domain, spec: EpisodeSpec, draw: InterventionDraw | None, counterfactual: bool
):
    """The draw, background, worlds and report stream of one attempt (deterministic in spec)."""
    scm = domain.scm
    streams = episode_streams(spec.dataset_seed, spec.split, spec.index, spec.attempt)
    sampled = scm.point(spec.cause).sample(streams.draw, scm.panel, spec.slice_order)
    draw = sampled if draw is None else draw
    background = domain.background(streams.background)
    base = scm.intervene(background.interventions) if background.interventions else scm
    worlds = base.simulate(
        scm.interventions_for(draw), seed=streams.noise, counterfactual=counterfactual
    )
    return draw, background, worlds, streams.render


def build_episode(
    domain: Domain, spec: EpisodeSpec, draw: InterventionDraw | None = None
) -> Episode:
    """Draw, simulate, render and label one attempt of an episode (deterministic in ``spec``).

    ``draw`` replaces the sampled draw (for tests and ablations that need a given slice or
    strength); every other random stream is the spec's.
    """
    draw, background, worlds, render_rng = _simulate(domain, spec, draw, counterfactual=True)
    tables = domain.render(worlds.factual, draw, background, render_rng)
    prompt = domain.task_prompt(tables)
    alert = explain_episode_alert(domain, tables, worlds)
    label = make_label(domain, spec, draw, worlds, alert)
    return Episode(spec, draw, background, worlds, tables, prompt, label, alert)


def explain_episode_alert(
    domain: Domain, tables: Mapping[str, pd.DataFrame], worlds: Worlds
) -> AlertExplanation | None:
    """The monitor read on the agent's tables against the same rule on the counterfactual
    world; None if the domain has no monitor or the tables raise no alert."""
    if not domain_has_monitor(domain):
        return None
    counterfactual = domain.monitor_tables(worlds.counterfactual)
    return explain_alert(domain.alert_readings(tables), domain.alert_readings(counterfactual))


def build_visible(domain: Domain, spec: EpisodeSpec) -> tuple[dict[str, pd.DataFrame], str]:
    """Only what the agent sees of an episode (its tables and prompt), the same bytes as
    :func:`build_episode` gives, without the counterfactual world or the label."""
    draw, background, worlds, render_rng = _simulate(domain, spec, None, counterfactual=False)
    tables = domain.render(worlds.factual, draw, background, render_rng)
    return tables, domain.task_prompt(tables)


def make_label(
    domain: Domain,
    spec: EpisodeSpec,
    draw: InterventionDraw,
    worlds: Worlds,
    alert: AlertExplanation | None = None,
) -> OracleLabel:
    """The oracle label: cause, group, slice, onset, strength and counterfactual KPI effects;
    ``extra["alert"]`` records how much of the alert the cause explains (None without one) and
    ``extra["difficulty"]`` the domain's difficulty knobs and where the draw fell (generation
    adds what the verifier measured, :func:`causaltrace.generation.with_measured_difficulty`)."""
    panel = domain.scm.panel
    onset = draw.window.onset
    inside = draw.slice.mask(panel)
    everywhere = np.ones(panel.n_cells, dtype=bool)

    def effects(mask: np.ndarray) -> dict[str, KpiEffect]:
        fact = domain.kpi_totals(worlds.factual, mask, onset)
        counter = domain.kpi_totals(worlds.counterfactual, mask, onset)
        return {k: KpiEffect(float(fact[k]), float(counter[k])) for k in fact}

    info = draw.as_dict()
    return OracleLabel(
        episode_id=spec.episode_id,
        cause=draw.point,
        group=domain.cause_group(draw.point),
        slice=draw.slice.canonical() or None,
        onset=onset,
        onset_time=str(panel.time.values[onset]),
        strength=float(draw.strength),
        profile=info["profile"],
        effect_in_slice=effects(inside),
        effect_overall=effects(everywhere),
        extra={
            "profile_params": info["profile_params"],
            "alert": None if alert is None else alert.to_dict(),
            "difficulty": {
                "tier": domain.difficulty.tier,
                "knobs": domain.difficulty.knobs(),
                "draw": draw_record(draw, panel.n_time),
            },
        },
    )
