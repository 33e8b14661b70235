"""The audit's per-cause rule probe (causaltrace/audit/rules.py) and its features
(causaltrace/audit/records.py, causaltrace/audit/alert_lines.py).

- the features: alert lines (one, or several under a header), numbers parsed from value
  cells, and each family on a hand-made change history whose answer is known; roles come from
  value shapes, not column names;
- the probe on synthetic episodes: a planted non-metric rule (a field that only one cause's
  episodes have) is flagged for exactly that cause; rules of the shapes an outside review found
  on the ads domain (a budget cut to under 0.6, the same edit on several campaigns within an
  hour, an enabled ad whose policy status is disapproved) are flagged, causes without one are
  not;
- the committed ``data/ads_test`` split: no cause flagged on its first 150 episodes (the
  rebuild of all 235 costs minutes). A known, open defect: the split regenerated on
  2026-12-01 (evening) is flagged for BUDGET_CAP (9 of 9 named right of 15 on the first 150; on
  all 235, BUDGET_CAP 1.00 / 0.61 and BID_MODIFIER_CHANGE 0.90 / 0.43, docs/domain-ads.md): the
  verifier keeps the edits that moved the page, and twins that do not move it cannot be as deep
  and broad in this account. Strict: the mark fails once the split has no shortcut.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from causaltrace.audit.alert_lines import alert_lines, alert_tokens, alert_window
from causaltrace.audit.records import change_of, parse_number, record_features, record_frame
from causaltrace.audit.rules import best_threshold, rule_probe

RECORDS = ("change_history", "campaigns", "creatives")
CAMPAIGNS = ("brand", "generic", "pmax", "display")
USERS = ("ann@agency", "bo@brand", "automated_rules")
END = np.datetime64("2026-03-02T00:00")  # the alert window ends at the end of 2026-03-01
HEADLINES = ("Free shipping", "New arrivals", "Members save")


# -- alert lines and value cells ------------------------------------------------------------
def test_alert_lines_one_or_several():
    prompt = (
        "The monitoring rule compares the last 7 days. It just fired:\n\n"
        "ALERT: clicks for campaign pmax is down 17.0%: 6,439.00 over 2026-02-23 to "
        "2026-03-01 against 7,757.50 for the same weekdays.\n\nFind the root cause.\n"
        "- brand_search: not an alert"
    )
    lines = alert_lines(prompt)
    assert len(lines) == 1 and lines[0].startswith("ALERT: clicks")
    words = alert_tokens(lines)
    assert {"clicks", "campaign", "pmax", "down"} <= set(words)
    assert not any(w[0].isdigit() for w in words) and "alert" not in words
    window = alert_window(lines)
    assert window.start == np.datetime64("2026-02-23T00:00") and window.end == END

    listed = (
        "It just paged:\n\nActive alerts:\n\n- error rate of checkout in eu-west is up 35% "
        "over 2026-03-04 21:00 to 2026-03-05 00:00 UTC\n2. p99 latency of cart in us-east is "
        "up 20%\n\nFind the root cause.\nALERT: a third one, 2026-03-04"
    )
    lines = alert_lines(listed)
    assert [line.split(" of ")[0] for line in lines[:2]] == ["error rate", "p99 latency"]
    assert len(lines) == 3 and {"checkout", "eu-west", "cart", "us-east"} <= set(
        alert_tokens(lines)
    )
    assert alert_window(lines).start == np.datetime64("2026-03-04T21:00")
    assert alert_lines("no alert here\nALERTED: not a tag") == []


def test_numbers_in_value_cells():
    assert parse_number("4,520").value == 4520 and parse_number("4,520").unit == ""
    assert (parse_number("+150%").value, parse_number("+150%").unit) == (150, "%")
    assert (parse_number("-17%").value, parse_number("12 keywords").unit) == (-17, "keywords")
    assert parse_number("$1,200.50").value == pytest.approx(1200.5)
    for text in ("v1.4.2", "presence", "25% off sitewide until 2026-02-20", "", None):
        assert parse_number(text) is None
    # a percentage is an adjustment: +0% -> +30% multiplies by 1.3
    ratio, delta = change_of(parse_number("+0%"), parse_number("+30%"))
    assert ratio == pytest.approx(1.3) and delta == pytest.approx(30)
    assert change_of(parse_number("2920"), parse_number("900"))[0] == pytest.approx(900 / 2920)
    assert change_of(parse_number("12 keywords"), parse_number("50%")) is None  # units differ


# -- the feature families on a known change history ---------------------------------------
def edit(when: str, user, campaign, field, old, new) -> dict:
    return {
        "change_time": pd.Timestamp(when),
        "user": user,
        "campaign": campaign,
        "field": field,
        "old_value": old,
        "new_value": new,
    }


def history(rows: list[dict]) -> pd.DataFrame:
    frame = pd.DataFrame(rows)
    frame["change_time"] = frame["change_time"].astype("datetime64[us]")
    for col in frame.columns[1:]:
        frame[col] = frame[col].astype("string")
    return frame


def campaigns_table() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "campaign": pd.array(CAMPAIGNS, dtype="string"),
            "status": pd.array(["enabled"] * len(CAMPAIGNS), dtype="string"),
            "daily_budget": np.array([900, 2800, 1000, 300]),
        }
    )


ALERT = (
    "It just fired:\n\nALERT: clicks for campaign generic is down 31.5%: 8,357.00 over "
    "2026-02-23 to 2026-03-01 against 12,201.33.\n"
)


def known_history() -> pd.DataFrame:
    return history(
        [
            edit("2026-02-26 13:15", "ann@agency", "brand", "daily_budget", "2920", "1460"),
            edit("2026-02-26 13:40", "bo@brand", "generic", "daily_budget", "2680", "1340"),
            edit("2026-02-21 15:15", "ann@agency", "pmax", "location", "presence", "interest"),
            edit("2026-02-21 15:43", "bo@brand", "generic", "location", "presence", "interest"),
            edit("2026-02-21 15:50", "bo@brand", "brand", "location", "presence", "interest"),
            edit("2026-02-21 17:00", "bo@brand", "display", "location", "presence", "interest"),
            edit("2026-02-10 09:00", "automated_rules", "brand", "bid", "+0%", "-17%"),
            edit("2026-02-09 09:00", "ann@agency", "pmax", "keywords", "12 keywords", "15 kw"),
        ]
    )


def test_feature_families_on_a_known_history():
    tables = {"change_history": known_history(), "campaigns": campaigns_table()}
    f = record_features(tables, ALERT, ("change_history", "campaigns"))
    h = "change_history"
    # counts: per value and per pair of values of two key columns
    assert f[f"{h}: rows with field=location"] == 4
    assert f[f"{h}: rows with campaign=generic & field=daily_budget"] == 1
    # values: ratio and change per field; 12 keywords -> 15 kw have different units: unread
    assert f[f"{h}[field=daily_budget]: min new/old"] == pytest.approx(0.5)
    assert f[f"{h}[field=bid]: max |relative change|"] == pytest.approx(0.17)
    assert f[f"{h}[field=bid]: min change (new-old)"] == pytest.approx(-17)
    assert f"{h}[field=keywords]: min new/old" not in f
    # breadth: 3 campaigns with the same new value within an hour (the 4th is 1h17 later);
    # both budget cuts halve the budget, 25 minutes apart
    assert f[f"{h}[field=location]: most distinct campaign with the same new value within 1h"] == 3
    assert f[f"{h}[field=location]: most rows with the same new value within 1h"] == 3
    # the same edit by the same user: bo's two, 7 minutes apart
    assert (
        f[f"{h}[field=location]: most distinct campaign with the same user and new value within 1h"]
        == 2
    )
    assert (
        f[f"{h}[field=daily_budget]: most distinct campaign with the same new/old within 1h"] == 2
    )
    assert (
        f[f"{h}[field=daily_budget]: most distinct campaign with the same new value within 1h"] == 1
    )
    # timing: the budget cuts were 3.43 days before the data's end, 3.57 after the window start
    days = f[f"{h}[field=daily_budget]: days from last row to data end"]
    assert days == pytest.approx((END - np.datetime64("2026-02-26T13:40")) / np.timedelta64(1, "D"))
    assert f[f"{h}[field=daily_budget]: days from alert start to last row"] == pytest.approx(
        3 + 13 / 24 + 40 / 1440
    )
    assert f[f"{h}[field=daily_budget]: rows in the alert window"] == 2
    assert f[f"{h}[field=location]: rows in the alert window"] == 0
    # the alert names campaign generic: two of its edits, one of them a budget cut
    assert f[f"{h}: rows whose campaign the alert names"] == 2
    assert f[f"{h}[field=daily_budget]: rows naming what the alert names"] == 1
    assert f["alert: word 'generic'"] == 1 and f["alert: word 'down'"] == 1
    # a settings table: counts and numeric columns
    assert (
        f["campaigns: max daily_budget"] == 2800 and f["campaigns: rows with status=enabled"] == 4
    )
    # settings per group: a campaign's new budget (not a percentage adjustment) and its row of
    # a numeric column, the level a model may have memorized against the campaign's spend
    assert f[f"{h}[campaign=generic]: min new setting"] == 1340
    assert f[f"{h}[field=daily_budget]: max new setting"] == 1460
    assert f"{h}[field=bid]: min new setting" not in f  # -17% is an adjustment, not a level
    assert f"{h}[field=keywords]: max new setting" in f  # 15 kw: a level with a unit
    assert f["campaigns[campaign=pmax]: max daily_budget"] == 1000


def test_roles_come_from_value_shapes_not_names():
    frame = known_history()
    renamed = frame.rename(columns={c: f"col{i}" for i, c in enumerate(frame.columns)})
    a = record_features({"t": frame, "campaigns": campaigns_table()}, ALERT, ("t",))
    b = record_features({"t": renamed, "campaigns": campaigns_table()}, ALERT, ("t",))
    assert len(a) == len(b) > 50
    assert sorted(a.values()) == pytest.approx(sorted(b.values()))


def test_missing_features_mean_nothing_there():
    frame = record_frame([{"t[f=a]: min new/old": 0.5}, {"t: rows": 3.0}])
    assert frame.loc[1, "t[f=a]: min new/old"] == 1.0  # no edit: no change
    assert frame.loc[0, "t: rows"] == 0.0


def test_best_threshold_maximises_precision_under_the_recall_floor():
    y = np.array([1, 1, 1, 1, 0, 0, 0, 0, 0, 0], dtype=bool)
    score = np.array([0.9, 0.8, 0.3, 0.2, 0.85, 0.1, 0.1, 0.1, 0.1, 0.1])
    # >= 0.9: precision 1 at recall 0.25, under the floor; then >= 0.2 (4 of 5 named are
    # right: 0.8) beats >= 0.3 (0.75), >= 0.8 (0.67) and >= 0.85 (0.5)
    assert best_threshold(score, y, 0.3) == (0.2, pytest.approx(0.8), 1.0)
    assert best_threshold(score, y, 0.25) == (0.9, 1.0, 0.25)  # the floor decides


# -- the probe on synthetic episodes ----------------------------------------------------------
FIELDS = {  # harmless edits every episode may have: field -> (old, new) drawn per row
    "daily_budget": lambda r: (int(r.integers(200, 3000)), float(r.uniform(0.85, 1.4))),
    "negative_keywords": lambda r: (int(r.integers(10, 30)), float(r.integers(1, 6))),
    "headline_1": lambda r: (HEADLINES[int(r.integers(3))], HEADLINES[int(r.integers(3))]),
    "location_options": lambda r: ("presence", "presence_or_interest"),
}


def _row(rng, day: int, hour: float, campaign: str, field: str) -> dict:
    a, b = FIELDS[field](rng)
    if field == "daily_budget":
        old, new = str(a), str(round(a * b))
    elif field == "negative_keywords":
        old, new = f"{a} keywords", f"{a + int(b)} keywords"
    else:
        old, new = a, b
    when = np.datetime64("2026-02-01T00:00") + np.timedelta64(int((day * 24 + hour) * 60), "m")
    user = USERS[int(rng.integers(len(USERS)))]
    return edit(str(when), user, campaign, field, old, new)


def synthetic_episode(rng, cause: str) -> tuple[dict[str, pd.DataFrame], str]:
    """Decoy edits drawn the same way for every cause, plus the cause's own planted rows."""
    rows = [
        _row(
            rng,
            int(rng.integers(0, 29)),
            float(rng.uniform(6, 20)),
            CAMPAIGNS[int(rng.integers(4))],
            list(FIELDS)[int(rng.integers(len(FIELDS)))],
        )
        for _ in range(int(rng.integers(6, 14)))
    ]
    day, hour = int(rng.integers(20, 28)), float(rng.uniform(7, 18))
    if cause == "PLANTED":  # a field no other cause's episodes have
        rows.append(_row(rng, day, hour, CAMPAIGNS[0], "headline_1") | {"field": "final_url"})
    if cause == "CUT":  # a budget cut to under 0.6 of the old budget
        old = int(rng.integers(500, 3000))
        cut = float(rng.uniform(0.3, 0.55))
        rows.append(
            edit(
                str(np.datetime64("2026-02-01") + np.timedelta64(day, "D")),
                USERS[int(rng.integers(len(USERS)))],
                CAMPAIGNS[int(rng.integers(len(CAMPAIGNS)))],
                "daily_budget",
                str(old),
                str(round(old * cut)),
            )
        )
    if cause.startswith("LEVEL") or cause.startswith("QUIET_L"):
        # Every episode cuts brand's budget by the same ratio; LEVEL's cut lands on a budget
        # under 600 (it binds: below what brand spends), the others' stay above 1,500. Only
        # the new level tells them apart, not the ratio, breadth or timing.
        old = (
            int(rng.integers(700, 1000))
            if cause.startswith("LEVEL")
            else int(rng.integers(2200, 3000))
        )
        cut = float(rng.uniform(0.5, 0.65))
        rows.append(
            edit(
                str(np.datetime64("2026-02-01") + np.timedelta64(day, "D")),
                USERS[int(rng.integers(len(USERS)))],
                CAMPAIGNS[0],
                "daily_budget",
                str(old),
                str(round(old * cut)),
            )
        )
    if cause == "WIDE":  # the same targeting edit on 3 campaigns within 40 minutes
        for i, campaign in enumerate(rng.permutation(CAMPAIGNS)[:3]):
            rows.append(_row(rng, day, hour + i / 3, campaign, "location_options"))
    status = ["enabled", "enabled", "paused"] * 2
    policy = [("approved", "approved_limited")[int(rng.integers(2))] for _ in status]
    for paused in (2, 5):  # a paused ad disapproved: harmless
        policy[paused] = "disapproved" if rng.random() < 0.5 else "approved"
    if cause == "BANNED":  # an enabled ad (of any campaign) whose policy status is disapproved
        policy[(0, 1, 3, 4)[int(rng.integers(4))]] = "disapproved"
    creatives = pd.DataFrame(
        {
            "creative": pd.array([f"ad_{i}" for i in range(6)], dtype="string"),
            "campaign": pd.array([CAMPAIGNS[i // 2] for i in range(6)], dtype="string"),
            "status": pd.array(status, dtype="string"),
            "policy_status": pd.array(policy, dtype="string"),
        }
    )
    scope = CAMPAIGNS[int(rng.integers(4))]
    direction = ("down", "up")[int(rng.integers(2))]
    prompt = (
        f"It just fired:\n\nALERT: clicks for campaign {scope} is {direction} 12.0%: 100 over "
        "2026-02-23 to 2026-03-01 against 114 for the same weekdays.\n\nFind the root cause."
    )
    tables = {
        "change_history": history(rows),
        "campaigns": campaigns_table(),
        "creatives": creatives,
    }
    return tables, prompt


def probe_synthetic(causes: tuple[str, ...], per_cause: int, seed: int = 7):
    rng = np.random.default_rng(seed)
    rows, truths = [], []
    for cause in causes:
        for _ in range(per_cause):
            tables, prompt = synthetic_episode(rng, cause)
            rows.append(record_features(tables, prompt, RECORDS))
            truths.append({cause})
    probe = rule_probe(record_frame(rows), truths, causes, np.random.default_rng(0), trees=50)
    return {rule.cause: rule for rule in probe.rules}, probe


@pytest.mark.slow
def test_a_planted_rule_is_flagged_for_its_cause_only():
    rules, probe = probe_synthetic(("PLANTED", "OTHER_A", "OTHER_B", "OTHER_C"), 24)
    assert [r.cause for r in probe.shortcuts] == ["PLANTED"]
    planted = rules["PLANTED"]
    assert planted.precision[0] >= 0.85 and planted.recall[0] >= 0.3 and planted.n == 24
    assert planted.folds == 5 and "final_url" in planted.rule
    # Pooled over the default three fold draws: the pooled precision is the draws' precisions
    # weighted by how many each named, so it lies between the lowest and the highest.
    assert planted.repeats == 3 and len(planted.spread) == 3
    assert min(planted.spread) - 1e-12 <= planted.precision[0] <= max(planted.spread) + 1e-12
    assert planted.hits <= planted.n * planted.repeats
    for cause in ("OTHER_A", "OTHER_B", "OTHER_C"):
        assert rules[cause].verdict == "no shortcut"
        assert rules[cause].precision[0] < 0.85 or rules[cause].recall[0] < 0.3


@pytest.mark.slow
def test_rules_of_the_reviewed_shapes_are_flagged():
    causes = ("CUT", "WIDE", "BANNED", "QUIET_A", "QUIET_B")
    rules, probe = probe_synthetic(causes, 20, seed=11)
    assert sorted(r.cause for r in probe.shortcuts) == ["BANNED", "CUT", "WIDE"]
    for cause in ("CUT", "WIDE", "BANNED"):
        assert rules[cause].precision[0] >= 0.85 and rules[cause].recall[0] >= 0.3
    assert "status=enabled & policy_status=disapproved" in rules["BANNED"].rule
    assert "new/old" in rules["CUT"].rule or "(new-old)" in rules["CUT"].rule  # parsed values
    assert "within 1h" in rules["WIDE"].rule


@pytest.mark.slow
def test_a_cut_told_by_its_level_is_flagged():
    """A cut whose ratio every cause shares, to a level only one cause's reaches (a budget a
    model could know binds from the campaign's usual spend): flagged, from the new setting or
    the size of the change in currency (ratio and change together fix the level)."""
    causes = ("LEVEL", "QUIET_LA", "QUIET_LB", "QUIET_LC")
    rules, probe = probe_synthetic(causes, 20, seed=5)
    assert [r.cause for r in probe.shortcuts] == ["LEVEL"]
    assert any(word in rules["LEVEL"].rule for word in ("new setting", "(new-old)"))


# -- the committed test split -----------------------------------------------------------------
# Issue 23's target: on the committed ads_test split, no cause can be named by a rule over its
# non-metric data (change history, campaigns, creatives, the alert lines) with out-of-fold
# precision >= 0.85 at recall >= 0.3: every episode of the split, the probe's default forest,
# the stream the audit spawns from seed 0, rates pooled over the default three fold draws. One
# draw's verdict moved with the folds (~20 positives per cause: the audit's single draw once
# flagged TARGETING_EXPANSION at 10 of 11, other draws put it at 0.47-0.64); pooled, it is 0.61.
ADS_TEST = Path(__file__).resolve().parents[2] / "data" / "ads_test"


@pytest.mark.slow
def test_the_committed_split_has_no_non_metric_shortcut(tmp_path):
    from causaltrace.datasets.reading import open_episode
    from causaltrace.datasets.storage import DatasetLayout, read_episode_tables
    from causaltrace_domains.ads.domain import AdsDomain

    layout = DatasetLayout(ADS_TEST)
    labels = {row["episode_id"]: row for row in layout.all_labels()}
    ids = [row["episode_id"] for row in layout.all_index()]
    rows, truths = [], []
    for episode in ids:
        directory = Path(open_episode(ADS_TEST, episode, cache_dir=tmp_path))
        prompt = (directory / "prompt.txt").read_text(encoding="utf-8")
        rows.append(
            record_features(read_episode_tables(directory), prompt, AdsDomain.record_tables)
        )
        label = labels[episode]
        truths.append({label["cause"], *(a["cause"] for a in label.get("also") or ())})
    causes = sorted(set().union(*truths))
    stream = np.random.default_rng(0).spawn(1)[0]  # causaltrace/audit/run.py's
    probe = rule_probe(record_frame(rows), truths, causes, stream)
    assert probe.shortcuts == [], [
        (r.cause, r.hits, r.predicted, r.n, r.rule) for r in probe.shortcuts
    ]
