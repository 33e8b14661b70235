"""Domains: a named SCM (with its intervention points) that the engine can look up by name.

The engine never imports ``domains/``. A domain is found through the ``causaltrace.domains``
entry-point group (declared in the domain package's ``pyproject.toml``) or by an explicit
``"package.module:ClassName"`` path, so a new domain is a new folder, not an edit to the engine.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

import numpy as np

from causaltrace.core.registry import Registry
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


class DomainContractError(DomainError):
    """A domain breaks a contract the engine relies on (a partial :class:`Monitor`, or a check
    of :func:`~causaltrace.episodes.check.check_domain`); ``domain`` and ``check`` name the
    domain and the failed check, ``reason`` says what is wrong."""

    def __init__(self, domain: str, check: str, reason: str):
        self.domain, self.check, self.reason = domain, check, reason
        super().__init__(f"domain {domain!r} fails check {check!r}: {reason}")


@runtime_checkable
class Monitor(Protocol):
    """A domain's monitoring rule: what pages, read the same way on any world.

    A domain either implements all four methods (then :attr:`Domain.monitor` is the domain
    itself) or none; a partial monitor is a :class:`DomainContractError` naming the missing
    methods, never a silently skipped alert gate. With a monitor the engine reads the rule on the
    counterfactual world too and rejects episodes whose alert does not fire or that the cause
    does not explain (``VerifierConfig.check_alert``)."""

    def alert_readings(self, tables: Mapping[str, pd.DataFrame]) -> Sequence[AlertReading]:
        """Every ``(kpi, scope)`` reading of the rule on ``tables``, in a fixed order (the first
        wins ties in :func:`~causaltrace.episodes.alerts.raised_alert`). The prompt should name
        what :meth:`Domain.shown_alerts` picks from them."""
        ...

    def monitor_tables(self, world: World) -> Mapping[str, pd.DataFrame]:
        """The tables :meth:`alert_readings` reads, rendered from ``world`` without randomness,
        so the counterfactual world can be read by the same rule cheaply. On the factual world
        they must give the same readings as the rendered tables do."""
        ...

    def alert_kpi(self, tables: Mapping[str, pd.DataFrame]) -> str:
        """The KPI the first alert names."""
        ...

    def kpi_daily(self, world: World, kpi: str) -> np.ndarray:
        """The value of ``kpi`` per time step over every cell of ``world``, as the rule reads it
        (a count summed, a ratio as the ratio of the sums), for plots. ``causaltrace-inspect
        --plot`` passes a world restricted to an alert's scope (its arrays and ``world.panel``
        hold only the scope's cells), so read the cells from ``world``, not the domain's panel."""
        ...


MONITOR_METHODS: tuple[str, ...] = ("alert_readings", "monitor_tables", "alert_kpi", "kpi_daily")


def monitor_methods(domain: Domain | type[Domain]) -> tuple[str, ...]:
    """The :class:`Monitor` methods ``domain``'s class implements (a method set to None in a
    subclass counts as not implemented)."""
    cls = domain if isinstance(domain, type) else type(domain)
    return tuple(m for m in MONITOR_METHODS if callable(getattr(cls, m, None)))


@dataclass(frozen=True)
class BackgroundChange:
    """One change of an episode's background that an analyst could name as a cause: a logged
    edit, a promotion, a learning period. The label's attribution switches each change on and
    off (:mod:`causaltrace.episodes.change_shares`), so a change that moved a shown alert is
    seen, whatever the label names.

    ``interventions`` are some of the :class:`Background`'s own (the same objects);
    ``description`` says where and when it acted, as the agent's tables show it. ``nameable``:
    an analyst could take it for one of the domain's causes (an account edit that is a cause's
    twin); a change that is not (a transient blip, a documented sale) may raise the false alarm
    of a no-signal episode, which is what such an episode's label says happened.
    """

    name: str
    kind: str
    interventions: tuple[Intervention, ...]
    description: str = ""
    nameable: bool = True


@dataclass(frozen=True)
class Background:
    """What happens in an episode regardless of its cause, in both worlds.

    ``interventions`` are harmless or sub-threshold changes (decoy edits the account made,
    small concurrent shifts) applied to the factual *and* the counterfactual world, so they are
    confounders the agent must see through, not part of the label. ``notes`` carries what the
    renderer needs to show them (e.g. the change-history rows of decoy edits).

    ``changes`` names the interventions an analyst could take for a cause, grouped as they
    happened (one edit with its learning period is one change); the rest of ``interventions``
    is the account's setting (its state from the first day), never switched off. A domain
    without ``changes`` declares none, and only its causes are attributed.
    """

    interventions: tuple[Intervention, ...] = ()
    notes: Mapping[str, Any] = field(default_factory=dict)
    changes: tuple[BackgroundChange, ...] = ()

    def __post_init__(self) -> None:
        held = {id(iv) for iv in self.interventions}
        names: set[str] = set()
        for change in self.changes:
            if change.name in names:
                raise DomainError(f"background: two changes are named {change.name!r}")
            names.add(change.name)
            stray = [iv.node for iv in change.interventions if id(iv) not in held]
            if stray:
                raise DomainError(
                    f"background change {change.name!r}: its interventions on {stray} are not "
                    "among the background's interventions (a change groups some of them)"
                )

    def interventions_with(self, changes: Collection[str]) -> tuple[Intervention, ...]:
        """The setting and the named changes' interventions, in the background's order (so the
        world with every change is the background's own, wrapper for wrapper).

        Args:
            changes: Names of the changes to keep on.
        """
        unknown = sorted(set(changes) - {c.name for c in self.changes})
        if unknown:
            raise DomainError(f"background has no change(s) named {unknown}")
        off = {id(iv) for c in self.changes if c.name not in changes for iv in c.interventions}
        return tuple(iv for iv in self.interventions if id(iv) not in off)


def merged_config(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``over``'s keys set, mappings merged key by key: a tier that sets
    ``background.count_weights`` keeps the domain config's ``background.twins``."""
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merged_config(out[key], value)
        else:
            out[key] = value
    return out


class Domain(ABC):
    """Base class of a diagnostic domain.

    Subclasses set ``name`` and implement :meth:`build_scm`; ``config`` is the domain's
    (Hydra) configuration as a plain mapping. The other hooks turn simulated worlds into what an
    analyst sees: :meth:`background` (decoys common to both worlds), :meth:`render` (the
    agent-visible tables), :meth:`task_prompt`, :meth:`data_dictionary`, and :meth:`kpi_totals`
    (the KPIs whose counterfactual effect an oracle label records). A domain with a monitoring
    rule also implements the :class:`Monitor` protocol (all four of its methods), so the
    verifier can check that the hidden cause explains the alert the prompt shows. Every hook
    receives an explicit ``numpy.random.Generator`` where it needs randomness.
    :func:`~causaltrace.episodes.check.check_domain` checks a domain against these contracts.
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
        # Set by the engine (datasets.job.Job) when the dataset's composition has concurrent
        # episodes: then every prompt says that one or more causes may be at work.
        self.concurrent = bool(config.pop("concurrent", False))
        unknown = sorted(set(self.difficulty.domain) - set(self.difficulty_knobs))
        if unknown:
            raise DomainError(
                f"difficulty.domain names {unknown}, which domain {self.name!r} does not declare "
                f"as difficulty knobs; its knobs: {sorted(self.difficulty_knobs) or '(none)'}"
            )
        self.config: dict[str, Any] = merged_config(config, self.difficulty.domain)
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
                    n for n, p in scm.intervention_points.items() if p.info.no_signal
                )
                scm = apply_difficulty(scm, self.difficulty, no_signal)
            self._scm = scm
        return self._scm

    def cause_group(self, cause: str) -> str:
        """The group a cause belongs to (its :attr:`CauseInfo.group`)."""
        return self.scm.point(cause).info.group

    @property
    def monitor(self) -> Monitor | None:
        """The domain's monitoring rule (the domain itself, if its class implements every
        :class:`Monitor` method), or None if it implements none of them. A partial monitor
        raises :class:`DomainContractError` naming the missing methods."""
        present = monitor_methods(self)
        if not present:
            return None
        missing = [m for m in MONITOR_METHODS if m not in present]
        if missing:
            raise DomainContractError(
                self.name or type(self).__name__,
                "monitor",
                f"a partial monitor: {type(self).__name__} implements {list(present)} but not "
                f"{missing}; a domain implements every Monitor method or none",
            )
        return self

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
        """One world's readings of the channels causes declare (:attr:`CauseInfo.channels`),
        keyed ``channel`` or ``channel:detail``, from its :meth:`kpi_totals` inside the cause's
        slice and over the whole panel (what a label records for both worlds), so the audit can
        measure which channels a cause moves without re-simulating. Default: not measured."""
        raise NotImplementedError(f"domain {self.name!r} does not measure channels")

    def evidence(self, tables: Mapping[str, pd.DataFrame]) -> Evidence:
        """Signature statistics read from the agent-visible tables (for the verifier)."""
        raise NotImplementedError(f"domain {self.name!r} offers no evidence for verification")

    def shown_alerts(self, readings: Sequence[AlertReading]) -> list[AlertReading]:
        """The alerts the prompt of a domain with a :class:`Monitor` shows, most severe first
        (from its readings): the first is
        :func:`~causaltrace.episodes.alerts.raised_alert`'s, which the explained-alert gate
        checks, and each cause of a concurrent episode must make a share of one of them.
        Default: that one alert alone. A domain whose prompt pages several (so that causes
        moving different KPIs each show) returns them, e.g. with
        :func:`~causaltrace.episodes.alerts.raised_alerts`."""
        return raised_alerts(readings, limit=1)

    def alert_onset(self) -> int:
        """The first step of the window the alert reports on (a no-signal episode's scans
        look for causes from here on). Default: the last 7 steps."""
        return max(self.scm.panel.n_time - 7, 0)

    def no_signal_causes(self) -> tuple[str, ...]:
        """Causes that inject nothing (their :attr:`CauseInfo.no_signal`)."""
        return tuple(n for n, p in self.scm.intervention_points.items() if p.info.no_signal)


def domain_has_monitor(domain: Domain) -> bool:
    """Whether ``domain`` has a monitor (:attr:`Domain.monitor`): the explained-alert gate
    applies to it. A partial monitor raises :class:`DomainContractError`."""
    return domain.monitor is not None


def _domain_class(name: str, obj: Any) -> type[Domain]:
    if not (isinstance(obj, type) and issubclass(obj, Domain)):
        raise TypeError(f"{obj!r} is not a Domain subclass")
    return obj


# Domains by name: installed packages' ``causaltrace.domains`` entry points, classes registered
# at run time (``DOMAINS.register(name, cls)``) and ``"module:ClassName"`` paths.
DOMAINS: Registry[type[Domain]] = Registry("domain", ENTRY_POINT_GROUP, _domain_class, DomainError)


def available_domains() -> dict[str, str]:
    """Registered domain names and the object path each points to."""
    return DOMAINS.paths()


def load_domain(name: str, config: Mapping[str, Any] | None = None) -> Domain:
    """Instantiate a domain by registered name or by ``"module:ClassName"`` path."""
    return DOMAINS.get(name)(config)
