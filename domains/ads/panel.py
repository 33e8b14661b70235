"""The ads panel: leaf cells campaign x creative x placement x device x browser_os x geo x
audience, crossed with days. Only cells that exist in the account are kept: creatives belong
to campaigns, browsers to devices, connected TVs to video, and each campaign targets its own
placements, audiences and geos."""

from __future__ import annotations

import itertools

import numpy as np

from causaltrace import Dimension, Panel, TimeAxis
from causaltrace_domains.ads.config import AUDIENCES, DEVICE_BROWSERS, PLACEMENTS, AdsConfig

DIMENSIONS = ("campaign", "creative", "placement", "device", "browser_os", "geo", "audience")


def build_panel(config: AdsConfig) -> Panel:
    campaigns = tuple(c.name for c in config.campaigns)
    creatives = tuple(cr for c in config.campaigns for cr in c.creatives)
    browsers = tuple(dict.fromkeys(b for bs in DEVICE_BROWSERS.values() for b in bs))
    dims = [
        Dimension("campaign", campaigns),
        Dimension("creative", creatives),
        Dimension("placement", PLACEMENTS),
        Dimension("device", tuple(DEVICE_BROWSERS)),
        Dimension("browser_os", browsers),
        Dimension("geo", config.geos),
        Dimension("audience", AUDIENCES),
    ]
    index = {d.name: {level: i for i, level in enumerate(d.levels)} for d in dims}
    rows = []
    for camp in config.campaigns:
        for creative, placement, geo, audience in itertools.product(
            camp.creatives, camp.placements, camp.geos, camp.audiences
        ):
            for device, device_browsers in DEVICE_BROWSERS.items():
                if (device == "ctv") != (placement == "video") and device == "ctv":
                    continue  # connected TVs only show video
                for browser in device_browsers:
                    rows.append(
                        [
                            index["campaign"][camp.name],
                            index["creative"][creative],
                            index["placement"][placement],
                            index["device"][device],
                            index["browser_os"][browser],
                            index["geo"][geo],
                            index["audience"][audience],
                        ]
                    )
    cells = np.asarray(rows, dtype=np.int64)
    # Sort cells by their codes so the row order is canonical whatever the config order.
    cells = cells[np.lexsort(cells.T[::-1])]
    return Panel(tuple(dims), TimeAxis(config.start, config.days, "D"), cells)
