"""What a domain declares for the domain-free teacher: its causes' signatures, as data.

A signature is what an analyst of the domain would measure to see a cause: a quantity of one
table (a column's sum per time bucket, or the ratio of two columns' sums, e.g. orders per
visit) that the cause moves in a known direction and its confusers do not, and the slice shapes
the cause can take. The teacher (:mod:`.agent`) needs nothing else about a domain: it reads the
page, keeps the causes whose declared KPIs include the alerted one, and measures their
signatures over the whole table and per level of each dimension they can be sliced on.

The spec is the ``spec`` mapping of the agent's config (a Hydra YAML file in the domain's
``conf/agent``); :func:`investigation_spec` checks it and names the first thing wrong.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from causaltrace.errors import CausalTraceError

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class Signature:
    """One cause's footprint: ``numerator`` per ``denominator`` (sums per time bucket; no
    denominator: the numerator's level), moving in ``direction`` (+1 up, -1 down) under the
    cause; the KPIs of the page it ``moves``; the slice shapes it takes (``()``: no slice).

    It is read from ``table`` (a table of the episode or a declared view), whose ``columns``
    name a slice dimension differently (dimension -> column, e.g. ``service: cache``), keeping
    only the ``levels`` the cause can act on (dimension -> levels; all by default). A move
    smaller than ``min_change`` (a fraction, in the cause's direction) does not count however
    large its z."""

    cause: str
    label: str
    numerator: str
    denominator: str | None
    direction: int
    moves: tuple[str, ...]
    slices: tuple[tuple[str, ...], ...]
    table: str = ""
    columns: tuple[tuple[str, str], ...] = ()
    levels: tuple[tuple[str, tuple[str, ...]], ...] = ()
    min_change: float = 0.0

    @property
    def account_wide(self) -> bool:
        """Whether the cause's answer may take no slice."""
        return () in self.slices

    @property
    def dims(self) -> tuple[str, ...]:
        """Every dimension the cause's slices use, in declaration order."""
        return tuple(dict.fromkeys(d for shape in self.slices for d in shape))


@dataclass(frozen=True)
class View:
    """A table the first cell makes: ``sources`` joined on ``on`` (the config's ``keys``; one
    source: itself), with
    ``derive``d columns (name -> a pandas ``DataFrame.eval`` expression over its columns)."""

    name: str
    sources: tuple[str, ...]
    on: tuple[str, ...] = ()
    derive: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class InvestigationSpec:
    """The table the teacher reads and the signatures it tests (module docstring).

    ``window`` time buckets at the end of ``table`` are compared with the ``baseline`` buckets
    that end ``gap`` buckets before them (the monitor's comparison, less the buckets an early
    onset of the domain's prior would already move), each bucket against the baseline's buckets
    of its phase of ``period`` (7 for daily data with a weekly pattern); ``kpis`` maps each KPI the page may name to the
    words the page uses for it; ``alert_marker`` starts the page's alert line (empty: the
    prompt's first line); ``no_signal`` is the cause to answer when no signature moves (none:
    the strongest is answered). Among hypotheses past their bar, ``prefer`` ``strongest``
    answers the largest z and may stop early; ``declared`` answers the first in the order the
    causes are declared (deeper causes first, where a cause's symptoms show downstream as other
    causes' signatures) after every question is asked.
    """

    table: str
    time: str
    window: int
    baseline: int
    kpis: Mapping[str, str]
    signatures: tuple[Signature, ...]
    alert_marker: str = ""
    no_signal: str | None = None
    gap: int = 0
    period: int = 1
    views: tuple[View, ...] = ()
    prefer: str = "strongest"

    def signature(self, cause: str) -> Signature:
        for s in self.signatures:
            if s.cause == cause:
                return s
        raise CausalTraceError(f"investigation spec: no signature for cause {cause!r}")


def _fail(where: str, what: str) -> CausalTraceError:
    return CausalTraceError(f"investigation spec: {where}: {what}")


def _identifier(value: Any, where: str) -> str:
    if not isinstance(value, str) or not _NAME.match(value):
        raise _fail(where, f"expected a column or table name (letters, digits, _), got {value!r}")
    return value


def _whole(value: Any, where: str, least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise _fail(where, f"expected a whole number of time buckets >= {least}, got {value!r}")
    return value


def _slices(value: Any, where: str) -> tuple[tuple[str, ...], ...]:
    if value is None:
        return ((),)
    if isinstance(value, str) or not isinstance(value, Sequence) or not value:
        raise _fail(where, f"expected a list of slice shapes ([] for no slice), got {value!r}")
    shapes = []
    for i, shape in enumerate(value):
        if isinstance(shape, str) or not isinstance(shape, Sequence) or len(shape) > 2:
            raise _fail(
                f"{where}[{i}]", f"expected a list of at most two dimensions, got {shape!r}"
            )
        shapes.append(tuple(_identifier(d, f"{where}[{i}]") for d in shape))
    return tuple(shapes)


def _pairs(value: Any, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise _fail(where, f"expected a mapping, got {type(value).__name__}")
    return {_identifier(k, where): v for k, v in value.items()}


def _signature(cause: str, body: Any, kpis: Mapping[str, str], table: str) -> Signature:
    where = f"causes.{cause}"
    if not isinstance(body, Mapping):
        raise _fail(where, f"expected a mapping, got {type(body).__name__}")
    keys = {"label", "numerator", "denominator", "direction", "moves", "slices"}
    unknown = set(body) - keys - {"table", "columns", "levels", "min_change"}
    if unknown:
        raise _fail(where, f"unknown keys {sorted(unknown)}")
    if body.get("direction") not in (1, -1):
        raise _fail(f"{where}.direction", f"expected +1 or -1, got {body.get('direction')!r}")
    moves = tuple(body.get("moves") or kpis)
    for kpi in moves:
        if kpi not in kpis:
            raise _fail(f"{where}.moves", f"{kpi!r} is not one of the kpis {sorted(kpis)}")
    den = body.get("denominator")
    columns = {
        d: _identifier(c, f"{where}.columns.{d}")
        for d, c in _pairs(body.get("columns"), f"{where}.columns").items()
    }
    levels = {}
    for d, allowed in _pairs(body.get("levels"), f"{where}.levels").items():
        if isinstance(allowed, str) or not isinstance(allowed, Sequence) or not allowed:
            raise _fail(f"{where}.levels.{d}", f"expected a list of levels, got {allowed!r}")
        levels[d] = tuple(str(v) for v in allowed)
    return Signature(
        cause=cause,
        label=str(body.get("label") or body.get("numerator")),
        numerator=_identifier(body.get("numerator"), f"{where}.numerator"),
        denominator=None if den is None else _identifier(den, f"{where}.denominator"),
        direction=int(body["direction"]),
        moves=moves,
        slices=_slices(body.get("slices"), f"{where}.slices"),
        table=_identifier(body.get("table", table), f"{where}.table"),
        columns=tuple(columns.items()),
        levels=tuple(levels.items()),
        min_change=_fraction(body.get("min_change", 0.0), f"{where}.min_change"),
    )


def _fraction(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < 10:
        raise _fail(where, f"expected a fraction such as 0.1 (10%), got {value!r}")
    return float(value)


def _view(name: str, body: Any) -> View:
    where = f"views.{name}"
    if not isinstance(body, Mapping):
        raise _fail(where, f"expected a mapping, got {type(body).__name__}")
    unknown = set(body) - {"from", "keys", "derive"}  # not "on": YAML reads it as true
    if unknown:
        raise _fail(where, f"unknown keys {sorted(unknown)}")
    sources = body.get("from")
    sources = [sources] if isinstance(sources, str) else sources
    if not isinstance(sources, Sequence) or not sources:
        raise _fail(f"{where}.from", f"expected a table or a list of tables, got {sources!r}")
    on = body.get("keys") or ()
    if len(sources) > 1 and not on:
        raise _fail(f"{where}.keys", "a view of several tables needs the columns to join on")
    derive = {k: str(v) for k, v in _pairs(body.get("derive"), f"{where}.derive").items()}
    return View(
        name=_identifier(name, where),
        sources=tuple(_identifier(t, f"{where}.from") for t in sources),
        on=tuple(_identifier(c, f"{where}.keys") for c in on),
        derive=tuple(derive.items()),
    )


def investigation_spec(config: Mapping[str, Any]) -> InvestigationSpec:
    """The spec from its config mapping (plain data, e.g. a Hydra ``DictConfig`` converted).

    Raises:
        CausalTraceError: A missing or malformed key, named with its path.
    """
    if not isinstance(config, Mapping):
        raise _fail("spec", f"expected a mapping, got {type(config).__name__}")
    for key in ("table", "time", "window", "baseline", "kpis", "causes"):
        if key not in config:
            raise _fail(key, "missing")
    optional = {"gap", "period", "alert_marker", "no_signal", "views", "prefer"}
    unknown = set(config) - {"table", "time", "window", "baseline", "kpis", "causes"} - optional
    if unknown:
        raise _fail("spec", f"unknown keys {sorted(unknown)}")
    kpis = config["kpis"]
    if not isinstance(kpis, Mapping) or not kpis:
        raise _fail("kpis", "expected a mapping of KPI name to the page's words for it")
    causes = config["causes"]
    if not isinstance(causes, Mapping) or not causes:
        raise _fail("causes", "expected a mapping of cause name to its signature")
    period, baseline = config.get("period", 1), config.get("baseline")
    if isinstance(period, int) and isinstance(baseline, int) and baseline < period:
        raise _fail("baseline", f"{baseline} buckets hold no whole period of {period}")
    no_signal = config.get("no_signal")
    if no_signal is not None and no_signal in causes:
        raise _fail("no_signal", f"{no_signal!r} has a signature; it must be the cause of none")
    return InvestigationSpec(
        table=_identifier(config["table"], "table"),
        time=_identifier(config["time"], "time"),
        window=_whole(config["window"], "window", 2),
        baseline=_whole(config["baseline"], "baseline", 2),
        kpis={_identifier(k, "kpis"): str(v) for k, v in kpis.items()},
        signatures=tuple(
            _signature(str(c), body, kpis, config["table"]) for c, body in causes.items()
        ),
        alert_marker=str(config.get("alert_marker") or ""),
        no_signal=None if no_signal is None else str(no_signal),
        gap=_whole(config.get("gap", 0), "gap", 0),
        period=_whole(config.get("period", 1), "period", 1),
        views=tuple(_view(n, b) for n, b in _pairs(config.get("views"), "views").items()),
        prefer=_prefer(config.get("prefer", "strongest")),
    )


def _prefer(value: Any) -> str:
    if value not in ("strongest", "declared"):
        raise _fail("prefer", f"expected 'strongest' or 'declared', got {value!r}")
    return str(value)
