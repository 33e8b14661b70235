"""The tutorial's domain (docs/tutorial-new-domain.md): four bakeries whose orders can fall."""

from __future__ import annotations

# --8<-- [start:imports]
from dataclasses import dataclass

import numpy as np
import pandas as pd

from causaltrace import (
    SCM,
    CauseInfo,
    Constant,
    Dimension,
    Domain,
    InterventionPoint,
    InterventionPrior,
    Node,
    Panel,
    Ramp,
    Scale,
    Step,
    TimeAxis,
    Uniform,
)
from causaltrace.episodes.verify import Statistic
from causaltrace.model.distributions import binomial_icdf, normal_icdf, poisson_icdf

# --8<-- [end:imports]
# --8<-- [start:mechanisms]
STORES = ("north", "south", "east", "west")
CHANNELS = ("app", "counter")


@dataclass(frozen=True)
class Footfall:
    """Expected visits: a base per channel times a small daily log-normal shock."""

    base_by_channel: tuple[float, ...]
    shock_sd: float = 0.05

    def __call__(self, parents, noise, panel: Panel) -> np.ndarray:
        base = np.asarray(self.base_by_channel)[panel.codes("channel")][:, None]
        return base * np.exp(self.shock_sd * normal_icdf(noise))


@dataclass(frozen=True)
class PoissonCount:
    """Counts with mean ``mean`` (a parent), drawn from the node's uniform noise."""

    mean: str

    def __call__(self, parents, noise, panel: Panel) -> np.ndarray:
        return poisson_icdf(parents[self.mean], noise)


@dataclass(frozen=True)
class BinomialThin:
    """``trials`` thinned with probability ``rate`` (visits that order)."""

    trials: str
    rate: str

    def __call__(self, parents, noise, panel: Panel) -> np.ndarray:
        return binomial_icdf(parents[self.trials], parents[self.rate], noise)


# --8<-- [end:mechanisms]


# --8<-- [start:nodes]
class ShopDomain(Domain):
    """Visits -> orders, by store x channel x day."""

    name = "shop"

    def build_scm(self) -> SCM:
        panel = Panel.cross(
            [Dimension("store", STORES), Dimension("channel", CHANNELS)],
            TimeAxis("2026-03-02", int(self.config.get("days", 42)), "D"),
        )
        nodes = [
            Node("footfall", Footfall((120.0, 200.0)), noise=Uniform(), observed=False),
            Node("visits", PoissonCount("footfall"), ("footfall",), Uniform(), dtype="int64"),
            Node("conversion", Constant(float(self.config.get("conversion", 0.3))), observed=False),
            Node(
                "orders",
                BinomialThin("visits", "conversion"),
                ("visits", "conversion"),
                Uniform(),
                dtype="int64",
            ),
        ]
        # --8<-- [end:nodes]
        # --8<-- [start:points]
        prior = InterventionPrior(
            slice_dims=(("store",), ("channel",)),
            strength=(0.1, 0.5),
            onset=(-14, -7),  # negative: counted from the end of the panel
            profiles=(Step(), Ramp(3)),
        )

        def scale_down(node: str):
            return lambda d: [Scale(node, where=d.slice, window=d.window, factor=1 - d.strength)]

        points = [
            InterventionPoint(
                "FOOTFALL_DROP",
                scale_down("footfall"),
                prior,
                "fewer people come in (roadworks, a competitor)",
                CauseInfo("demand", confusers=("CHECKOUT_OUTAGE",)),
            ),
            InterventionPoint(
                "CHECKOUT_OUTAGE",
                scale_down("conversion"),
                prior,
                "the till or the app's checkout fails for some customers",
                CauseInfo("conversion", confusers=("FOOTFALL_DROP",)),
            ),
        ]
        return SCM(nodes, panel, points, name="tutorial-shop")
        # --8<-- [end:points]

    # --8<-- [start:render]
    def render(self, world, draw, background, rng):
        panel = self.scm.panel
        days = panel.time.values.astype("datetime64[D]")
        sales = pd.DataFrame(
            {
                "date": np.tile(days, panel.n_cells),
                "store": np.repeat(panel.labels("store"), panel.n_time),
                "channel": np.repeat(panel.labels("channel"), panel.n_time),
                "visits": world["visits"].reshape(-1),
                "orders": world["orders"].reshape(-1),
            }
        )
        stores = pd.DataFrame({"store": list(STORES), "opened": [2019, 2021, 2022, 2024]})
        return {"sales_daily": sales, "stores": stores}

    def data_dictionary(self):
        sales = {"date": "day", "store": "bakery", "channel": "app or counter"}
        sales |= {"visits": "app sessions or people in the shop", "orders": "orders placed"}
        return {"sales_daily": sales, "stores": {"store": "bakery", "opened": "year it opened"}}

    def task_prompt(self, tables) -> str:
        daily = tables["sales_daily"].groupby("date")["orders"].sum().to_numpy()
        change = daily[-7:].sum() / daily[-28:-7].sum() * 3 - 1
        causes = "\n".join(
            f"- {n}: {p.description}" for n, p in self.scm.intervention_points.items()
        )
        return (
            f"Orders over the last 7 days moved {change:+.1%} against the 3 weeks before. "
            "The tables sales_daily and stores describe the four bakeries. "
            f"The cause is one of:\n{causes}\n"
            "Answer with submit(root_cause, slice); the slice is dim=level over store or channel."
        )

    def kpi_totals(self, world, mask, onset):
        return {k: float(world[k][mask][:, onset:].sum()) for k in ("visits", "orders")}

    def evidence(self, tables):
        return ShopEvidence(self.scm.panel, tables)
        # --8<-- [end:render]


# --8<-- [start:evidence]
SIGNATURES = {"FOOTFALL_DROP": ("visits", None), "CHECKOUT_OUTAGE": ("orders", "visits")}


class ShopEvidence:
    """A cause's signature on some cells: the fall of its quantity (visits, or orders per
    visit) after the onset, relative to the reference cells, in units of its daily noise."""

    def __init__(self, panel: Panel, tables):
        frame = tables["sales_daily"]
        self.arrays = {
            c: frame[c].to_numpy(float).reshape(panel.n_cells, panel.n_time)
            for c in ("visits", "orders")
        }

    def _log_rate(self, num: str, den: str | None, cells: np.ndarray) -> np.ndarray:
        top = np.log(self.arrays[num][cells].sum(0) + 0.5)
        return top if den is None else top - np.log(self.arrays[den][cells].sum(0) + 0.5)

    def statistic(self, cause, cells, onset, reference=None):
        cells = np.ones(len(self.arrays["visits"]), bool) if cells is None else cells
        rest = ~cells if reference is None else reference
        if cause not in SIGNATURES or not cells.any() or not rest.any():
            return None  # no signature, or nothing to compare with
        num, den = SIGNATURES[cause]
        daily = self._log_rate(num, den, cells) - self._log_rate(num, den, rest)
        pre, post = daily[max(0, onset - 21) : onset], daily[onset:]
        noise = max(float(pre.std(ddof=1)), 0.01)
        return Statistic.from_daily(float(pre.mean() - post.mean()), noise, len(post), len(pre))


# --8<-- [end:evidence]
