"""The example web-shop domain: SCM, panel and intervention points."""

from __future__ import annotations

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
    raised_alert,
)
from causaltrace_domains.example.mechanisms import BinomialThin, ChannelRate, Demand, PoissonCount
from causaltrace_domains.example.reports import (
    MONITOR_RULE,
    ExampleEvidence,
    alert_readings,
    alert_text,
    render_tables,
)

CHANNELS = ("search", "social", "email")
REGIONS = ("north", "south", "east", "west")
SLICE_DIMS = (("channel",), ("region",), ("channel", "region"))


class ExampleDomain(Domain):
    """Visits -> orders -> tracked orders, by channel x region x day."""

    name = "example"

    def build_scm(self) -> SCM:
        cfg = self.config
        panel = Panel.cross(
            [Dimension("channel", CHANNELS), Dimension("region", REGIONS)],
            TimeAxis(cfg.get("start", "2026-01-05"), int(cfg.get("days", 56)), "D"),
        )
        nodes = [
            Node(
                "demand",
                Demand((400.0, 250.0, 80.0)),
                noise=Uniform(),
                observed=False,
                description="expected visits",
            ),
            Node(
                "visits",
                PoissonCount("demand"),
                parents=("demand",),
                noise=Uniform(),
                dtype="int64",
            ),
            Node(
                "checkout_rate", ChannelRate((0.03, 0.015, 0.06)), noise=Uniform(), observed=False
            ),
            Node(
                "orders",
                BinomialThin("visits", "checkout_rate"),
                parents=("visits", "checkout_rate"),
                noise=Uniform(),
                dtype="int64",
            ),
            Node("tag_fire_rate", Constant(0.97), observed=False),
            Node(
                "tracked_orders",
                BinomialThin("orders", "tag_fire_rate"),
                parents=("orders", "tag_fire_rate"),
                noise=Uniform(),
                dtype="int64",
            ),
        ]
        onset = (panel.n_time - 21, panel.n_time - 7)
        profiles = (Step(), Ramp(3))

        def scale_down(node: str):
            return lambda d: [Scale(node, where=d.slice, window=d.window, factor=1 - d.strength)]

        points = [
            InterventionPoint(
                "TRAFFIC_DROP",
                scale_down("demand"),
                InterventionPrior(strength=(0.15, 0.4), onset=onset, profiles=profiles),
                "fewer people arrive, on every channel and region",
                # typical_snr: the median detection SNR of accepted episodes at the default
                # prior (`python -m causaltrace.episodes.difficulty DATASET`), the unit of SNR bands.
                CauseInfo("site-wide", typical_snr=7.0),
            ),
            InterventionPoint(
                "CHECKOUT_BUG",
                scale_down("checkout_rate"),
                InterventionPrior(
                    slice_dims=SLICE_DIMS, strength=(0.3, 0.8), onset=onset, profiles=profiles
                ),
                "checkout breaks for some visitors: real orders fall",
                CauseInfo("segment-specific", confusers=("TRACKING_LOSS",), typical_snr=2.3),
            ),
            InterventionPoint(
                "TRACKING_LOSS",
                scale_down("tag_fire_rate"),
                InterventionPrior(
                    slice_dims=SLICE_DIMS, strength=(0.3, 0.8), onset=onset, profiles=profiles
                ),
                "the order tag stops firing for some visitors: only tracked orders fall",
                CauseInfo("segment-specific", confusers=("CHECKOUT_BUG",), typical_snr=1.5),
            ),
        ]
        return SCM(nodes, panel, points, name="example-webshop")

    # -- what the analyst sees (the hooks a dataset needs) ---------------------------------
    def render(self, world, draw, background, rng, *, also=()):
        return render_tables(self.scm.panel, world)  # the shop logs no edits: draws unused

    # -- the monitor (causaltrace.Monitor: all four methods) -------------------------------
    def alert_readings(self, tables):
        return alert_readings(tables)

    def monitor_tables(self, world):
        return render_tables(self.scm.panel, world)  # deterministic: it draws nothing

    def alert_kpi(self, tables) -> str:
        readings = self.alert_readings(tables)
        return (raised_alert(readings) or max(readings, key=lambda r: r.severity)).kpi

    def kpi_daily(self, world, kpi):
        return world[kpi].sum(axis=0)  # orders and tracked orders of the whole shop per day

    def task_prompt(self, tables) -> str:
        """The raised alert and the task. With the alert gate off (``verifier=off``) a draw may
        raise nothing; the prompt then names the reading with the largest adverse move and says
        it is below the threshold (the default verifier rejects such episodes: ``no_alert``)."""
        readings = self.alert_readings(tables)
        alert = raised_alert(readings) or max(readings, key=lambda r: r.severity)
        causes = "\n".join(
            f"- {n}: {p.description}" for n, p in self.scm.intervention_points.items()
        )
        if self.concurrent:  # the dataset has concurrent episodes: every prompt says so
            return (
                f"{MONITOR_RULE}\nALERT: {alert_text(alert, self.scm.panel.n_time)}.\n"
                "The table shop_daily has daily visits, orders and tracked orders by channel "
                "and region. One or more root causes may be at work at the same time; each is "
                f"one of:\n{causes}\n"
                "Answer with submit(root_cause, slice) for one cause, or submit(causes) with a "
                'list of {"root_cause", "slice"} objects for several; a slice is dim=level over '
                "channel and region (empty for TRAFFIC_DROP). Every listed cause that is not at "
                "work costs reward."
            )
        return (
            f"{MONITOR_RULE}\nALERT: {alert_text(alert, self.scm.panel.n_time)}.\n"
            "The table shop_daily has daily visits, orders "
            f"and tracked orders by channel and region. The cause is one of:\n{causes}\n"
            "Answer with submit(root_cause, slice); the slice is dim=level over channel "
            "and region (empty for TRAFFIC_DROP)."
        )

    def data_dictionary(self):
        return {
            "shop_daily": {
                "date": "day",
                "channel": "marketing channel",
                "region": "region",
                "visits": "site visits",
                "orders": "real orders",
                "tracked_orders": "orders the analytics tag recorded",
            }
        }

    def kpi_totals(self, world, mask, onset):
        return {
            k: float(world[k][mask][:, onset:].sum())
            for k in ("visits", "orders", "tracked_orders")
        }

    def evidence(self, tables):
        return ExampleEvidence(self.scm.panel, tables)

    def channel_readings(self, in_slice, overall):
        """``volume``: the shop's visits; ``mix``: the slice's share of them; ``rate:*``: orders
        per visit and tracked orders per order inside the slice (for the audit)."""

        def ratio(num: float, den: float) -> float:
            return num / den if den else float("nan")

        return {
            "volume": float(overall["visits"]),
            "mix": ratio(in_slice["visits"], overall["visits"]),
            "rate:checkout": ratio(in_slice["orders"], in_slice["visits"]),
            "rate:tracking": ratio(in_slice["tracked_orders"], in_slice["orders"]),
        }
