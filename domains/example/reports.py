"""What the shop's analyst sees, the alert, and the evidence the verifier reads."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from causaltrace import Panel, World
from causaltrace.verify import Statistic

DIMS = ("channel", "region")


def render_tables(panel: Panel, world: World) -> dict[str, pd.DataFrame]:
    """One daily table at the channel x region grain (zero rows kept)."""
    n_days = panel.n_time
    frame = pd.DataFrame(
        {
            "date": np.tile(panel.time.values.astype("datetime64[D]"), panel.n_cells),
            **{
                d: pd.Categorical.from_codes(
                    np.repeat(panel.codes(d), n_days), categories=list(panel.dimension(d).levels)
                )
                for d in DIMS
            },
            "visits": world["visits"].reshape(-1),
            "orders": world["orders"].reshape(-1),
            "tracked_orders": world["tracked_orders"].reshape(-1),
        }
    )
    return {"shop_daily": frame}


def alert_text(tables: Mapping[str, pd.DataFrame]) -> str:
    daily = tables["shop_daily"].groupby("date")["tracked_orders"].sum().to_numpy()
    change = daily[-7:].sum() / max(daily[-35:-7].sum() / 4, 1) - 1
    return f"tracked orders moved {change:+.1%} in the last 7 days against the 4 weeks before"


class ExampleEvidence:
    """Signatures: visits for TRAFFIC_DROP, orders per visit for CHECKOUT_BUG, tracked per
    real order for TRACKING_LOSS; each a pooled log change with its Poisson noise."""

    def __init__(self, panel: Panel, tables: Mapping[str, pd.DataFrame]):
        frame = tables["shop_daily"]
        self.n_days = panel.n_time
        self.arrays = {
            c: frame[c].to_numpy(float).reshape(panel.n_cells, self.n_days)
            for c in ("visits", "orders", "tracked_orders")
        }

    def _change(self, num, den, onset):
        pre, post = slice(max(0, onset - 21), onset), slice(onset, self.n_days)
        a, b, c, d = num[post].sum(), den[post].sum(), num[pre].sum(), den[pre].sum()
        effect = np.log((a + 0.5) / (b + 0.5)) - np.log((c + 0.5) / (d + 0.5))
        variance = 1 / (a + 0.5) + 1 / (b + 0.5) + 1 / (c + 0.5) + 1 / (d + 0.5)
        daily_noise = np.sqrt(variance * (post.stop - post.start))
        return effect, variance, daily_noise

    def statistic(self, cause, cells, onset, reference=None):
        cells = np.ones(len(self.arrays["visits"]), bool) if cells is None else cells
        if cause == "TRAFFIC_DROP":
            visits = self.arrays["visits"][cells].sum(0)
            ones = np.full(self.n_days, visits[:onset].mean())
            effect, variance, noise = self._change(visits, ones, onset)
            return Statistic(-effect, max(noise, 0.05), np.sqrt(variance))
        num, den = {
            "CHECKOUT_BUG": ("orders", "visits"),
            "TRACKING_LOSS": ("tracked_orders", "orders"),
        }.get(cause, (None, None))
        if num is None or not cells.any() or cells.all():
            return None
        rest = ~cells if reference is None else reference
        e1, v1, n1 = self._change(
            self.arrays[num][cells].sum(0), self.arrays[den][cells].sum(0), onset
        )
        e2, v2, n2 = self._change(
            self.arrays[num][rest].sum(0), self.arrays[den][rest].sum(0), onset
        )
        return Statistic(-(e1 - e2), max(np.hypot(n1, n2), 0.05), np.sqrt(v1 + v2))
