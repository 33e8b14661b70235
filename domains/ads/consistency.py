"""Every table of an ads episode agrees with every other, as one account's reports would.

A practitioner who finds a budget in the campaigns table that the change history never set, a
bid adjustment on Performance Max, or an automated rule editing location options stops trusting
the data. :func:`reconcile` lists every such disagreement in one episode's tables (an empty list:
consistent):

- budgets: per campaign, its budget edits in time order chain (each starts at the budget the one
  before set), the last one sets the budget the campaigns table shows, and no campaign-day spends
  more than twice the budget in effect (Google's daily overdelivery cap);
- bid adjustments only on campaign types that take them (not Performance Max);
- targeting edits in the form the campaign type has (audience observation on search, optimized
  targeting on display, final URL expansion on Performance Max, location options on any);
- automated rules only on the fields rules can change;
- the campaigns table's status, networks and geo count as the reports show them; a disapproved
  enabled ad serves nothing on the last day; Performance Max never bids manually.

Run over a dataset: ``python -m causaltrace_domains.ads.consistency DATASET_DIR [--episodes N]``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from itertools import pairwise

import pandas as pd

from causaltrace.datasets.storage import read_episode_tables
from causaltrace.env import DatasetSource
from causaltrace_domains.ads.background import RULE_FIELDS, RULES_USER
from causaltrace_domains.ads.edits import AUDIENCE_WIDENING, LOCATION_WIDENING

OVERDELIVERY_CAP = 2.0  # a campaign may spend up to twice its daily budget on a day
TARGETING_FIELDS = {field: kind for kind, (field, _, _) in AUDIENCE_WIDENING.items()}
TARGETING_FIELDS[LOCATION_WIDENING[0]] = None  # any campaign type

Tables = Mapping[str, pd.DataFrame]


def _number(text) -> float:
    return float(str(text).replace(",", ""))


def _budget_problems(tables: Tables) -> list[str]:
    campaigns = tables["campaigns"].set_index("campaign")
    changes = tables["change_history"]
    edits = changes[changes["field"] == "daily_budget"].sort_values("change_time", kind="stable")
    perf = tables["perf_daily"]
    cost = perf.groupby([perf["campaign"].astype(str), "date"], observed=True)["cost"].sum()
    problems = []
    for campaign, row in campaigns.iterrows():
        mine = edits[edits["campaign"] == campaign]
        values = [(_number(o), _number(n)) for o, n in zip(mine["old_value"], mine["new_value"])]
        for (_, before), (after_old, _) in pairwise(values):
            if before != after_old:
                problems.append(
                    f"{campaign}: a budget edit starts at {after_old:.0f} but the one before "
                    f"set {before:.0f}"
                )
        current = float(row["daily_budget"])
        if values and values[-1][1] != current:
            problems.append(
                f"{campaign}: the last budget edit sets {values[-1][1]:.0f} but the campaigns "
                f"table shows {current:.0f}"
            )
        # The budget in effect each day: the old value of the first edit after it, else the
        # current budget (a day with an edit has two budgets: its larger one bounds the spend).
        days = pd.to_datetime(mine["change_time"]).dt.normalize().to_numpy()
        spend = cost.get(campaign)
        if spend is None:
            continue
        for date, value in spend.items():
            date = pd.Timestamp(date)
            later = [i for i, d in enumerate(days) if d > date]
            same = [i for i, d in enumerate(days) if d == date]
            budget = values[later[0]][0] if later else current
            if same:
                budget = max(budget, *(max(values[i]) for i in same))
            if value > OVERDELIVERY_CAP * budget + 0.01:
                problems.append(
                    f"{campaign} on {date.date()}: spent {value:.2f}, over {OVERDELIVERY_CAP:g} x "
                    f"its budget of {budget:.0f}"
                )
    return problems


def _edit_problems(tables: Tables) -> list[str]:
    types = tables["campaigns"].set_index("campaign")["campaign_type"].astype(str).to_dict()
    problems = []
    for row in tables["change_history"].itertuples(index=False):
        kind = types.get(str(row.campaign))
        where = f"change_history {row.change_time} ({row.campaign}, {row.field})"
        if row.field == "bid_adjustment" and kind == "performance_max":
            problems.append(f"{where}: Performance Max takes no bid adjustments")
        if row.change_type == "targeting" and row.field in TARGETING_FIELDS:
            wanted = TARGETING_FIELDS[row.field]
            if wanted is not None and kind != wanted:
                problems.append(f"{where}: {row.field} exists on {wanted} campaigns, not {kind}")
        if row.user == RULES_USER and row.field not in RULE_FIELDS:
            problems.append(f"{where}: automated rules cannot change {row.field}")
    return problems


def _settings_problems(tables: Tables) -> list[str]:
    campaigns = tables["campaigns"]
    perf = tables["perf_daily"]
    changes = tables["change_history"]
    problems = []
    for row in campaigns.itertuples(index=False):
        name = str(row.campaign)
        mine = perf[perf["campaign"].astype(str) == name]
        geos = mine["geo"].astype(str).nunique()
        if int(row.geo_targets) != geos:
            problems.append(f"{name}: geo_targets {row.geo_targets}, reports show {geos} geos")
        networks = set(str(row.networks).split(", "))
        served = set(mine["placement"].astype(str).unique())
        if networks != served:
            problems.append(f"{name}: networks {sorted(networks)}, reports show {sorted(served)}")
        status = changes[(changes["campaign"] == name) & (changes["field"] == "status")]
        if len(status):
            last = status.sort_values("change_time", kind="stable")["new_value"].iloc[-1]
            if last != row.status:
                problems.append(f"{name}: status {row.status}, last status edit set {last}")
        if row.campaign_type == "performance_max" and row.bidding_strategy == "manual_cpc":
            problems.append(f"{name}: Performance Max cannot bid manual CPC")
    last_day = perf["date"].max()
    served = (
        perf[perf["date"] == last_day]
        .groupby(perf["creative"].astype(str), observed=True)["impressions"]
        .sum()
    )
    creatives = tables["creatives"]
    for row in creatives.itertuples(index=False):
        if row.status == "enabled" and row.policy_status == "disapproved":
            shown = int(served.get(str(row.creative), 0))
            if shown:
                problems.append(f"{row.creative}: disapproved but served {shown} impressions")
    return problems


def reconcile(tables: Tables) -> list[str]:
    """Every disagreement between the tables of one episode (empty: consistent)."""
    return [*_budget_problems(tables), *_edit_problems(tables), *_settings_problems(tables)]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset")
    parser.add_argument("--episodes", type=int, default=None)
    parser.add_argument("--cache-dir", default=None)
    args = parser.parse_args(argv)
    source = DatasetSource(args.dataset, args.cache_dir)
    ids = source.episode_ids[: args.episodes]
    bad = 0
    for episode in ids:
        problems = reconcile(read_episode_tables(source.visible_dir(episode)))
        bad += bool(problems)
        for problem in problems:
            print(f"{episode}: {problem}")
    print(f"{len(ids) - bad}/{len(ids)} episodes consistent")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
