"""Domains: a named SCM (with its intervention points) that the engine can look up by name.

The engine never imports ``domains/``. A domain is found through the ``causaltrace.domains``
entry-point group (declared in the domain package's ``pyproject.toml``) or by an explicit
``"package.module:ClassName"`` path, so a new domain is a new folder, not an edit to the engine.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from causaltrace.episodes.alerts import AlertReading, raised_alerts
from causaltrace.episodes.difficulty import Difficulty, apply_difficulty
from causaltrace.errors import CausalTraceError
from causaltrace.model.intervention_points import InterventionDraw
from causaltrace.model.interventions import Intervention
from causaltrace.model.scm import SCM
from causaltrace.model.simulate import World

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from causaltrace.episodes.verify import Evidence

ENTRY_POINT_GROUP = "causaltrace.domains"


class DomainError(CausalTraceError):
    """A domain could not be found or configured."""


@dataclass(frozen=True)
class Background:
    """What happens in an episode regardless of its cause, in both worlds.

    ``interventions`` are harmless or sub-threshold changes (decoy edits the account made,
    small concurrent shifts) applied to the factual *and* the counterfactual world, so they are
    confounders the agent must see through, not part of the label. ``notes`` carries what the
    renderer needs to show them (e.g. the change-history rows of decoy edits).
    """

    interventions: tuple[Intervention, ...] = ()
    notes: Mapping[str, Any] = field(default_factory=dict)


class Domain(ABC):
    """Base class of a diagnostic domain.

    Subclasses set ``name`` and implement :meth:`build_scm`; ``config`` is the domain's
    (Hydra) configuration as a plain mapping. The other hooks turn simulated worlds into what an
    analyst sees: :meth:`background` (decoys common to both worlds), :meth:`render` (the
    agent-visible tables), :meth:`task_prompt`, :meth:`data_dictionary`, and :meth:`kpi_totals`
    (the KPIs whose counterfactual effect an oracle label records). A domain with a monitoring
    rule also implements :meth:`alert_readings` and :meth:`monitor_tables`, so the verifier can
    check that the hidden cause explains the alert the prompt shows. Every hook receives an
    explicit ``numpy.random.Generator`` where it needs randomness.
    """

    name: ClassVar[str] = ""
    # The domain's config keys that a difficulty tier may set (``difficulty.domain``), each with
    # what it dials; see causaltrace/episodes/difficulty.py.
    difficulty_knobs: ClassVar[Mapping[str, str]] = {}
    # The agent-visible tables of events and settings, not metrics (a change history, the
    # campaigns or ads with their statuses, a deploy log). Legitimate evidence, but a rule on
    # them alone must not name a cause: the audit's per-cause rule probe reads only these and
    # the alert line (causaltrace/audit/rules.py, docs/audit.md).
    record_tables: ClassVar[tuple[str, ...]] = ()

    def __init__(self, config: Mapping[str, Any] | None = None):
        config = dict(config or {})
        self.difficulty = Difficulty.from_mapping(config.pop("difficulty", None))
        # Set by the engine (generation.Job) when the dataset's composition has concurrent
        # episodes: then every prompt says that one or more causes may be at work.
        self.concurrent = bool(config.pop("concurrent", False))
        unknown = sorted(set(self.difficulty.domain) - set(self.difficulty_knobs))
        if unknown:
            raise DomainError(
                f"difficulty.domain names {unknown}, which domain {self.name!r} does not declare "
                f"as difficulty knobs; its knobs: {sorted(self.difficulty_knobs) or '(none)'}"
            )
        self.config: dict[str, Any] = {**config, **self.difficulty.domain}
        self._scm: SCM | None = None

    @abstractmethod
    def build_scm(self) -> SCM:
        """Build the domain's SCM (panel, nodes, intervention points) from ``self.config``."""

    @property
    def scm(self) -> SCM:
        """The SCM, built once per domain instance (construction validates every mechanism),
        with its priors narrowed by the config's difficulty tier, if any."""
        if self._scm is None:
            scm = self.build_scm()
            if not self.difficulty.is_default:
                no_signal = frozenset(
                    n for n, p in scm.intervention_points.items() if p.metadata.get("no_signal")
                )
                scm = apply_difficulty(scm, self.difficulty, no_signal)
            self._scm = scm
        return self._scm

    def cause_group(self, cause: str) -> str:
        """The group a cause belongs to (its intervention point's ``metadata["group"]``)."""
        return str(self.scm.point(cause).metadata.get("group", ""))

    def background(
        self, rng: np.random.Generator, draws: Sequence[InterventionDraw] = ()
    ) -> Background:
        """Decoys and concurrent sub-threshold shifts for one episode (default: none).

        ``draws`` are the episode's causes (the first cause first), so a domain can place
        confounders *where the incident is*, as a real account's edits cluster on the campaign
        in trouble: a decoy only ever far from the alert is told apart by its place alone. A
        background must read only where the draws act, never which cause they are, or its
        decoys would name the cause; the engine applies it to both worlds all the same."""
        return Background()

    def render(
        self,
        world: World,
        draw: InterventionDraw,
        background: Background,
        rng: np.random.Generator,
        *,
        also: Sequence[InterventionDraw] = (),
    ) -> dict[str, pd.DataFrame]:
        """The agent-visible tables of ``world``. ``draw`` may be used only to show what the
        account itself did (e.g. a budget edit in the change history), never to label data.
        ``also`` holds a concurrent episode's further draws (the engine passes it only when
        there are some, so a domain without concurrent episodes may leave it out)."""
        raise NotImplementedError(f"domain {self.name!r} does not render tables")

    def data_dictionary(self) -> dict[str, dict[str, str]]:
        """Table -> column -> meaning, shown to the agent."""
        return {}

    def task_prompt(self, tables: Mapping[str, pd.DataFrame]) -> str:
        """The task as the agent reads it, computed from the agent-visible tables only."""
        raise NotImplementedError(f"domain {self.name!r} does not write prompts")

    def kpi_totals(self, world: World, mask: np.ndarray, onset: int) -> dict[str, float]:
        """KPI totals over the cells in ``mask`` from step ``onset`` on (for oracle labels)."""
        return {}

    def channel_readings(
        self, in_slice: Mapping[str, float], overall: Mapping[str, float]
    ) -> dict[str, float]:
        """One world's readings of the channels causes declare (``metadata["channels"]``),
        keyed ``channel`` or ``channel:detail``, from its :meth:`kpi_totals` inside the cause's
        slice and over the whole panel (what a label records for both worlds), so the audit can
        measure which channels a cause moves without re-simulating. Default: not measured."""
        raise NotImplementedError(f"domain {self.name!r} does not measure channels")

    def evidence(self, tables: Mapping[str, pd.DataFrame]) -> Evidence:
        """Signature statistics read from the agent-visible tables (for the verifier)."""
        raise NotImplementedError(f"domain {self.name!r} offers no evidence for verification")

    def alert_readings(self, tables: Mapping[str, pd.DataFrame]) -> Sequence[AlertReading]:
        """Every ``(kpi, scope)`` reading of the domain's monitoring rule on ``tables``, in a
        fixed order (the first wins ties in :func:`~causaltrace.episodes.alerts.raised_alert`).

        The prompt should name ``raised_alert(self.alert_readings(tables))``. With this hook and
        :meth:`monitor_tables` the engine reads the same rule on the counterfactual world and
        rejects episodes whose alert does not fire or the cause does not explain (see
        ``VerifierConfig.check_alert``). Default: the domain has no monitor, and that gate does
        not apply to it.
        """
        raise NotImplementedError(f"domain {self.name!r} has no monitoring rule")

    def shown_alerts(self, readings: Sequence[AlertReading]) -> list[AlertReading]:
        """The alerts the prompt shows, most severe first: the first is
        :func:`~causaltrace.episodes.alerts.raised_alert`'s, which the explained-alert gate
        checks, and each cause of a concurrent episode must make a share of one of them.
        Default: that one alert alone. A domain whose prompt pages several (so that causes
        moving different KPIs each show) returns them, e.g. with
        :func:`~causaltrace.episodes.alerts.raised_alerts`."""
        return raised_alerts(readings, limit=1)

    def monitor_tables(self, world: World) -> Mapping[str, pd.DataFrame]:
        """The tables :meth:`alert_readings` reads, rendered from ``world`` without randomness,
        so the counterfactual world can be read by the same rule cheaply. On the factual world
        they must give the same readings as the rendered tables do. Default: no monitor."""
        raise NotImplementedError(f"domain {self.name!r} has no monitoring rule")

    def alert_onset(self) -> int:
        """The first step of the window the alert reports on (a no-signal episode's scans
        look for causes from here on). Default: the last 7 steps."""
        return max(self.scm.panel.n_time - 7, 0)

    def alert_kpi(self, tables: Mapping[str, pd.DataFrame]) -> str:
        """The KPI the alert names (for plots)."""
        raise NotImplementedError(f"domain {self.name!r} does not name its alert KPI")

    def kpi_daily(self, world: World, kpi: str) -> np.ndarray:
        """The account-level value of ``kpi`` per time step in ``world`` (for plots)."""
        raise NotImplementedError(f"domain {self.name!r} has no daily KPI series")

    def no_signal_causes(self) -> tuple[str, ...]:
        """Causes that inject nothing (their intervention point's ``metadata["no_signal"]``)."""
        return tuple(
            n for n, p in self.scm.intervention_points.items() if p.metadata.get("no_signal")
        )


def domain_has_monitor(domain: Domain) -> bool:
    """Whether ``domain`` overrides both monitor hooks (:meth:`Domain.alert_readings` and
    :meth:`Domain.monitor_tables`); the explained-alert gate needs both, and skips a domain
    that lacks either."""
    cls = type(domain)
    return (
        cls.alert_readings is not Domain.alert_readings
        and cls.monitor_tables is not Domain.monitor_tables
    )


def available_domains() -> dict[str, str]:
    """Registered domain names and the object path each points to."""
    return {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)}


def load_domain(name: str, config: Mapping[str, Any] | None = None) -> Domain:
    """Instantiate a domain by registered name or by ``"module:ClassName"`` path."""
    registered = {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}
    if name in registered:
        cls = registered[name].load()
    elif ":" in name:
        module_name, _, attr = name.partition(":")
        try:
            cls = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as exc:
            raise DomainError(f"cannot load domain {name!r}: {exc}") from None
    else:
        known = ", ".join(sorted(registered)) or "(none registered; is the package installed?)"
        raise DomainError(f"unknown domain {name!r}; registered domains: {known}")
    if not (isinstance(cls, type) and issubclass(cls, Domain)):
        raise DomainError(f"domain {name!r} resolves to {cls!r}, which is not a Domain subclass")
    return cls(config)
