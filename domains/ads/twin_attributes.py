"""What the accepted causes' edits look like, measured, so that twins can be drawn like them.

The verifier keeps a cause only where its edit moved the page, so the *accepted* edits of a cause
differ from its prior: larger, broader, more recent, of some target kinds more than others.
Twins drawn from the prior (or from hand-fitted quantiles of it) then differ from the causes by
their attributes, and a learner reads the answer from the change log: issue 46's probe named
TARGETING_EXPANSION from "an audience-targeted, recent targeting edit" and BID_MODIFIER_CHANGE
from the raise's size.

This module measures the joint distribution of the attributes the change history shows of a
cause's accepted edits (what the edit targets, its size as a quantile of the cause's strength
prior, how many campaigns it reaches, how many days before the data's end it was made) from the
labels of generated splits, and stores it as a small JSON table. With ``AdsConfig.twin_attributes``
naming a table, a twin of that cause draws one measured row and then a draw of the cause's own
prior that matches it (:mod:`causaltrace_domains.ads.twins`): the twins' attributes follow the
accepted causes' jointly, not margin by margin, and re-measuring after a change of the verifier
or the physics is one command (:mod:`causaltrace_domains.ads.measure_twin_attributes`)::

    python -m causaltrace_domains.ads.measure_twin_attributes data/ads_test ... --out T.json

Left out: the hour of the edit (not in the label) and the alert direction an edit co-occurs with
(a twin is drawn before the worlds are simulated, so it cannot read the page it will sit on).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from causaltrace import InterventionPrior, Panel, Slice, parse_slice
from causaltrace.errors import CausalTraceError

# The causes whose twins read a table: an edit whose slice and size the change history shows.
MEASURED_CAUSES = ("BID_MODIFIER_CHANGE", "TARGETING_EXPANSION")
TABLES = Path(__file__).parent / "conf" / "twin_attributes"


@dataclass(frozen=True)
class EditAttributes:
    """One accepted cause edit as the change history shows it.

    Args:
        dims: The dimensions its slice names (what it targets), sorted: ``("geo",)``.
        strength_quantile: Where its size sits in the cause's strength prior, in [0, 1] (in log
            space for a log-uniform prior), so that a tier that rescales the prior keeps it.
        reach: How many campaigns it was written on.
        days_before_end: How many days before the data's last day it acts from.
    """

    dims: tuple[str, ...]
    strength_quantile: float
    reach: int
    days_before_end: int


@dataclass(frozen=True)
class AcceptedAttributes:
    """The measured rows of each cause, and what they were measured on."""

    rows: Mapping[str, tuple[EditAttributes, ...]]
    source: tuple[str, ...] = ()

    def draw(self, cause: str, rng: np.random.Generator) -> EditAttributes | None:
        """One of ``cause``'s rows, uniformly (None where the table has none)."""
        rows = self.rows.get(cause, ())
        return rows[int(rng.integers(len(rows)))] if rows else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": list(self.source),
            "rows": {
                c: [{**asdict(r), "dims": list(r.dims)} for r in rows]
                for c, rows in sorted(self.rows.items())
            },
        }

    @classmethod
    def from_dict(
        cls, data: Mapping[str, Any], where: str = "twin attributes"
    ) -> AcceptedAttributes:
        try:
            rows = {
                str(cause): tuple(
                    EditAttributes(
                        tuple(r["dims"]),
                        float(r["strength_quantile"]),
                        int(r["reach"]),
                        int(r["days_before_end"]),
                    )
                    for r in items
                )
                for cause, items in data["rows"].items()
            }
        except (KeyError, TypeError, ValueError) as exc:
            raise CausalTraceError(f"{where}: malformed table ({exc!r})") from None
        unknown = sorted(set(rows) - set(MEASURED_CAUSES))
        if unknown:
            raise CausalTraceError(f"{where}: no twin reads causes {unknown}")
        return cls(rows, tuple(data.get("source", ())))


@lru_cache(maxsize=8)
def load_table(name: str) -> AcceptedAttributes:
    """A table by name (a file of ``conf/twin_attributes/``, without ``.json``) or by path.

    Raises:
        CausalTraceError: No such table, or a malformed one (named).
    """
    path = Path(name)
    if path.suffix != ".json":
        path = TABLES / f"{name}.json"
    if not path.is_file():
        known = sorted(p.stem for p in TABLES.glob("*.json"))
        raise CausalTraceError(f"twin_attributes: no table {name!r} (shipped: {known})")
    return AcceptedAttributes.from_dict(json.loads(path.read_text(encoding="utf-8")), str(path))


def strength_quantile(prior: InterventionPrior, strength: float) -> float:
    """Where ``strength`` sits in ``prior``'s range, clipped to [0, 1]."""
    low, high = prior.strength
    if high <= low:
        return 0.5
    if prior.log_strength:
        q = (math.log(strength) - math.log(low)) / (math.log(high) - math.log(low))
    else:
        q = (strength - low) / (high - low)
    return float(min(max(q, 0.0), 1.0))


def strength_at(prior: InterventionPrior, quantile: float) -> float:
    """The strength at ``quantile`` of ``prior``'s range (the inverse of
    :func:`strength_quantile`)."""
    low, high = prior.strength
    if prior.log_strength:
        return float(math.exp(math.log(low) + quantile * (math.log(high) - math.log(low))))
    return float(low + quantile * (high - low))


def edit_attributes(
    prior: InterventionPrior, panel: Panel, where: Slice, strength: float, onset: int
) -> EditAttributes:
    """The attributes of an edit of ``prior``'s cause on ``where`` (its reach: the campaigns
    with a cell in the slice, as :func:`~causaltrace_domains.ads.edits.touched_campaigns`)."""
    from causaltrace_domains.ads.edits import touched_campaigns

    return EditAttributes(
        tuple(sorted(where.dims)),
        strength_quantile(prior, strength),
        len(touched_campaigns(panel, where)),
        int(panel.n_time - 1 - onset),
    )


def measure(datasets: Sequence[str | Path]) -> AcceptedAttributes:
    """The accepted edits of :data:`MEASURED_CAUSES` in ``datasets`` (every labelled cause of
    every episode, a concurrent episode's second cause included), each against its own
    dataset's priors (its tier's, where it has one).

    Raises:
        CausalTraceError: A directory that is not a dataset.
    """
    from causaltrace.datasets.reading import dataset_domain, load_labels

    rows: dict[str, list[EditAttributes]] = {c: [] for c in MEASURED_CAUSES}
    for directory in datasets:
        domain = dataset_domain(directory)
        scm = domain.scm
        for label in load_labels(directory).values():
            for cause in (label, *(label.get("also") or ())):
                if cause["cause"] not in rows or not cause.get("slice"):
                    continue
                prior = scm.intervention_points[cause["cause"]].prior
                where = parse_slice(cause["slice"], scm.panel)
                rows[cause["cause"]].append(
                    edit_attributes(
                        prior, scm.panel, where, float(cause["strength"]), int(cause["onset"])
                    )
                )
    ordered = {c: tuple(sorted(r, key=_order)) for c, r in rows.items() if r}
    return AcceptedAttributes(ordered, tuple(str(d) for d in datasets))


def _order(row: EditAttributes) -> tuple:
    return (row.dims, row.strength_quantile, row.reach, row.days_before_end)
