"""Can a cause be read off the services episodes without the metrics? A per-cause rule probe.

``python -m causaltrace_domains.services.rule_probe DATASET_DIR [--folds 5] [--seed 0]``
reads, per episode, only what needs no metric: the prompt's alert lines (KPI, service,
region, size of the move) and the change log relative to the alerted cell and the alert window
(deploys and config edits in the alerted service@region, in the alerted service, in the alerted
region, in the services the alerted one calls; how long before the window; which field; a
connection pool's old and new size). For every cause it searches rules that are one literal
(``feature >= t`` or ``feature <= t``) or the conjunction of two (then greedily three), picks
on the training folds the rule of the highest precision (the lower end of its Wilson interval)
among those that recall at least ``MIN_RECALL`` of the cause's training episodes, and applies
it to the held-out fold; the out-of-fold predictions, pooled, give the rule's precision and
recall. A cause the probe predicts with precision >= 0.85 at recall >= 0.3 is one glance, not
diagnosis. It also scores ``HAND_RULES``, the glances an SRE (or an outside review) would try.
It is sharper than the audit's domain-free probe (``causaltrace/audit/rules.py``) because its
features know where the page points.

The features follow the prompt and table formats of ``alert.py`` and ``render.py``; the probe
never reads a label except to score.
"""

from __future__ import annotations

import argparse
import re
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from causaltrace.datasets.reading import load_index, load_labels, open_episode
from causaltrace_domains.services.topology import APP, EDGES

MIN_RECALL = 0.3
TARGET_PRECISION = 0.85
BUCKET = np.timedelta64(15, "m")
# Change windows around the alert window's start, in buckets: [from, to).
WINDOWS = {"w4": (-4, 4), "w8": (-8, 8), "w16": (-16, 8), "pre4": (-4, 0), "pre12": (-12, 0)}
ALERT_RE = re.compile(
    r"ALERT[^:]*: (request rate|error rate|p99 latency|queue depth) of (\w+) in (\w+) is up "
    r"([\d,]+)% over (\d{4}-\d\d-\d\d \d\d:\d\d) to"
)
KPIS = ("request rate", "error rate", "p99 latency", "queue depth")
CALLEES = {s: {e.callee for e in EDGES if e.caller == s and e.callee in APP} for s in APP}
CALLERS = {s: {e.caller for e in EDGES if e.callee == s and e.caller in APP} for s in APP}


def parse_alerts(prompt: str) -> list[dict]:
    """Every alert line of a prompt, most severe first."""
    return [
        {
            "kpi": kpi,
            "service": service,
            "region": region,
            "move": float(move.replace(",", "")) / 100.0,
            "start": np.datetime64(start.replace(" ", "T"), "m"),
        }
        for kpi, service, region, move, start in ALERT_RE.findall(prompt)
    ]


def _kinds(log: pd.DataFrame) -> dict[str, np.ndarray]:
    field = log["field"].astype(str).to_numpy()
    deploy = log["change_type"].astype(str).to_numpy() == "deploy"
    pool = field == "db.pool.max_connections"
    old = pd.to_numeric(log["old_value"], errors="coerce").to_numpy(np.float64)
    new = pd.to_numeric(log["new_value"], errors="coerce").to_numpy(np.float64)
    shrink = pool & (new < old)
    return {
        "deploy": deploy,
        "config": ~deploy,
        "pool": pool,
        "shrink": shrink,
        "other_config": ~deploy & ~pool,
    }


def episode_features(prompt: str, log: pd.DataFrame) -> dict[str, float]:
    """The non-metric features of one episode (see the module docstring)."""
    alerts = parse_alerts(prompt)
    out: dict[str, float] = {"n_alerts": float(len(alerts))}
    if not alerts:
        return out
    first = alerts[0]
    for kpi in KPIS:
        out[f"alert_kpi={kpi}"] = float(first["kpi"] == kpi)
        out[f"any_alert_kpi={kpi}"] = float(any(a["kpi"] == kpi for a in alerts))
    for service in (*APP, "order_queue"):
        out[f"alert_service={service}"] = float(first["service"] == service)
        out[f"alerted:{service}"] = float(any(a["service"] == service for a in alerts))
    for kpi in KPIS:
        out[f"n_alerts_kpi={kpi}"] = float(sum(a["kpi"] == kpi for a in alerts))
    if len(alerts) > 1:
        out["second_log_move"] = float(np.log1p(max(alerts[1]["move"], 0.0)))
    out["alert_log_move"] = float(np.log1p(max(first["move"], 0.0)))
    out["alerts_in_distinct_regions"] = float(len({a["region"] for a in alerts}))
    times = pd.to_datetime(log["change_time"]).to_numpy().astype("datetime64[m]")
    offset = (times - first["start"]) / BUCKET  # buckets after the window's start
    service = log["service"].astype(str).to_numpy()
    region = log["region"].astype(str).to_numpy()
    old = pd.to_numeric(log["old_value"], errors="coerce").to_numpy(np.float64)
    new = pd.to_numeric(log["new_value"], errors="coerce").to_numpy(np.float64)
    ratio = np.where(old > 0, new / np.where(old > 0, old, 1.0), np.nan)
    minute = times.astype("datetime64[m]").astype(np.int64) % 15
    where = {
        "cell": (service == first["service"]) & (region == first["region"]),
        "service": service == first["service"],
        "region": region == first["region"],
        "callee_cell": np.isin(service, sorted(CALLEES.get(first["service"], ())))
        & (region == first["region"]),
        "caller_cell": np.isin(service, sorted(CALLERS.get(first["service"], ())))
        & (region == first["region"]),
        "any": np.ones(len(log), dtype=bool),
        "any_alert_cell": np.zeros(len(log), dtype=bool),
    }
    for a in alerts:
        where["any_alert_cell"] |= (service == a["service"]) & (region == a["region"])
    for kind, is_kind in _kinds(log).items():
        for place, at in where.items():
            rows = is_kind & at
            for name, (lo, hi) in WINDOWS.items():
                inside = rows & (offset >= lo) & (offset < hi)
                out[f"n:{kind}@{place}:{name}"] = float(inside.sum())
            before = rows & (offset < 8)
            nearest = np.abs(offset[before] + 0.5).min() if before.any() else 99.0
            out[f"nearest:{kind}@{place}"] = float(nearest)
            if kind in ("pool", "shrink"):
                recent = rows & (offset >= -16) & (offset < 8)
                out[f"min_ratio:{kind}@{place}"] = (
                    float(np.nanmin(ratio[recent])) if recent.any() else 9.0
                )
                out[f"min_new:{kind}@{place}"] = (
                    float(np.nanmin(new[recent])) if recent.any() else 9999.0
                )
        recent_cell = is_kind & where["cell"] & (offset >= -16) & (offset < 8)
        out[f"minute:{kind}@cell"] = float(minute[recent_cell].min()) if recent_cell.any() else 99
    return out


def dataset_features(out_dir: str | Path) -> tuple[pd.DataFrame, list[str]]:
    """Features and true (first) causes of every episode of a dataset."""
    labels = load_labels(out_dir)
    rows, causes = [], []
    with tempfile.TemporaryDirectory(prefix="rule_probe_") as cache:
        for entry in load_index(out_dir):
            episode = entry["episode_id"]
            directory = open_episode(out_dir, episode, cache_dir=cache)
            prompt = (directory / "prompt.txt").read_text(encoding="utf-8")
            log = pd.read_parquet(directory / "change_log.parquet")
            rows.append(episode_features(prompt, log))
            label = labels[episode]
            causes.append([label["cause"], *[a["cause"] for a in label.get("also") or ()]])
    return pd.DataFrame(rows).fillna(0.0), causes


def literals(frame: pd.DataFrame, n_thresholds: int = 8) -> tuple[np.ndarray, list[str]]:
    """Boolean literals ``feature >= t`` and ``feature <= t`` over quantile thresholds."""
    columns, names = [], []
    for name in frame.columns:
        values = frame[name].to_numpy(np.float64)
        unique = np.unique(values)
        if unique.size < 2:
            continue
        cuts = (
            unique
            if unique.size <= n_thresholds
            else np.unique(np.quantile(values, np.linspace(0.05, 0.95, n_thresholds)))
        )
        for t in cuts:
            if t > unique[0]:
                columns.append(values >= t)
                names.append(f"{name} >= {t:g}")
            if t < unique[-1]:
                columns.append(values <= t)
                names.append(f"{name} <= {t:g}")
    return np.column_stack(columns), names


def _wilson_lower(hits: np.ndarray, total: np.ndarray, z: float = 1.96) -> np.ndarray:
    """Lower end of the Wilson interval of hits / total (0 where total is 0): rules are ranked
    by it, so a rule precise on a handful of training episodes by luck does not beat a broad
    one that is nearly as precise."""
    m = np.maximum(total, 1)
    p = hits / m
    centre = p + z * z / (2 * m)
    spread = z * np.sqrt(p * (1 - p) / m + z * z / (4 * m * m))
    return np.where(total > 0, (centre - spread) / (1 + z * z / m), 0.0)


def best_rule(lits: np.ndarray, y: np.ndarray, min_recall: float = MIN_RECALL):
    """The conjunction of two literals (one, when both are the same) with the best precision
    (Wilson lower bound) among those that recall at least ``min_recall`` of ``y``, then greedily
    a third literal if it raises that bound and keeps the recall; None if no rule recalls
    enough."""
    x = lits.astype(np.float64)
    pos = x[y].T @ x[y]  # hits among positives of (i AND j); the diagonal is single literals
    all_ = x.T @ x
    n_pos = max(int(y.sum()), 1)
    ok = pos / n_pos >= min_recall
    if not ok.any():
        return None
    score = np.where(ok, _wilson_lower(pos, all_) + 1e-6 * pos, -1.0)
    i, j = (int(v) for v in np.unravel_index(int(np.argmax(score)), score.shape))
    base = lits[:, i] & lits[:, j]
    third = x[base]  # rows the pair fires on, by the third literal
    hits, total = third[y[base]].sum(axis=0), third.sum(axis=0)
    better = np.where(hits / n_pos >= min_recall, _wilson_lower(hits, total), -1.0)
    k = int(np.argmax(better))
    if better[k] > score[i, j]:
        return (i, j, k)
    return (i, j)


def probe(
    frame: pd.DataFrame, causes: Sequence[Sequence[str]], folds: int = 5, seed: int = 0
) -> pd.DataFrame:
    """Per cause: the out-of-fold precision and recall of the rule picked on training folds,
    and the rule picked on every episode (for reading)."""
    lits, names = literals(frame)
    n = len(frame)
    rng = np.random.default_rng(seed)
    fold = rng.permutation(n) % folds
    rows = []
    for cause in sorted({c for cs in causes for c in cs}):
        y = np.array([cause in cs for cs in causes])
        predicted = np.zeros(n, dtype=bool)
        for k in range(folds):
            train, test = fold != k, fold == k
            rule = best_rule(lits[train], y[train])
            if rule is not None:
                predicted[test] = lits[test][:, list(rule)].all(axis=1)
        tp = int((predicted & y).sum())
        precision = tp / max(int(predicted.sum()), 1)
        recall = tp / max(int(y.sum()), 1)
        rule = best_rule(lits, y)
        text = "" if rule is None else " AND ".join(dict.fromkeys(names[i] for i in rule))
        rows.append(
            {
                "cause": cause,
                "n": int(y.sum()),
                "oof_precision": round(precision, 3),
                "oof_recall": round(recall, 3),
                "one_glance": bool(precision >= TARGET_PRECISION and recall >= MIN_RECALL),
                "rule_on_all": text,
            }
        )
    return pd.DataFrame(rows).set_index("cause")


# Rules a glance would use, scored on every episode (no fitting): name -> (cause, rule).
HAND_RULES = {
    "deploy in the alerted service@region, 4 buckets around the window start": (
        "BAD_DEPLOY",
        lambda f: f["n:deploy@cell:w4"] >= 1,
    ),
    "error-rate alert first and a deploy in its service@region (w4)": (
        "BAD_DEPLOY",
        lambda f: (f["alert_kpi=error rate"] == 1) & (f["n:deploy@cell:w4"] >= 1),
    ),
    "pool cut in the alerted service@region (w4)": (
        "CONFIG_CHANGE",
        lambda f: f["n:shrink@cell:w4"] >= 1,
    ),
    "error-rate alert first and a pool cut in its service@region (w4)": (
        "CONFIG_CHANGE",
        lambda f: (f["alert_kpi=error rate"] == 1) & (f["n:shrink@cell:w4"] >= 1),
    ),
    "queue-depth alert first": ("QUEUE_CONSUMER_STALL", lambda f: f["alert_kpi=queue depth"] == 1),
    "queue-depth alert alone": (
        "QUEUE_CONSUMER_STALL",
        lambda f: (f["alert_kpi=queue depth"] == 1) & (f["n_alerts"] == 1),
    ),
    "alerts in two or more regions": (
        "TRAFFIC_SURGE",
        lambda f: f["alerts_in_distinct_regions"] >= 2,
    ),
    "p99 alert first": ("NOISY_NEIGHBOUR", lambda f: f["alert_kpi=p99 latency"] == 1),
}


def hand_rules(frame: pd.DataFrame, causes: Sequence[Sequence[str]]) -> pd.DataFrame:
    """Precision and recall of each of ``HAND_RULES`` on every episode."""
    rows = []
    for name, (cause, rule) in HAND_RULES.items():
        y = np.array([cause in cs for cs in causes])
        hit = np.asarray(rule(frame), dtype=bool)
        tp = int((hit & y).sum())
        rows.append(
            {
                "rule": name,
                "cause": cause,
                "precision": round(tp / max(int(hit.sum()), 1), 3),
                "recall": round(tp / max(int(y.sum()), 1), 3),
            }
        )
    return pd.DataFrame(rows).set_index("rule")


def main(argv: Sequence[str] | None = None) -> Mapping[str, object]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    frame, causes = dataset_features(args.dataset)
    table = probe(frame, causes, args.folds, args.seed)
    glance = hand_rules(frame, causes)
    with pd.option_context("display.width", 250, "display.max_colwidth", 120):
        print(table.to_string())
        print()
        print(glance.to_string())
    return {"table": table, "hand_rules": glance}


if __name__ == "__main__":
    main()
