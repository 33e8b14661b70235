"""Episodes: a hidden cause drawn, both worlds simulated, the reports rendered, the truth kept.

An :class:`EpisodeSpec` is everything needed to rebuild an episode bit for bit (dataset seed,
split, index, accepted attempt, the cause and slice order the split's schedule assigned, and a
concurrent episode's further causes). It determines the label, so it is stored with the labels,
never with what the agent sees.

A concurrent episode (``spec.also``) draws each further cause's slice, strength, onset and
profile from its own stream (:func:`causaltrace.core.seeds.concurrent_stream`) and applies every
cause's interventions in the factual world; the counterfactual has none of them. A single-cause
episode draws nothing from that stream, so its bytes are what they were before concurrent
episodes existed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from causaltrace.core.seeds import concurrent_stream, episode_streams
from causaltrace.episodes.alerts import AlertExplanation, explain_alert, raised_alert
from causaltrace.episodes.difficulty import draw_record
from causaltrace.episodes.domain import Background, Domain, domain_has_monitor
from causaltrace.episodes.labels import ConcurrentCause, KpiEffect, OracleLabel
from causaltrace.model.intervention_points import InterventionDraw
from causaltrace.model.simulate import Worlds

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
    also: tuple[str, ...] = ()  # a concurrent episode's further causes (their priors decide)

    def __post_init__(self) -> None:
        object.__setattr__(self, "also", tuple(self.also))

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        if not self.also:
            del data["also"]  # single-cause specs keep the form they had before
        else:
            data["also"] = list(self.also)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EpisodeSpec:
        return cls(**dict(data))

    @property
    def causes(self) -> tuple[str, ...]:
        return (self.cause, *self.also)

    def with_attempt(self, attempt: int) -> EpisodeSpec:
        return EpisodeSpec(
            self.episode_id,
            self.split,
            self.index,
            self.dataset_seed,
            self.cause,
            self.slice_order,
            attempt,
            self.also,
        )


@dataclass(frozen=True)
class Episode:
    """A built episode: the agent-visible part (``tables``, ``prompt``) and the hidden part
    (``spec``, ``draw``, ``worlds``, ``label``, ``alert``, ``also``). Only the first two may
    reach an agent. ``alert`` says how much of the prompt's alert the cause (or the causes of a
    concurrent episode, together) explains (None if the domain has no monitor or its tables
    raise no alert). ``also`` holds a concurrent episode's further draws."""

    spec: EpisodeSpec
    draw: InterventionDraw
    background: Background
    worlds: Worlds
    tables: dict[str, pd.DataFrame]
    prompt: str
    label: OracleLabel
    alert: AlertExplanation | None = None
    also: tuple[InterventionDraw, ...] = ()

    @property
    def draws(self) -> tuple[InterventionDraw, ...]:
        """Every cause's draw, the first cause first."""
        return (self.draw, *self.also)


def episode_id(split: str, index: int, domain: str | None = None) -> str:
    """Public episode id: where the episode comes from and its index, nothing about the cause.

    With ``domain`` (a dataset's own ids, :class:`~causaltrace.datasets.job.DatasetSettings`
    ``id_scheme="dataset"``), ``split`` is the dataset's name and the id names the domain too,
    so that ids are unique across every split and domain: ``ads_test-000012`` (a name that
    starts with its domain's name is not prefixed again), ``example-smoke-000012`` otherwise.
    Without it, the split and index alone (``test-000012``: the committed splits' scheme, which
    repeats across splits and domains).

    Args:
        split: The split's name, or with ``domain`` the dataset's name.
        index: The episode's index in the split.
        domain: The domain's name, to qualify the id.
    """
    if domain is not None and not split.startswith(f"{domain}_") and split != domain:
        split = f"{domain}-{split}"
    return f"{split}-{index:06d}"


def _also_draws(
    domain: Domain, spec: EpisodeSpec, also: tuple[InterventionDraw, ...] | None
) -> tuple[InterventionDraw, ...]:
    """A concurrent episode's further draws, from their own stream (none for one cause)."""
    if also is not None:
        return tuple(also)
    if not spec.also:
        return ()
    scm = domain.scm
    rng = concurrent_stream(spec.dataset_seed, spec.split, spec.index, spec.attempt)
    return tuple(scm.point(cause).sample(rng, scm.panel) for cause in spec.also)


def _simulate(
    domain: Domain,
    spec: EpisodeSpec,
    draw: InterventionDraw | None,
    counterfactual: bool,
    also: tuple[InterventionDraw, ...] | None = None,
):
    """The draws, background, worlds and report stream of one attempt (deterministic in spec).

    Every cause's interventions act in the factual world (each wraps its own node's mechanism);
    the counterfactual has none of them."""
    scm = domain.scm
    streams = episode_streams(spec.dataset_seed, spec.split, spec.index, spec.attempt)
    sampled = scm.point(spec.cause).sample(streams.draw, scm.panel, spec.slice_order)
    draw = sampled if draw is None else draw
    also = _also_draws(domain, spec, also)
    background = domain.background(streams.background, (draw, *also))
    base = scm.intervene(background.interventions) if background.interventions else scm
    interventions = scm.interventions_for(draw)
    for other in also:
        interventions = (*interventions, *scm.interventions_for(other))
    worlds = base.simulate(interventions, seed=streams.noise, counterfactual=counterfactual)
    return draw, also, background, worlds, streams.render


def _render(domain: Domain, world, draw, also, background, rng):
    """The domain's tables; a concurrent episode's further draws go to ``render(also=...)``
    (a single-cause episode calls ``render`` as before)."""
    if not also:
        return domain.render(world, draw, background, rng)
    return domain.render(world, draw, background, rng, also=also)


@dataclass(frozen=True)
class Attempt:
    """One attempt simulated but not yet rendered: what the cheap checks read (the worlds), and
    what rendering needs (the draws, the background, the report stream)."""

    spec: EpisodeSpec
    draw: InterventionDraw
    also: tuple[InterventionDraw, ...]
    background: Background
    worlds: Worlds
    render_rng: np.random.Generator


def simulate_attempt(
    domain: Domain,
    spec: EpisodeSpec,
    draw: InterventionDraw | None = None,
    also: tuple[InterventionDraw, ...] | None = None,
) -> Attempt:
    """Draw and simulate both worlds of one attempt (deterministic in ``spec``); nothing is
    rendered, so an attempt the alert gate rejects costs no tables.

    Args:
        domain: The domain.
        spec: The episode's spec (seed, split, index, attempt, cause).
        draw: The cause's draw to use; sampled from the spec's stream by default.
        also: A concurrent episode's further draws; drawn from their own stream by default.
    """
    draw, also, background, worlds, render_rng = _simulate(
        domain, spec, draw, counterfactual=True, also=also
    )
    return Attempt(spec, draw, also, background, worlds, render_rng)


def monitor_explanation(domain: Domain, worlds: Worlds) -> AlertExplanation | None:
    """The alert explanation read on the monitor tables of both worlds (no rendering): the same
    readings the agent's tables give, by the :meth:`Monitor.monitor_tables` contract; None if
    the domain has no monitor or the factual world raises no alert.

    Args:
        domain: The domain (its monitor).
        worlds: The attempt's factual and counterfactual worlds.
    """
    if not domain_has_monitor(domain):
        return None
    factual = domain.alert_readings(domain.monitor_tables(worlds.factual))
    if raised_alert(factual) is None:  # no alert: nothing to explain, the counterfactual unread
        return None
    counterfactual = domain.alert_readings(domain.monitor_tables(worlds.counterfactual))
    return explain_alert(factual, counterfactual)


def complete_episode(
    domain: Domain, attempt: Attempt, alert: AlertExplanation | None = None
) -> Episode:
    """Render, prompt and label a simulated attempt (``alert``: its explanation if already
    read, e.g. by :func:`monitor_explanation`).

    Args:
        domain: The domain.
        attempt: The simulated attempt.
        alert: The alert explanation; read from the rendered tables by default.
    """
    tables = _render(
        domain,
        attempt.worlds.factual,
        attempt.draw,
        attempt.also,
        attempt.background,
        attempt.render_rng,
    )
    prompt = domain.task_prompt(tables)
    if alert is None:
        alert = explain_episode_alert(domain, tables, attempt.worlds)
    label = make_label(domain, attempt.spec, attempt.draw, attempt.worlds, alert, also=attempt.also)
    return Episode(
        attempt.spec,
        attempt.draw,
        attempt.background,
        attempt.worlds,
        tables,
        prompt,
        label,
        alert,
        attempt.also,
    )


def build_episode(
    domain: Domain,
    spec: EpisodeSpec,
    draw: InterventionDraw | None = None,
    also: tuple[InterventionDraw, ...] | None = None,
) -> Episode:
    """Draw, simulate, render and label one attempt of an episode (deterministic in ``spec``).

    ``draw`` replaces the sampled draw and ``also`` a concurrent episode's further draws (for
    tests and ablations that need a given slice or strength); every other random stream is the
    spec's.

    Args:
        domain: The domain.
        spec: The episode's spec.
        draw: The cause's draw to use; sampled from the spec's stream by default.
        also: A concurrent episode's further draws; drawn from their own stream by default.
    """
    return complete_episode(domain, simulate_attempt(domain, spec, draw, also))


def explain_episode_alert(
    domain: Domain, tables: Mapping[str, pd.DataFrame], worlds: Worlds
) -> AlertExplanation | None:
    """The monitor read on the agent's tables against the same rule on the counterfactual
    world; None if the domain has no monitor or the tables raise no alert.

    Args:
        domain: The domain (its monitor).
        tables: The agent's tables.
        worlds: The episode's worlds (the counterfactual is read).
    """
    if not domain_has_monitor(domain):
        return None
    counterfactual = domain.monitor_tables(worlds.counterfactual)
    return explain_alert(domain.alert_readings(tables), domain.alert_readings(counterfactual))


def build_visible(domain: Domain, spec: EpisodeSpec) -> tuple[dict[str, pd.DataFrame], str]:
    """Only what the agent sees of an episode (its tables and prompt), the same bytes as
    :func:`build_episode` gives, without the counterfactual world or the label.

    Args:
        domain: The domain.
        spec: The episode's spec.

    Returns:
        The tables by name, and the prompt.
    """
    draw, also, background, worlds, render_rng = _simulate(domain, spec, None, counterfactual=False)
    tables = _render(domain, worlds.factual, draw, also, background, render_rng)
    return tables, domain.task_prompt(tables)


def make_label(
    domain: Domain,
    spec: EpisodeSpec,
    draw: InterventionDraw,
    worlds: Worlds,
    alert: AlertExplanation | None = None,
    also: tuple[InterventionDraw, ...] = (),
) -> OracleLabel:
    """The oracle label: cause, group, slice, onset, strength and counterfactual KPI effects;
    ``extra["alert"]`` records how much of the alert the cause explains (None without one) and
    ``extra["difficulty"]`` the domain's difficulty knobs and where the draw fell (generation
    adds what the verifier and the oracle measured, :func:`causaltrace.episodes.acceptance.accept_episode`).
    A concurrent episode's further causes are the label's ``also``; every effect is then the
    causes' together (factual with all of them against the counterfactual with none).

    Args:
        domain: The domain.
        spec: The episode's spec.
        draw: The first cause's draw.
        worlds: The episode's worlds.
        alert: The alert explanation; none by default.
        also: A concurrent episode's further draws; none by default.
    """
    panel = domain.scm.panel
    onset = draw.window.onset
    inside = draw.slice.mask(panel)
    everywhere = np.ones(panel.n_cells, dtype=bool)

    def effects(mask: np.ndarray, onset: int = onset) -> dict[str, KpiEffect]:
        fact = domain.kpi_totals(worlds.factual, mask, onset)
        counter = domain.kpi_totals(worlds.counterfactual, mask, onset)
        return {k: KpiEffect(float(fact[k]), float(counter[k])) for k in fact}

    def concurrent(other: InterventionDraw) -> ConcurrentCause:
        start = other.window.onset
        details = other.as_dict()
        return ConcurrentCause(
            cause=other.point,
            group=domain.cause_group(other.point),
            slice=other.slice.canonical() or None,
            onset=start,
            onset_time=str(panel.time.values[start]),
            strength=float(other.strength),
            profile=details["profile"],
            effect_in_slice=effects(other.slice.mask(panel), start),
            effect_overall=effects(everywhere, start),
            extra={
                "profile_params": details["profile_params"],
                "draw": draw_record(other, panel.n_time),
            },
        )

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
        also=tuple(concurrent(other) for other in also),
    )
