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

from collections.abc import Callable, Mapping, Sequence

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
        # The oracle asks for the same cells at every onset of its grid and for the same
        # reference under many causes: sums over cells are kept per (array, cells), the
        # arrays they were taken from pinned so that an ``id`` is never reused while cached.
        self._totals: dict[tuple[int, bytes | None], np.ndarray] = {}
        self._pinned: dict[int, np.ndarray] = {}
        self._site_masks: dict[bytes, np.ndarray] = {}
        self._segments: dict = {}

    # -- building blocks ----------------------------------------------------------------------
    def _total(self, values: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
        """Daily totals of ``values`` over the rows in ``mask`` (every row: None), computed once
        per array and mask content, read-only."""
        key = (id(values), None if mask is None else mask.tobytes())
        total = self._totals.get(key)
        if total is None:
            self._pinned[id(values)] = values
            total = values.sum(axis=0) if mask is None else mask.astype(np.float64) @ values
            total.setflags(write=False)
            self._totals[key] = total
        return total

    def _site_mask(self, cells: np.ndarray | None) -> np.ndarray | None:
        """Site-analytics rows whose cells all lie in ``cells`` (None: the whole account)."""
        if cells is None:
            return None
        key = cells.tobytes()
        mask = self._site_masks.get(key)
        if mask is None:
            inside = np.bincount(
                self.site_group, weights=cells.astype(np.float64), minlength=self.site_size.size
            )
            mask = self._site_masks[key] = inside == self.site_size
            mask.setflags(write=False)
        return mask

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
        observed = self._total(self.perf["impressions"], cells)
        expected = self._total(self._split_expected(split_over, onset), cells)
        return self._oe((observed, expected), None, onset, direction)

    def _split_expected(self, split_over: str, onset: int) -> np.ndarray:
        """Per cell and day: its segment's impressions at the cell's pre-onset share of them
        (the segment: every dimension but ``split_over``); computed once per onset."""
        key = (split_over, onset)
        if key not in self._segments:
            dims = tuple(d for d in LEAF_DIMS if d != split_over)
            if split_over not in self._segments:
                idx, _ = self.panel.group_index(dims)
                self._segments[split_over] = self.panel.group_sum(self.perf["impressions"], dims)[
                    idx
                ]
            segment = self._segments[split_over]
            impressions = self.perf["impressions"]
            base = slice(max(0, onset - PRE_WINDOW), onset)
            share = impressions[:, base].sum(axis=1) / np.maximum(segment[:, base].sum(axis=1), 1)
            self._segments[key] = share[:, None] * segment
        return self._segments[key]

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

    # -- the oracle's scan, batched ----------------------------------------------------------
    def scan(
        self, cause: str, masks: Sequence[np.ndarray], onsets: Sequence[int]
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """``statistic(cause, mask, onset).z`` for every mask and onset at once (rows: masks,
        columns: onsets), and where the statistic exists; None for a cause it does not batch
        (the caller then asks :meth:`statistic` one by one).

        The same formulas on stacked arrays: the sums run in another order than the scalar
        path's, so a z may differ from it in the last bits. The oracle uses the batch only to
        choose each candidate's onset and reads the chosen statistic from :meth:`statistic`."""
        masks = [m for m in masks]
        if cause in ACCOUNT_WIDE or not masks or any(m is None for m in masks):
            return None
        cells = np.stack(masks).astype(np.float64)
        onsets = np.asarray(onsets, dtype=np.int64)
        if cause == "TARGETING_EXPANSION":
            parts = (
                self._share_batch("clicks", cells, onsets, +1),
                self._rate_batch("conversions", "clicks", cells, onsets, -1, LAG_DAYS),
            )
        elif cause == "PLACEMENT_SHIFT":
            parts = (self._split_share_batch(cells, onsets, +1, "placement"),)
        elif cause == "BID_MODIFIER_CHANGE":
            parts = (
                self._share_batch("impressions", cells, onsets, +1),
                self._rate_batch("cost", "clicks", cells, onsets, +1),
            )
        elif cause == "CREATIVE_FATIGUE":
            parts = (self._rate_batch("clicks", "impressions", cells, onsets, -1),)
        elif cause == "TRACKING_OUTAGE":
            site = np.stack([self._site_mask(m) for m in masks]).astype(np.float64)
            parts = (
                self._rate_batch(
                    "conversions", "backend_orders", site, onsets, -1, LAG_DAYS, self.site
                ),
            )
        elif cause == "LANDING_PAGE_BREAK":
            site = np.stack([self._site_mask(m) for m in masks]).astype(np.float64)
            parts = (self._share_batch("backend_orders", site, onsets, -1, self.site),)
        elif cause == "INVALID_TRAFFIC":
            parts = (
                self._rate_batch("invalid_clicks", "clicks", cells, onsets, +1),
                self._rate_batch("clicks", "impressions", cells, onsets, +1),
            )
        elif cause == "AD_DISAPPROVAL":
            parts = (self._split_share_batch(cells, onsets, -1, "creative"),)
        else:
            return None
        return _weakest_batch(parts)

    def _rate_batch(self, num, den, cells, onsets, direction, exclude_last=0, table=None):
        table = self.perf if table is None else table
        size = cells.sum(axis=1)
        usable = (size > 0) & (size < cells.shape[1])  # not empty, not everything
        observed = cells @ table[num]
        observed_all = table[num].sum(axis=0)
        out = []
        for onset in onsets:
            expected = self._expected_rate(table, num, den, int(onset))
            inside_e = cells @ expected
            outside = (observed_all - observed, expected.sum(axis=0) - inside_e)
            out.append(
                _oe_batch((observed, inside_e), outside, int(onset), direction, exclude_last)
            )
        return _stack_onsets(out, usable)

    def _share_batch(self, column, cells, onsets, direction, table=None):
        table = self.perf if table is None else table
        size = cells.sum(axis=1)
        usable = (size > 0) & (size < cells.shape[1])
        inside = cells @ table[column]
        rest = table[column].sum(axis=0) - inside
        out = []
        for onset in onsets:
            base = slice(max(0, int(onset) - PRE_WINDOW), int(onset))
            pre = self.weekday[base]
            days = (pre[None, :] == np.arange(7)[:, None]).astype(np.float64)  # weekday x day
            ratio = (inside[:, base] @ days.T) / np.maximum(rest[:, base] @ days.T, 1e-9)
            expected = rest * ratio[:, self.weekday]
            out.append(_oe_batch((inside, expected), None, int(onset), direction))
        return _stack_onsets(out, usable)

    def _split_share_batch(self, cells, onsets, direction, split_over):
        usable = cells.sum(axis=1) > 0
        observed = cells @ self.perf["impressions"]
        out = []
        for onset in onsets:
            expected = cells @ self._split_expected(split_over, int(onset))
            out.append(_oe_batch((observed, expected), None, int(onset), direction))
        return _stack_onsets(out, usable)

    def _account(self, cause: str, onset: int) -> Statistic | None:
        if cause == "BUDGET_CAP":  # more of the eligible auctions lost to budget
            return self._daily(self.lost_budget, onset, +1, PRACTICAL_SHARE)
        if cause == "COMPETITIVE_PRESSURE":  # more lost to rank
            return self._daily(self.lost_rank, onset, +1, PRACTICAL_SHARE)
        # DEMAND_SHIFT: fewer eligible auctions
        return self._daily(np.log(np.maximum(self.eligible, 1.0)), onset, -1, PRACTICAL_LOG)


ACCOUNT_WIDE = ("BUDGET_CAP", "COMPETITIVE_PRESSURE", "DEMAND_SHIFT")


def _part_batch(observed: np.ndarray, expected: np.ndarray, onset: int, end: int):
    """:meth:`AdsEvidence._part` for stacked rows: (effect, z, variance, daily, valid)."""
    start = max(0, onset - PRE_WINDOW)
    pre_o, pre_e = observed[:, start:onset], expected[:, start:onset]
    used = pre_e > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(used, (pre_o - pre_e) ** 2 / np.where(used, pre_e, 1.0), 0.0)
        n_used = used.sum(axis=1)
        mean = np.where(n_used > 0, terms.sum(axis=1) / np.maximum(n_used, 1), 1.0)
        phi = np.where(mean > 1.0, mean, 1.0)
        base_o = pre_o.sum(axis=1)
        post_o, post_e = observed[:, onset:end].sum(axis=1), expected[:, onset:end].sum(axis=1)
        ratio = post_e / np.where(base_o > 0.5, base_o, 0.5)
        total = post_o + base_o
        p0 = ratio / (1.0 + ratio)
        null_post, null_pre = total * p0, total * (1.0 - p0)
        effect = np.log((post_o + 0.5) / (post_e + 0.5))
        z = (post_o - null_post) / np.sqrt(phi * null_post * (1.0 - p0))
        variance = phi * (1.0 / (null_post + 0.5) + 1.0 / (null_pre + 0.5))
        daily = phi / (null_post / max(end - onset, 1) + 0.5)
    # Lenient at the threshold: an onset the scalar path refuses is only read in vain.
    return effect, z, variance, daily, null_post >= MIN_EVENTS * (1.0 - 1e-9)


def _oe_batch(inside, outside, onset, direction, exclude_last=0):
    """:meth:`AdsEvidence._oe` for stacked rows: (effect, noise, z, valid) in the cause's
    direction."""
    n_rows, n_days = inside[0].shape
    end = n_days - exclude_last
    if onset < MIN_PRE_DAYS or end <= onset:
        nothing = np.zeros(n_rows)
        return nothing, nothing, nothing, np.zeros(n_rows, dtype=bool)
    effect, z, variance, daily, valid = _part_batch(*inside, onset, end)
    if outside is not None:
        o_effect, _, o_variance, o_daily, o_valid = _part_batch(*outside, onset, end)
        effect, variance, daily = effect - o_effect, variance + o_variance, daily + o_daily
        with np.errstate(divide="ignore", invalid="ignore"):
            z = effect / np.sqrt(variance)
        valid = valid & o_valid
    noise = np.sqrt(daily)
    noise = np.where(noise > PRACTICAL_LOG, noise, PRACTICAL_LOG)
    return direction * effect, noise, direction * z, valid


def _stack_onsets(per_onset, usable: np.ndarray):
    """(effect, noise, z, valid) arrays of shape (rows, onsets) from one tuple per onset."""
    effect, noise, z, valid = (np.stack(column, axis=1) for column in zip(*per_onset))
    return effect, noise, z, valid & usable[:, None]


def _weakest_batch(parts) -> tuple[np.ndarray, np.ndarray]:
    """:meth:`Statistic.weakest` on stacked parts: the z of the part of lowest SNR (the first on
    ties), and where every part exists."""
    snrs = []
    for effect, noise, _, _ in parts:
        with np.errstate(divide="ignore", invalid="ignore"):
            snr = effect / noise
        snrs.append(np.where((noise > 0) & np.isfinite(effect), snr, 0.0))
    z, low = parts[0][2], snrs[0]
    valid = parts[0][3]
    for (_, _, z_part, valid_part), snr in zip(parts[1:], snrs[1:]):
        lower = snr < low
        z, low = np.where(lower, z_part, z), np.where(lower, snr, low)
        valid = valid & valid_part
    return z, valid
