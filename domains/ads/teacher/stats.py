"""The teacher's arithmetic on the rows its queries returned (and in the row: the worksheet ships
it to the python tool, :mod:`.worksheet`; standard library only).

Every statistic compares the alert's week (``now``) with the three weeks before the last two
(``before``): whole weeks, so weekdays balance. As the domain's evidence does, rates are read as
observed over expected (each cell at its own rate before), relative to the rest of the account,
so mix shifts and account-wide movements cancel; volumes as a slice's share of the rest. A
statistic's ``z`` is its significance (counts are overdispersed: their Poisson variance is
scaled by ``PHI``); ``snr`` its size against one day's noise, floored by a practical size, so a
significant but tiny move is not taken for a cause (the verifier's rule).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist

PHI = 2.0  # overdispersion of daily counts (demand shocks that do not cancel)
PRACTICAL_LOG = 0.05  # a 5% move in a rate or a share
PRACTICAL_SHARE = 0.02  # two points of impression share
NOW_DAYS = 7
# The smallest standard error a week-on-weeks comparison can have: a day's practical noise
# (PRACTICAL_LOG) over 7 days against 21. Large counts make Poisson errors tiny, while real
# traffic drifts by a few percent a week; without this floor any drift would look certain.
MIN_SE = PRACTICAL_LOG * math.sqrt(1 / 7 + 1 / 21)


@dataclass(frozen=True)
class Stat:
    """A signature reading: ``effect`` in the cause's direction (log units, or points of
    impression share), ``z`` its significance, ``snr`` its size in units of a day's noise;
    ``direction`` the sign of the move the cause makes (-1: a drop), so the move itself can be
    printed (an ad that stopped serving reads -100%, not +66784944% "in its direction")."""

    effect: float
    z: float
    snr: float
    parts: tuple[Stat, ...] = ()  # the footprints of an AND of evidence, in a fixed order
    direction: int = 1

    @staticmethod
    def weakest(*stats: Stat | None) -> Stat | None:
        """AND of evidence: both footprints must show (the one with the lowest z); the
        footprints stay readable one by one (``parts``)."""
        if any(s is None for s in stats):
            return None
        low = min(stats, key=lambda s: s.z)  # type: ignore[union-attr]
        return Stat(low.effect, low.z, low.snr, tuple(stats), low.direction)  # type: ignore

    def components(self) -> tuple[Stat, ...]:
        return self.parts or (self,)


Row = Mapping[str, float]
Pred = Callable[[Mapping[str, str]], bool]


def total(rows: Iterable[tuple[Mapping[str, str], Row]], keep: Pred, column: str) -> float:
    return sum(values.get(column, 0.0) for labels, values in rows if keep(labels))


def _log_ratio(a: float, b: float) -> float:
    return math.log((a + 0.5) / (b + 0.5))


def _count_stat(
    effect: float, counts: tuple[float, ...], weekly: float, direction: int = 1
) -> Stat:
    """A log-ratio ``effect`` of overdispersed counts: its z over the counts' Poisson variance
    (never below ``MIN_SE``), and its size against one week's day-level noise of ``weekly``."""
    var = PHI * sum(1 / (c + 0.5) for c in counts)
    day = PHI * NOW_DAYS / (weekly + 0.5)
    se = max(math.sqrt(var), MIN_SE)
    return Stat(effect, effect / se, effect / max(math.sqrt(day), PRACTICAL_LOG), (), direction)


def oe_stat(
    obs_in: float, exp_in: float, obs_out: float, exp_out: float, direction: int
) -> Stat | None:
    """Observed over expected in the slice, relative to the same outside it."""
    if exp_in < 5 or exp_out < 5:
        return None
    effect = direction * (_log_ratio(obs_in, exp_in) - _log_ratio(obs_out, exp_out))
    return _count_stat(effect, (obs_in, exp_in, obs_out), exp_in, direction)


def share_stat(
    in_before: float,
    in_now: float,
    out_before: float,
    out_now: float,
    direction: int,
    weeks_before: int = 3,
) -> Stat | None:
    """The slice's volume against the rest's, now against before (raw sums: ``before`` spans
    ``weeks_before`` weeks, ``now`` one)."""
    if min(in_before, out_before) < 5 or out_now < 5:
        return None
    effect = direction * (_log_ratio(in_now, in_before) - _log_ratio(out_now, out_before))
    weekly = min(in_now, in_before / weeks_before)
    return _count_stat(effect, (in_now, in_before, out_now), weekly, direction)


def onset_scan(
    residuals: Sequence[float], sd: float, baseline_days: int, floor: float, direction: int
) -> tuple[Stat | None, int]:
    """A shift of a deseasonalised daily series at an unknown onset.

    ``residuals``: each day's log level against its weekday's usual one (the days after the
    baseline, in order); ``sd``: the baseline days' spread around their weekdays (ddof 1, seven
    weekday means estimated from them, hence the ``(n - 1) / (n - 7)`` correction). For each
    onset with at least two days after it, the mean residual after it; its variance is
    ``sigma^2 (1 + 7 / baseline_days) / n_after`` (each day's own noise plus its weekday mean's).
    Returns the onset of the largest z (and that statistic): the caller's threshold counts the
    onsets scanned."""
    n = len(residuals)
    if n < 2 or baseline_days <= 7:
        return None, 0
    sigma = max(sd * math.sqrt((baseline_days - 1) / (baseline_days - 7)), floor)
    best: Stat | None = None
    where = 0
    for onset in range(n - 1):
        after = residuals[onset:]
        effect = direction * sum(after) / len(after)
        se = sigma * math.sqrt((1 + 7 / baseline_days) / len(after))
        stat = Stat(effect, effect / se, effect / sigma)
        if best is None or stat.z > best.z:
            best, where = stat, onset
    return best, where


def scan_threshold(tests: int, alpha: float = 0.05) -> float:
    """One-sided Bonferroni z threshold for ``tests`` hypotheses read off one query."""
    return -NormalDist().inv_cdf(alpha / max(tests, 1))


# -- how much of an alert a hypothesis accounts for -------------------------------------------
MIN_CONTROL = 0.05  # a rest of the scope under this share of its volume is no control


def kpi_value(totals: Mapping[str, float], num: str, den: str | None) -> float:
    return totals[num] if den is None else totals[num] / max(totals[den], 1e-9)


def alert_share(
    rows: list[tuple[Mapping[str, str], Row]],
    in_scope: Pred,
    in_region: Pred,
    num: str,
    den: str | None,
    weeks_before: int,
    paged_move: float | None = None,
) -> float | None:
    """The share of an alert's move that the region accounts for (difference in differences).

    The region's KPI columns had they moved as the rest of the alert's scope did (or, when that
    rest is too small, as the rest of the account did) give the alert without the hypothesis;
    the share is the alert's move minus that move, over the alert's move (the domain's
    attribution rule, read on the returned rows). ``None``: no control to compare with.

    ``paged_move``: the relative move the page states. The rows compare the alert week with
    three clean weeks before it, the page with four weeks that may already hold the start of a
    fault, so the page's move can be smaller than the rows'. The share is of the paged move (the
    label's rule: a cause's part of what the page shows), so the hypothesis's part read on the
    rows is divided by the page's move where it is given and of the same sign."""
    columns = (num,) if den is None else (num, den)
    factual, counterfactual, baseline = {}, {}, {}
    for column in columns:
        b, n = f"{column}_before", f"{column}_now"

        def part(keep: Pred, key: str, before: str = b) -> float:
            return total(rows, keep, key) / (weeks_before if key == before else 1)

        inside = lambda lab: in_scope(lab) and in_region(lab)  # noqa: E731
        rest = lambda lab: in_scope(lab) and not in_region(lab)  # noqa: E731
        r_b, r_n = part(inside, b), part(inside, n)
        q_b, q_n = part(rest, b), part(rest, n)
        growth = None
        for control in (rest, lambda lab: not in_region(lab)):
            c_b, c_n = part(control, b), part(control, n)
            if c_b > 0 and c_b > MIN_CONTROL * (c_b + r_b):
                growth = c_n / c_b
                break
        if growth is None:
            return None
        factual[column] = r_n + q_n
        counterfactual[column] = r_b * growth + q_n
        baseline[column] = r_b + q_b
    base = kpi_value(baseline, num, den)
    if not base > 0:
        return 0.0
    move = kpi_value(factual, num, den) / base - 1.0
    without = kpi_value(counterfactual, num, den) / base - 1.0
    if move == 0.0:
        return 0.0
    part = move - without
    if paged_move is not None and paged_move * move > 0:
        return float(part / paged_move)
    return float(part / move)
