"""``check_domain``: everything the engine relies on a domain for, checked in one call.

Like Gymnasium's ``check_env``, :func:`check_domain` runs a domain through the contracts the
engine assumes (docs/architecture.md, "Contracts") and raises
:class:`~causaltrace.episodes.domain.DomainContractError` at the first one it breaks, naming the
domain and the check:

- ``scm``: the SCM builds (acyclic, every parent known, every mechanism's output of the panel's
  shape and the node's dtype) and offers at least one cause with a signal;
- ``mechanisms``: a mechanism that defines ``invert`` or ``noise_interval`` declares it (subclasses
  :class:`~causaltrace.model.node.InvertibleMechanism` or
  :class:`~causaltrace.model.node.IntervalInvertibleMechanism`);
- ``causes``: every cause's :class:`~causaltrace.model.intervention_points.CauseInfo` is complete
  and consistent (a group; confusers that are other known causes), its prior draws a slice with
  cells, its draws build interventions on nodes of the SCM (none for a no-signal cause, at least
  one otherwise);
- ``monitor``: the domain implements every :class:`~causaltrace.episodes.domain.Monitor` method
  or none;
- ``render``: an episode of every cause (one spec, the same streams) renders the same tables with
  the same rows, columns and dtypes, the record tables are among them, and the prompt is text;
- ``dictionary``: the data dictionary describes every rendered table and column (but a table
  ``data_dictionary``, the dictionary itself);
- ``determinism``: rebuilding an episode from its spec gives the same tables, prompt and label;
- ``monitor-tables``: with a monitor, the rule reads the same on ``monitor_tables`` of the
  factual world as on the rendered tables;
- ``channels``: every declared channel is read by ``channel_readings``;
- ``verification``: the verifier runs on every episode, and accepts at least one of
  ``attempts``.

Everything is seeded (``seed``): a domain passes or fails the same way every time.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from causaltrace.episodes.domain import Domain, DomainContractError, load_domain
from causaltrace.episodes.sampling import Episode, EpisodeSpec, build_episode
from causaltrace.episodes.verify import Verdict, VerifierConfig, verify, verify_alert
from causaltrace.model.node import undeclared_inverse

# Draws per slice order of each cause's prior (each built into interventions and applied).
DRAWS_PER_ORDER = 5
# A rendered table of this name is the data dictionary shown as a table: it needs no entry.
DICTIONARY_TABLE = "data_dictionary"

CHECKS = (
    "scm",
    "mechanisms",
    "causes",
    "monitor",
    "render",
    "dictionary",
    "determinism",
    "monitor-tables",
    "channels",
    "verification",
)


@dataclass(frozen=True)
class DomainCheck:
    """What :func:`check_domain` checked on a domain that passed: the checks, the causes, and
    how many of the episodes it built the verifier accepted."""

    domain: str
    checks: tuple[str, ...]
    causes: tuple[str, ...]
    episodes: int
    accepted: int

    def __str__(self) -> str:
        return (
            f"domain {self.domain!r} passes {len(self.checks)} checks "
            f"({', '.join(self.checks)}): {len(self.causes)} causes, "
            f"{self.accepted} of {self.episodes} episodes accepted"
        )


def check_domain(
    domain: Domain | str,
    config: Mapping[str, Any] | None = None,
    *,
    seed: int = 0,
    attempts: int = 40,
    verifier: VerifierConfig | None = None,
) -> DomainCheck:
    """Check ``domain`` (an instance, or a name or ``"module:Class"`` path loaded with
    ``config``) against the engine's contracts; see the module docstring for the checks.

    Builds one episode per cause, then more (round robin over the causes) until the verifier
    accepts one or ``attempts`` episodes are built. Raises
    :class:`~causaltrace.episodes.domain.DomainContractError` naming the domain and the failed
    check; returns a :class:`DomainCheck` summary otherwise."""
    if isinstance(domain, str):
        domain = load_domain(domain, config)
    elif config is not None:
        raise TypeError("check_domain: pass config only with a domain name")
    return _Checker(domain, seed, attempts, verifier or VerifierConfig()).run()


class _Checker:
    def __init__(self, domain: Domain, seed: int, attempts: int, verifier: VerifierConfig):
        self.domain, self.seed, self.attempts, self.verifier = domain, seed, attempts, verifier
        self.name = domain.name or type(domain).__name__
        self.passed: list[str] = []

    def fail(self, check: str, reason: str) -> DomainContractError:
        return DomainContractError(self.name, check, reason)

    def done(self, check: str) -> None:
        if check not in self.passed:
            self.passed.append(check)

    def run(self) -> DomainCheck:
        scm = self._scm()
        self._mechanisms(scm)
        self._causes(scm)
        monitor = self._monitor()
        # One episode per cause, all of one spec index: the same noise, background and report
        # streams, so that whatever differs between their tables' layouts is the cause's doing.
        episodes = [self._episode(cause, 0) for cause in scm.intervention_points]
        self._render(episodes)
        self._dictionary(episodes[0])
        self._determinism(episodes[0])
        if monitor is not None:
            for episode in episodes:
                self._monitor_tables(episode)
        self._channels(scm, episodes)
        accepted, built = self._verification(scm, episodes)
        causes = tuple(scm.intervention_points)
        return DomainCheck(self.name, tuple(self.passed), causes, built, accepted)

    # -- the model ---------------------------------------------------------------------
    def _scm(self):
        try:
            scm = self.domain.scm
        except Exception as exc:  # the check reports whatever the domain's build raised
            raise self.fail("scm", f"building the SCM raised {type(exc).__name__}: {exc}") from exc
        if not scm.intervention_points:
            raise self.fail("scm", "the SCM declares no intervention points (causes)")
        if all(p.info.no_signal for p in scm.intervention_points.values()):
            raise self.fail("scm", "every cause is a no-signal cause: nothing to diagnose")
        self.done("scm")
        return scm

    def _mechanisms(self, scm) -> None:
        for name in scm.order:
            mechanism = scm.nodes[name].mechanism
            method = undeclared_inverse(mechanism)
            if method is not None:
                variant = (
                    "InvertibleMechanism" if method == "invert" else "IntervalInvertibleMechanism"
                )
                raise self.fail(
                    "mechanisms",
                    f"node {name!r}: mechanism {type(mechanism).__name__} defines {method}() but "
                    f"does not subclass {variant}, so the engine treats it as not invertible",
                )
        self.done("mechanisms")

    def _causes(self, scm) -> None:
        points = scm.intervention_points
        rng = np.random.default_rng(self.seed)
        for name, point in points.items():
            info = point.info
            if not info.group:
                raise self.fail("causes", f"cause {name!r} declares no group (CauseInfo.group)")
            unknown = [c for c in info.confusers if c not in points]
            if unknown:
                raise self.fail(
                    "causes",
                    f"cause {name!r} names unknown confusers {unknown}; causes: {list(points)}",
                )
            if name in info.confusers:
                raise self.fail("causes", f"cause {name!r} names itself as a confuser")
            for order in [o for o in point.slice_orders() for _ in range(DRAWS_PER_ORDER)]:
                try:
                    draw = point.sample(rng, scm.panel, order)
                    interventions = scm.interventions_for(draw)
                    scm.intervene(interventions)  # every target node and slice exists
                except Exception as exc:  # a prior or builder that fails: the check's finding
                    raise self.fail(
                        "causes",
                        f"cause {name!r}: drawing a {order}D slice and applying its "
                        f"interventions raised {type(exc).__name__}: {exc}",
                    ) from exc
                if not draw.slice.mask(scm.panel).any():
                    raise self.fail("causes", f"cause {name!r}: slice {draw.slice} has no cells")
                lo, hi = point.prior.strength
                if not lo <= draw.strength <= hi:
                    raise self.fail(
                        "causes", f"cause {name!r}: strength {draw.strength} is outside its prior"
                    )
                if info.no_signal and interventions:
                    raise self.fail(
                        "causes",
                        f"no-signal cause {name!r} builds {len(interventions)} "
                        "interventions (a no-signal cause injects nothing)",
                    )
                if not info.no_signal and not interventions:
                    raise self.fail(
                        "causes",
                        f"cause {name!r} builds no intervention; declare it no_signal if it "
                        "injects nothing",
                    )
        self.done("causes")

    def _monitor(self):
        try:
            monitor = self.domain.monitor
        except DomainContractError as exc:
            raise self.fail("monitor", exc.reason) from None
        self.done("monitor")
        return monitor

    # -- episodes ----------------------------------------------------------------------
    def _spec(self, cause: str, index: int) -> EpisodeSpec:
        return EpisodeSpec(f"check-{index:06d}", "check", index, self.seed, cause, None)

    def _episode(self, cause: str, index: int) -> Episode:
        try:
            return build_episode(self.domain, self._spec(cause, index))
        except Exception as exc:  # rendering, prompting or labelling failed: name the cause
            raise self.fail(
                "render",
                f"building an episode of cause {cause!r} raised {type(exc).__name__}: {exc}",
            ) from exc

    def _render(self, episodes: list[Episode]) -> None:
        layouts = {}
        for episode in episodes:
            cause, tables = episode.draw.point, episode.tables
            if not isinstance(tables, Mapping) or not tables:
                raise self.fail("render", f"cause {cause!r}: render returned no tables")
            layout = {}
            for table, frame in tables.items():
                if not hasattr(frame, "columns") or not hasattr(frame, "dtypes"):
                    raise self.fail(
                        "render", f"cause {cause!r}: table {table!r} is not a DataFrame"
                    )
                columns = [(str(c), str(t)) for c, t in frame.dtypes.items()]
                layout[table] = (len(frame), columns)
            layouts[cause] = layout
            if not isinstance(episode.prompt, str) or not episode.prompt.strip():
                raise self.fail("render", f"cause {cause!r}: the task prompt is empty")
        first, reference = next(iter(layouts.items()))
        for cause, layout in layouts.items():
            if layout != reference:
                diff = sorted(
                    t for t in set(layout) | set(reference) if layout.get(t) != reference.get(t)
                )
                raise self.fail(
                    "render",
                    f"the tables' rows, columns or dtypes depend on the cause (an agent could "
                    f"read it off them): {cause!r} and {first!r} differ in {diff}",
                )
        missing = sorted(set(self.domain.record_tables) - set(reference))
        if missing:
            raise self.fail("render", f"record_tables {missing} are not rendered tables")
        self.done("render")

    def _dictionary(self, episode: Episode) -> None:
        dictionary = self.domain.data_dictionary()
        for table, frame in episode.tables.items():
            if table == DICTIONARY_TABLE:
                continue  # the dictionary itself, shown as a table (table, column, meaning)
            described = dictionary.get(table)
            if described is None:
                raise self.fail("dictionary", f"the data dictionary has no table {table!r}")
            missing = [str(c) for c in frame.columns if c not in described]
            if missing:
                raise self.fail(
                    "dictionary", f"the data dictionary of table {table!r} misses {missing}"
                )
        self.done("dictionary")

    def _determinism(self, episode: Episode) -> None:
        again = build_episode(self.domain, episode.spec)
        if again.prompt != episode.prompt:
            raise self.fail("determinism", "the same spec gives another prompt")
        for table, frame in episode.tables.items():
            if not frame.equals(again.tables.get(table)):
                raise self.fail("determinism", f"the same spec gives another table {table!r}")
        if again.label.to_dict() != episode.label.to_dict():
            raise self.fail("determinism", "the same spec gives another label")
        self.done("determinism")

    def _monitor_tables(self, episode: Episode) -> None:
        domain = self.domain
        rendered = list(domain.alert_readings(episode.tables))
        monitored = list(domain.alert_readings(domain.monitor_tables(episode.worlds.factual)))
        if rendered != monitored:
            raise self.fail(
                "monitor-tables",
                f"cause {episode.draw.point!r}: the rule reads differently on monitor_tables() of "
                "the factual world than on the rendered tables, so the counterfactual world would "
                "be read by another rule",
            )
        if not rendered:
            raise self.fail("monitor-tables", "alert_readings() returned no reading")
        self.done("monitor-tables")

    def _channels(self, scm, episodes: list[Episode]) -> None:
        declared = {c for p in scm.intervention_points.values() for c in p.info.channels}
        if declared:
            label = episodes[0].label.to_dict()

            def side(key: str) -> dict[str, float]:
                return {k: float(v["factual"]) for k, v in (label.get(key) or {}).items()}

            try:
                readings = self.domain.channel_readings(
                    side("effect_in_slice"), side("effect_overall")
                )
            except NotImplementedError:
                raise self.fail(
                    "channels",
                    f"causes declare channels {sorted(declared)} but the domain does not "
                    "implement channel_readings()",
                ) from None
            read = {str(k).split(":", 1)[0] for k in readings}
            unread = sorted(declared - read)
            if unread:
                raise self.fail(
                    "channels",
                    f"declared channels {unread} are not read by channel_readings() "
                    f"(it reads {sorted(read)})",
                )
        self.done("channels")

    def _verdict(self, episode: Episode) -> Verdict:
        """The gate (with a monitor), then the table verifier, as generation runs them for a
        single-cause episode."""
        domain, no_signal = self.domain, self.domain.no_signal_causes()
        if domain.monitor is not None:
            signal = episode.draw.point not in no_signal
            gate = verify_alert(episode.alert, signal=signal, config=self.verifier)
            if not gate.accepted:
                return gate
        return verify(
            domain.scm,
            domain.evidence(episode.tables),
            episode.draw,
            alert_onset=domain.alert_onset(),
            no_signal=no_signal,
            config=self.verifier,
        )

    def _verification(self, scm, episodes: list[Episode]) -> tuple[int, int]:
        """(accepted, built): verify every episode; while none is accepted, build more (spec
        indices 1, 2, ..., the causes in turn) up to ``attempts`` episodes in all."""
        causes = list(scm.intervention_points)
        accepted, reasons = 0, {}
        for episode in episodes:
            accepted += self._accepted(episode, reasons)
        built = len(episodes)
        while not accepted and built < self.attempts:
            index = built - len(episodes) + 1
            accepted += self._accepted(self._episode(causes[index % len(causes)], index), reasons)
            built += 1
        if not accepted:
            raise self.fail(
                "verification",
                f"the verifier accepted none of {built} episodes (rejections: {reasons}); the "
                "causes' signals may be too weak for the evidence the domain reads",
            )
        self.done("verification")
        return accepted, built

    def _accepted(self, episode: Episode, reasons: dict[str, int]) -> bool:
        """Whether the verifier accepts ``episode`` (counting the kinds of rejection)."""
        try:
            verdict = self._verdict(episode)
        except Exception as exc:  # evidence() or the verifier failed on the domain's tables
            raise self.fail(
                "verification",
                f"cause {episode.draw.point!r}: verifying raised {type(exc).__name__}: {exc}",
            ) from exc
        for reason in verdict.reasons:
            kind = reason.split(":", 1)[0]
            reasons[kind] = reasons.get(kind, 0) + 1
        return verdict.accepted
