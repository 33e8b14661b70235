"""Signature statistics of the 12 causes, computed from the agent-visible tables alone.

Each statistic is a daily log series over the candidate cells, deseasonalised by the weekday
means of the days before the onset; its effect is the mean shift after the onset in the cause's
direction, and its noise the standard deviation of the residuals before it, floored by the
sampling noise of the counts behind it and by a practical floor (a shift smaller than
``PRACTICAL_LOG`` or ``PRACTICAL_SHARE`` is not worth an alert). Where a cause leaves two
footprints, its statistic is the weaker of the two: the evidence must show both.

Rates are observed over expected (each cell's count against its own rate before the onset,
weighted by today's volume), minus the same for the rest of the account: mix shifts and
account-wide movements (seasonality, demand, conversion lag) cancel, so a rate statistic moves
only when rates inside the cells move. Placement and creative shares are likewise observed over
expected within each segment they split (the ad group for creatives, the campaign segment for
placements).

Conversions keep arriving for days after the click, so statistics that read reported
conversions ignore the last ``LAG_DAYS`` days, as an analyst (and the platforms' own
explanations) would.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
import pandas as pd

from causaltrace import Panel
from causaltrace.episodes.verify import Statistic
from causaltrace_domains.ads.attribution import AlertAttribution
from causaltrace_domains.ads.render import LEAF_DIMS, SITE_DIMS

LAG_DAYS = 3
MIN_PRE_DAYS = 14
MIN_EVENTS = 5.0  # fewer expected events after the onset cannot show an effect
PRIOR_EVENTS = 2.0  # pseudo-events that shrink a cell's baseline rate to the account's
PRE_WINDOW = 21  # baselines come from the 3 weeks before the onset: competition drifts
PRACTICAL_LOG = 0.05  # a 5% move in a rate or share
PRACTICAL_SHARE = 0.02  # two points of impression share


def _cell_index(
    panel: Panel,
    frame: pd.DataFrame,
    dims: tuple[str, ...],
    rename: Mapping[str, str] | None = None,
) -> np.ndarray:
    """The panel group (on ``dims``) of every row of ``frame``, by level names."""
    rename = rename or {}
    key = np.zeros(len(frame), dtype=np.int64)
    for d in dims:
        dim = panel.dimension(d)
        # Categorical codes against the dimension's own level order (vectorized; a level the
        # panel does not know becomes -1 and matches no cell). Rendered tables already carry
        # exactly these categories: their codes are taken as they are.
        column = frame[rename.get(d, d)]
        levels = list(dim.levels)
        if isinstance(column.dtype, pd.CategoricalDtype) and list(column.cat.categories) == levels:
            codes = column.cat.codes.to_numpy()
        else:
            codes = pd.Categorical(column, categories=levels).codes
        key = key * len(dim.levels) + codes.astype(np.int64)
    cell_key = np.zeros(panel.n_cells, dtype=np.int64)
    for d in dims:
        cell_key = cell_key * len(panel.dimension(d).levels) + panel.codes(d)
    groups = np.unique(cell_key)
    return np.searchsorted(groups, key)


def _dense(
    frame: pd.DataFrame,
    group: np.ndarray,
    n_groups: int,
    day: np.ndarray,
    n_days: int,
    columns: tuple[str, ...],
) -> dict[str, np.ndarray]:
    flat = group * n_days + day  # bincount sums in row order, like np.add.at, much faster
    return {
        col: np.bincount(
            flat, weights=frame[col].to_numpy(dtype=np.float64), minlength=n_groups * n_days
        ).reshape(n_groups, n_days)
        for col in columns
    }


class AdsEvidence:
    """Per-episode evidence: the reports as dense (segment x day) arrays, and the statistics."""

    def __init__(
        self,
        panel: Panel,
        tables: Mapping[str, pd.DataFrame],
        attribution: Callable[[Mapping[str, np.ndarray]], AlertAttribution] | None = None,
    ):
        self.panel = panel
        dates = panel.time.values.astype("datetime64[D]")
        self.n_days = len(dates)
        self.weekday = (dates.astype(np.int64) + 3) % 7

        def day_of(frame):
            return np.searchsorted(dates, frame["date"].to_numpy().astype("datetime64[D]"))

        perf = tables["perf_daily"]
        cells = _cell_index(panel, perf, LEAF_DIMS)
        self.perf = _dense(
            perf,
            cells,
            panel.n_cells,
            day_of(perf),
            self.n_days,
            ("impressions", "clicks", "cost", "conversions", "conversion_value", "invalid_clicks"),
        )
        # How much of the prompt's alerts a hypothesis accounts for (built by the domain, which
        # knows its monitor), for the verifier's relevance check and the oracle.
        self.attribution = None if attribution is None else attribution(self.perf)
        site = tables["site_analytics_daily"]
        self.site_group, n_site = panel.group_index(SITE_DIMS)
        site_rows = _cell_index(panel, site, SITE_DIMS, {"campaign": "utm_campaign"})
        self.site = _dense(
            site, site_rows, n_site, day_of(site), self.n_days, ("sessions", "backend_orders")
        )
        # Reported conversions at the site grain, to compare with backend orders.
        self.site["conversions"] = panel.group_sum(self.perf["conversions"], SITE_DIMS)
        self.site_size = np.bincount(self.site_group, minlength=n_site)
        # Account-level shares of the search auctions lost to budget and to rank: the campaigns'
        # shares weighted by their impressions (campaigns without search report NaN: skipped).
        shares = tables["impression_share_daily"]
        share = shares["search_impression_share"].to_numpy()
        reported = np.isfinite(share)
        day = day_of(shares)[reported]
        eligible = shares["impressions"].to_numpy()[reported] / np.maximum(share[reported], 1e-6)
        self.eligible = np.bincount(day, weights=eligible, minlength=self.n_days)
        weight = np.maximum(self.eligible, 1.0)
        self.lost_budget, self.lost_rank = (
            np.bincount(
                day, weights=eligible * shares[column].to_numpy()[reported], minlength=self.n_days
            )
            / weight
            for column in ("search_lost_is_budget", "search_lost_is_rank")
        )
        self._expected: dict = {}

    # -- building blocks ----------------------------------------------------------------------
    @staticmethod
    def _total(values: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
        return values.sum(axis=0) if mask is None else mask.astype(np.float64) @ values

    def _site_mask(self, cells: np.ndarray | None) -> np.ndarray | None:
        """Site-analytics rows whose cells all lie in ``cells`` (None: the whole account)."""
        if cells is None:
            return None
        inside = np.bincount(
            self.site_group, weights=cells.astype(np.float64), minlength=self.site_size.size
        )
        return inside == self.site_size

    def _daily(
        self, series: np.ndarray, onset: int, direction: float, floor: float
    ) -> Statistic | None:
        """Mean shift of a deseasonalised daily series (account-level shares and volumes)."""
        if onset < MIN_PRE_DAYS or onset >= self.n_days:
            return None
        pre_days = self.weekday[:onset]
        weekday_mean = np.array([series[:onset][pre_days == d].mean() for d in range(7)])
        resid = series - weekday_mean[self.weekday]
        noise = max(float(np.std(resid[:onset], ddof=7)), floor)
        effect = float(direction * resid[onset:].mean())
        return Statistic.from_daily(effect, noise, self.n_days - onset, onset)

    def _part(self, observed: np.ndarray, expected: np.ndarray, onset: int, end: int):
        """One observed-over-expected comparison after the onset.

        Returns the log effect, the z of the score test of "the post-onset rate equals the
        baseline's" (conditional on the total count, the post-onset count is binomial; its
        variance under that null is well calibrated even for a handful of events, where a Wald
        test on log counts is not), the effect's variance under the null, and a day's variance.
        Counts are overdispersed: the Pearson dispersion of the baseline days (at least 1, the
        Poisson value) scales the variances. ``None`` when under ``MIN_EVENTS`` events are
        expected after the onset: the tables cannot show an effect there.
        """
        start = max(0, onset - PRE_WINDOW)
        pre_o, pre_e = observed[start:onset], expected[start:onset]
        used = pre_e > 0
        phi = max(
            1.0,
            float(np.mean((pre_o[used] - pre_e[used]) ** 2 / pre_e[used])) if used.any() else 1.0,
        )
        base_o = float(pre_o.sum())
        post_o, post_e = float(observed[onset:end].sum()), float(expected[onset:end].sum())
        ratio = post_e / max(base_o, 0.5)  # post-onset exposure per baseline event
        total = post_o + base_o
        p0 = ratio / (1.0 + ratio)
        null_post, null_pre = total * p0, total * (1.0 - p0)
        if null_post < MIN_EVENTS:
            return None
        effect = float(np.log((post_o + 0.5) / (post_e + 0.5)))
        z = (post_o - null_post) / np.sqrt(phi * null_post * (1.0 - p0))
        variance = phi * (1.0 / (null_post + 0.5) + 1.0 / (null_pre + 0.5))
        daily = phi / (null_post / max(end - onset, 1) + 0.5)
        return effect, float(z), variance, daily

    def _oe(self, inside, outside, onset, direction, exclude_last=0) -> Statistic | None:
        """Observed-over-expected statistic of the cells, minus that of a reference if given."""
        end = self.n_days - exclude_last
        if onset < MIN_PRE_DAYS or end <= onset:
            return None
        part = self._part(*inside, onset, end)
        if part is None:
            return None
        effect, z, variance, daily = part
        if outside is not None:
            other = self._part(*outside, onset, end)
            if other is None:
                return None
            effect, variance, daily = effect - other[0], variance + other[2], daily + other[3]
            z = effect / np.sqrt(variance)
        noise = max(float(np.sqrt(daily)), PRACTICAL_LOG)
        return Statistic(direction * effect, noise, float(np.sqrt(variance)), direction * z)

    def _expected_rate(self, table, num, den, onset):
        """Per row and day: ``num`` expected at the row's own pre-onset rate num/den.

        A row's baseline rate is shrunk toward the rate of its group (campaign x placement for
        the ads report, campaign for site analytics) by ``PRIOR_EVENTS`` pseudo-events, so a
        row with little volume before the onset expects its group's rate rather than 0/0.
        """
        key = (id(table), num, den, onset)
        if key not in self._expected:
            n, d = table[num], table[den]
            base = slice(max(0, onset - PRE_WINDOW), onset)
            n_sum, d_sum = n[:, base].sum(axis=1), d[:, base].sum(axis=1)
            group = self._rate_groups(table)
            g_rate = (np.bincount(group, weights=n_sum) + 1e-9) / (
                np.bincount(group, weights=d_sum) + 1e-9
            )
            prior = g_rate[group]
            rate = (n_sum + PRIOR_EVENTS) / (d_sum + PRIOR_EVENTS / np.maximum(prior, 1e-12))
            self._expected[key] = rate[:, None] * d
        return self._expected[key]

    def _rate_groups(self, table) -> np.ndarray:
        if table is self.perf:
            return self.panel.group_index(("campaign", "placement"))[0]
        # Site rows: their campaign (the first cell of each site group gives it).
        first = np.zeros(self.site_size.size, dtype=np.int64)
        first[self.site_group[::-1]] = np.arange(self.panel.n_cells)[::-1]
        return self.panel.codes("campaign")[first]

    def _rate(
        self,
        num: str,
        den: str,
        cells,
        onset,
        direction,
        exclude_last=0,
        table=None,
        reference=None,
    ) -> Statistic | None:
        """A rate in the cells against its own past, relative to the reference's."""
        table = self.perf if table is None else table
        if cells is None or not cells.any() or cells.all():
            return None
        reference = ~cells if reference is None else reference
        if not reference.any():
            return None
        expected = self._expected_rate(table, num, den, onset)
        inside = (self._total(table[num], cells), self._total(expected, cells))
        outside = (self._total(table[num], reference), self._total(expected, reference))
        return self._oe(inside, outside, onset, direction, exclude_last)

    def _share(
        self, column: str, cells, onset, direction, table=None, reference=None
    ) -> Statistic | None:
        """The cells' volume against the reference's, at the pre-onset ratio of the same
        weekday."""
        table = self.perf if table is None else table
        if cells is None or not cells.any() or cells.all():
            return None
        reference = ~cells if reference is None else reference
        if not reference.any():
            return None
        inside = self._total(table[column], cells)
        rest = self._total(table[column], reference)
        base = slice(max(0, onset - PRE_WINDOW), onset)
        pre = self.weekday[base]
        ratio = np.array(
            [inside[base][pre == d].sum() / max(rest[base][pre == d].sum(), 1e-9) for d in range(7)]
        )
        return self._oe((inside, rest * ratio[self.weekday]), None, onset, direction)

    def _split_share(self, cells, onset, direction, split_over: str) -> Statistic | None:
        """The cells' impressions over what they would get at their pre-onset share of the
        segment they split (all dimensions but ``split_over``)."""
        if cells is None or not cells.any():
            return None
        dims = tuple(d for d in LEAF_DIMS if d != split_over)
        idx, _ = self.panel.group_index(dims)
        impressions = self.perf["impressions"]
        segment = self.panel.group_sum(impressions, dims)[idx]
        base = slice(max(0, onset - PRE_WINDOW), onset)
        share = impressions[:, base].sum(axis=1) / np.maximum(segment[:, base].sum(axis=1), 1)
        observed = self._total(impressions, cells)
        expected = self._total(share[:, None] * segment, cells)
        return self._oe((observed, expected), None, onset, direction)

    def alert_share(self, cause: str, cells: np.ndarray | None, onset: int) -> float | None:
        """The largest share of one of the prompt's alerts that ``cause`` acting on ``cells``
        accounts for (:mod:`causaltrace_domains.ads.attribution`); None where it cannot be
        told (no monitor, or a campaign-wide hypothesis)."""
        if self.attribution is None or cause in ACCOUNT_WIDE:
            return None
        return self.attribution.share(cause, cells)

    # -- the signatures -----------------------------------------------------------------------
    def statistic(
        self, cause: str, cells: np.ndarray | None, onset: int, reference: np.ndarray | None = None
    ) -> Statistic | None:
        if cause in ACCOUNT_WIDE:
            return None if cells is not None else self._account(cause, onset)
        ref = reference
        if cause == "TARGETING_EXPANSION":  # the segment grows and converts worse
            return Statistic.weakest(
                self._share("clicks", cells, onset, +1, reference=ref),
                self._rate("conversions", "clicks", cells, onset, -1, LAG_DAYS, reference=ref),
            )
        if cause == "PLACEMENT_SHIFT":  # the placement takes more of each segment it serves
            return self._split_share(cells, onset, +1, "placement")
        if cause == "BID_MODIFIER_CHANGE":  # the segment grows and pays more per click
            return Statistic.weakest(
                self._share("impressions", cells, onset, +1, reference=ref),
                self._rate("cost", "clicks", cells, onset, +1, reference=ref),
            )
        if cause == "CREATIVE_FATIGUE":  # CTR falls where the ad serves
            return self._rate("clicks", "impressions", cells, onset, -1, reference=ref)
        if cause == "TRACKING_OUTAGE":  # tagged conversions fall against backend orders
            return self._rate(
                "conversions",
                "backend_orders",
                self._site_mask(cells),
                onset,
                -1,
                LAG_DAYS,
                table=self.site,
                reference=self._site_mask(ref),
            )
        if cause == "LANDING_PAGE_BREAK":  # backend orders fall against the rest
            return self._share(
                "backend_orders",
                self._site_mask(cells),
                onset,
                -1,
                table=self.site,
                reference=self._site_mask(ref),
            )
        if cause == "INVALID_TRAFFIC":  # invalid clicks and CTR rise
            return Statistic.weakest(
                self._rate("invalid_clicks", "clicks", cells, onset, +1, reference=ref),
                self._rate("clicks", "impressions", cells, onset, +1, reference=ref),
            )
        if cause == "AD_DISAPPROVAL":  # the ad loses its share of its ad groups
            return self._split_share(cells, onset, -1, "creative")
        return None

    def _account(self, cause: str, onset: int) -> Statistic | None:
        if cause == "BUDGET_CAP":  # more of the eligible auctions lost to budget
            return self._daily(self.lost_budget, onset, +1, PRACTICAL_SHARE)
        if cause == "COMPETITIVE_PRESSURE":  # more lost to rank
            return self._daily(self.lost_rank, onset, +1, PRACTICAL_SHARE)
        # DEMAND_SHIFT: fewer eligible auctions
        return self._daily(np.log(np.maximum(self.eligible, 1.0)), onset, -1, PRACTICAL_LOG)


ACCOUNT_WIDE = ("BUDGET_CAP", "COMPETITIVE_PRESSURE", "DEMAND_SHIFT")
