"""Run every section of the audit over one or more datasets and write ``report.md`` with PNGs.

Sections 1-5 and 7 (the per-cause rule probe) read the first dataset; section 6 (difficulty
curves) reads them all (one line per dataset, e.g. one per difficulty tier) and overlays the
agents' results if given; section 8 (the learned probe) trains on its training splits (by
default the audited datasets) and tests on its held-out splits.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from tqdm import tqdm

from causaltrace.audit import channels as ch
from causaltrace.audit import curves as cv
from causaltrace.audit import distinguish as dist
from causaltrace.audit import features as ft
from causaltrace.audit import records as rec
from causaltrace.audit.data import AuditDataset, read_agent_results
from causaltrace.audit.learned import LearnedProbe, ProbeEpisode, episode_features, learned_probe
from causaltrace.audit.markdown import (
    Report,
    heatmap,
    learned_section,
    learned_summary,
    rate_table,
)
from causaltrace.audit.probes import ProbeResult, leakage_probe, shortcut_probe
from causaltrace.audit.rules import RuleProbe, rule_probe
from causaltrace.audit.stats import fmt_rate
from causaltrace.core.files import atomic_write_text
from causaltrace.episodes.oracle import OracleSolver, posterior_margin
from causaltrace.errors import CausalTraceError
from causaltrace.model.slices import parse_slice


@dataclass(frozen=True)
class AuditConfig:
    """What ``causaltrace-audit`` was asked (``causaltrace/conf/audit.yaml``)."""

    domain: Mapping[str, Any]
    datasets: tuple[str, ...]
    out: str
    results: tuple[str, ...] = ()
    episodes: int | None = None
    seed: int = 0
    scan_alpha: float | None = None  # None: the dataset's verifier's
    onset_step: int = 2
    refine_top: int = 5
    channel_threshold: float = 0.05
    folds: int = 5
    tree_depth: int = 2
    decoy_tables: tuple[str, ...] = ("change_history",)
    # The rule probe's record tables (None: the domain's ``record_tables``, else decoy_tables),
    # and its verdict: "shortcut" at out-of-fold precision >= rule_precision and recall >=
    # rule_recall (the recall is also the floor its operating point is chosen under).
    record_tables: tuple[str, ...] | None = None
    rule_precision: float = 0.85
    rule_recall: float = 0.3
    rule_repeats: int = 3  # independent fold draws pooled into the rule probe's rates
    # The learned probe (section 8): trained on learned_train (empty: the audited datasets),
    # tested on learned_heldout (empty: cross-validation over the training episodes).
    learned: bool = True
    learned_train: tuple[str, ...] = ()
    learned_heldout: tuple[str, ...] = ()
    learned_trees: int = 500
    learned_repeats: int = 5  # permutation importance: shuffles per feature
    progress: bool = True
    command: str = ""


@dataclass
class _Collected:
    rows: list[dict[str, Any]] = field(default_factory=list)
    fmt: list[dict[str, float]] = field(default_factory=list)
    decoy: list[dict[str, float]] = field(default_factory=list)
    summary: list[dict[str, float]] = field(default_factory=list)
    records: list[dict[str, float]] = field(default_factory=list)
    labels: list[Mapping[str, Any]] = field(default_factory=list)
    # the learned probe's episodes, and the names and sizes of the splits they come from
    probe_train: list[ProbeEpisode] = field(default_factory=list)
    probe_heldout: list[ProbeEpisode] = field(default_factory=list)
    train_splits: list[tuple[str, int]] = field(default_factory=list)
    heldout_splits: list[tuple[str, int]] = field(default_factory=list)


def _concurrent_set(rows: pd.DataFrame) -> str:
    both = rows[rows["concurrent"]]
    return fmt_rate(both["oracle_set"].sum(), len(both)) if len(both) else "none in this dataset"


def _takes_slice(domain, cause: str) -> bool:
    return domain.scm.point(cause).prior.has_slice


def _canonical(text: str | None) -> str | None:
    return parse_slice(text).canonical() or None if text else None


def record_tables_of(cfg: AuditConfig, domain) -> tuple[str, ...]:
    """The rule probe's tables: the config's, else the domain's declared record tables, else
    the decoy tables (a domain that declares none).

    Args:
        cfg: The audit's config.
        domain (Domain): The datasets' domain.
    """
    if cfg.record_tables is not None:
        return tuple(cfg.record_tables)
    return tuple(getattr(domain, "record_tables", ()) or cfg.decoy_tables)


def _truths(label: Mapping[str, Any]) -> set[str]:
    """Every true cause of an episode (a concurrent one has its ``also``)."""
    return {str(label["cause"])} | {str(a["cause"]) for a in label.get("also") or ()}


def _progress(total: int, desc: str, enabled: bool):
    if not enabled:
        return None

    return tqdm(total=total, desc=desc, unit="ep")


def _collect(ds: AuditDataset, cfg: AuditConfig, main: bool, into: _Collected) -> None:
    """Run the oracle on every episode; for the main dataset also compute probe features."""
    domain = ds.domain
    alpha = cfg.scan_alpha if cfg.scan_alpha is not None else ds.verifier.get("scan_alpha", 0.05)
    oracle = OracleSolver(
        domain,
        scan_alpha=float(alpha),
        snr=float(ds.verifier.get("snr", 1.0)),
        onset_step=cfg.onset_step,
        refine_top=cfg.refine_top,
    )
    alert_day = domain.scm.panel.time.values[domain.alert_onset()]
    records = record_tables_of(cfg, domain)
    bar = _progress(len(ds), f"audit {ds.name}", cfg.progress)
    for ep in ds:
        tables, prompt = ep.tables(), ep.prompt()
        ranked = oracle.rank(tables)
        top, label = ranked[0], ep.label
        cause, true_slice = str(label["cause"]), _canonical(label.get("slice"))
        # The oracle's top answer names one cause. On a concurrent episode it is credited when
        # it names one of the true causes (with that cause's slice): an upper bound for a
        # one-cause answer. Its set answer (``answer_set``: a second cause only where the
        # tables show one) is scored as FullAttr@1 scores sets: the exact set, each cause with
        # its slice (the set ceiling; see docs/audit.md).
        truths = [(cause, true_slice)] + [
            (str(a["cause"]), _canonical(a.get("slice"))) for a in label.get("also") or ()
        ]
        answered = oracle.answer_set(tables)
        set_key = {(h.cause, h.slice if _takes_slice(domain, h.cause) else None) for h in answered}
        true_key = {(c, s if _takes_slice(domain, c) else None) for c, s in truths}
        matched = next((t for t in truths if t[0] == top.cause), None)
        cause_ok = matched is not None
        if matched is not None:
            cause, true_slice = matched
        takes_slice = domain.scm.point(top.cause).prior.has_slice
        row = {
            "episode_id": ep.episode_id,
            "dataset": ds.name,
            "cause": cause,
            "slice": true_slice,
            "slice_order": 0 if not true_slice else true_slice.count("&") + 1,
            "pred_cause": top.cause,
            "pred_slice": top.slice,
            "posterior": top.posterior,
            "margin": posterior_margin(ranked),
            "oracle_cause": float(cause_ok),
            "oracle": float(cause_ok and (not takes_slice or top.slice == true_slice)),
            "concurrent": len(truths) > 1,
            "oracle_set": float(set_key == true_key and len(answered) == len(truths)),
            "oracle_set_size": len(answered),
        }
        for key, value in cv.knobs_of(domain, label, ep.stats).items():
            row[f"knob:{key}"] = value
        into.rows.append(row)
        if main:
            into.labels.append(label)
            into.fmt.append(ft.format_features(ep.directory, tables, prompt, ep.episode_id))
            into.decoy.append(ft.decoy_features(tables, cfg.decoy_tables))
            into.summary.append(ft.summary_features(tables, alert_day))
            into.records.append(rec.record_features(tables, prompt, records))
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()


def _probe_episodes(ds: AuditDataset, cfg: AuditConfig) -> list[ProbeEpisode]:
    """The learned probe's features of every episode of a dataset (its own domain's record
    tables and alert day), with the label's cause and every true cause."""
    domain = ds.domain
    alert_day = domain.scm.panel.time.values[domain.alert_onset()]
    records = record_tables_of(cfg, domain)
    bar = _progress(len(ds), f"learned probe {ds.name}", cfg.progress)
    out = []
    for ep in ds:
        features = episode_features(ep.tables(), ep.prompt(), records, alert_day)
        out.append(ProbeEpisode(features, str(ep.label["cause"]), frozenset(_truths(ep.label))))
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    return out


def _learned_splits(
    cfg: AuditConfig, opened: Sequence[AuditDataset], cache: str, into: _Collected
) -> None:
    """Read the learned probe's training splits (default: the audited datasets) and held-out
    splits; a split named in both is refused (the probe would be tested on its training data)."""
    train = cfg.learned_train or cfg.datasets
    both = {str(Path(p).resolve()) for p in train} & {
        str(Path(p).resolve()) for p in cfg.learned_heldout
    }
    if both:
        raise CausalTraceError(
            f"learned_heldout names a training split of the learned probe: {sorted(both)}"
        )
    known = {str(Path(ds.root).resolve()): ds for ds in opened}
    for paths, episodes, names in (
        (train, into.probe_train, into.train_splits),
        (cfg.learned_heldout, into.probe_heldout, into.heldout_splits),
    ):
        for path in paths:
            ds = known.get(str(Path(path).resolve())) or AuditDataset(
                path, cfg.domain, cache, cfg.episodes
            )
            mine = _probe_episodes(ds, cfg)
            episodes.extend(mine)
            names.append((ds.name, len(mine)))


def _attach_agents(rows: pd.DataFrame, datasets: Sequence[AuditDataset], results) -> list[str]:
    """Add one 0/1 column per agent (its FullAttr@1 on the episodes of its dataset)."""
    names = []
    for path in results:
        name, records = read_agent_results(path)
        best = max(datasets, key=lambda d: len(set(d.ids) & set(records)))
        if not set(best.ids) & set(records):
            raise CausalTraceError(f"{path}: none of its episodes is in the audited dataset(s)")
        column = name if name not in rows.columns else f"{name} ({Path(path).name})"
        mine = rows["dataset"] == best.name
        rows[column] = np.nan
        rows.loc[mine, column] = [
            float(records[e]["full_attribution"]) if e in records else np.nan
            for e in rows.loc[mine, "episode_id"]
        ]
        names.append(column)
    return names


def run_audit(cfg: AuditConfig) -> Path:
    """Everything ``causaltrace-audit`` does; returns the report's path.

    Args:
        cfg: The audit's config: the datasets, the output directory, the seed and the probes'
            settings.

    Raises:
        CausalTraceError: No dataset is given.
    """
    if not cfg.datasets:
        raise CausalTraceError("no dataset given: add dataset=<path> (or datasets=[a,b])")
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(cfg.seed)
    with tempfile.TemporaryDirectory(prefix="causaltrace-audit-") as cache:
        datasets = [AuditDataset(p, cfg.domain, cache, cfg.episodes) for p in cfg.datasets]
        for p in cfg.results:  # fail fast on a bad results path, before the long part
            read_agent_results(p)
        collected = _Collected()
        for i, ds in enumerate(datasets):
            _collect(ds, cfg, i == 0, collected)
        if cfg.learned:
            _learned_splits(cfg, datasets, cache, collected)
    rows = pd.DataFrame(collected.rows)
    agents = _attach_agents(rows, datasets, cfg.results)
    main = datasets[0]
    report = _write(cfg, out, main, datasets, rows, agents, collected, rng)
    path = out / "report.md"
    atomic_write_text(path, report)
    return path


# -- the report ---------------------------------------------------------------------------------
def _write(cfg, out, main, datasets, rows, agents, collected, rng) -> str:
    domain = main.domain
    first = rows[rows["dataset"] == main.name]
    causes = list(domain.scm.intervention_points)
    # Its own stream (spawning draws nothing from rng): the other sections' draws are as before.
    rules = rule_probe(
        rec.record_frame(collected.records),
        [_truths(label) for label in collected.labels],
        causes,
        rng.spawn(1)[0],
        folds=cfg.folds,
        min_precision=cfg.rule_precision,
        min_recall=cfg.rule_recall,
        repeats=cfg.rule_repeats,
    )
    y = first["cause"].to_numpy()
    chance = first["cause"].value_counts().max() / len(first)
    structure, sizes = zip(*(ft.split_sizes(row) for row in collected.fmt))
    leak = leakage_probe(ft.frame_of(structure), y, rng, folds=cfg.folds, name="structure")
    size = leakage_probe(ft.frame_of(sizes), y, rng, folds=cfg.folds, name="sizes")
    decoy = leakage_probe(ft.frame_of(collected.decoy), y, rng, folds=cfg.folds, name="decoys")
    shortcut = shortcut_probe(
        ft.frame_of(collected.summary), y, rng, depth=cfg.tree_depth, folds=cfg.folds
    )
    learned = _learned(cfg, causes, collected, rng)
    r = Report(f"Audit of {', '.join(d.name for d in datasets)} (domain {domain.name})")
    r.p("Produced by:")
    r.code(cfg.command or "causaltrace-audit", "bash")
    limit = f" (the first {cfg.episodes} episodes of each dataset)" if cfg.episodes else ""
    r.p(
        f"Episodes audited: {len(first)} of {main.name}{limit}. See docs/audit.md for what each "
        "section estimates and its limits."
    )
    _summary(r, first, (leak, size, decoy), shortcut, chance, cfg.tree_depth, rules, learned)
    _ceiling(r, rows, first, main)
    _distinguish(r, out, domain, first, causes, rng)
    _channels(r, out, domain, collected.labels, cfg.channel_threshold)
    _probes(r, (leak, size, decoy), shortcut)
    _curves(r, out, rows, agents)
    _rules(r, rules, record_tables_of(cfg, domain))
    if learned is not None:
        learned_section(r, learned, collected.train_splits, collected.heldout_splits)
    return r.text()


def _learned(cfg: AuditConfig, causes, collected: _Collected, rng) -> LearnedProbe | None:
    """The learned probe (section 8), on a stream of its own spawned after the rule probe's
    (the other sections' draws are unchanged by it); None when switched off or too few causes."""
    causes_seen = {e.cause for e in collected.probe_train}
    if not cfg.learned or len(causes_seen) < 2:
        return None
    return learned_probe(
        collected.probe_train,
        collected.probe_heldout,
        causes,
        rng.spawn(1)[0],
        folds=cfg.folds,
        trees=cfg.learned_trees,
        min_precision=cfg.rule_precision,
        min_recall=cfg.rule_recall,
        repeats=cfg.learned_repeats,
    )


def _summary(
    r: Report,
    first,
    leaks,
    shortcut: ProbeResult,
    chance,
    depth: int,
    rules: RuleProbe,
    learned: LearnedProbe | None,
) -> None:
    leak, size, decoy = leaks
    r.h("Summary")
    n = len(first)
    lines = [
        f"- Oracle ceiling, FullAttr@1: {fmt_rate(first['oracle'].sum(), n)}; cause accuracy: "
        f"{fmt_rate(first['oracle_cause'].sum(), n)}",
        f"- Oracle set ceiling (exact set of causes, each with its slice; a second cause named "
        f"only where the tables show one): {fmt_rate(first['oracle_set'].sum(), n)}; on "
        f"concurrent episodes: {_concurrent_set(first)}",
        f"- Labels the tables support: the oracle names a true cause in "
        f"{int(first['oracle_cause'].sum())} of {n} episodes (generation accepts only those, "
        f"with its verifier's settings; the episodes it misses are listed in section 1)",
        f"- Chance (majority-class rate): {chance:.3f}",
        f"- Leakage probe (structure and format features): {_probe_line(leak)}",
        f"- Leakage probe (stored file sizes and prompt length; the agent tools do not show "
        f"stored sizes, see section 4): {_probe_line(size)}",
        f"- Leakage probe (decoy-table contents): {_probe_line(decoy)}",
        f"- Shortcut probe (depth-{depth} tree on summary statistics): accuracy {_acc(shortcut)}",
        f"- Rule probe (record tables and alert line, per cause, section 7): "
        f"{len(rules.shortcuts)} of {len(rules.rules)} causes decided by a rule without a metric",
    ]
    for rule in rules.shortcuts:
        lines.append(f"  - **shortcut**: {rule.cause}: {_rule_rates(rule)}")
    if learned is not None:
        lines += learned_summary(learned)
    r.p("\n".join(lines))


def _rule_rates(rule) -> str:
    p, p_lo, p_hi = rule.precision
    c, c_lo, c_hi = rule.recall
    draws = f", pooled over {rule.repeats} fold draws" if rule.repeats > 1 else ""
    return (
        f"precision {p:.2f} [{p_lo:.2f}, {p_hi:.2f}] ({rule.hits}/{rule.predicted}), "
        f"recall {c:.2f} [{c_lo:.2f}, {c_hi:.2f}] ({rule.hits}/{rule.n * rule.repeats}){draws}"
    )


def _acc(probe: ProbeResult) -> str:
    if not probe.n:
        return "not run (too few episodes or features)"
    return f"{probe.accuracy:.3f} [{probe.low:.3f}, {probe.high:.3f}] (n={probe.n})"


def _probe_line(probe: ProbeResult) -> str:
    if not probe.n:
        return "not run (too few episodes or no features)"
    return f"{_acc(probe)} against chance {probe.chance:.3f}: **{probe.verdict}**"


def _ceiling(r: Report, rows: pd.DataFrame, first: pd.DataFrame, main) -> None:
    r.h("1. Oracle ceiling")
    r.p(
        "The oracle knows the SCM's causes, candidate slices and signatures and reads only the "
        "visible tables (causaltrace/episodes/oracle.py). FullAttr@1: the right cause and, for a "
        "cause that takes a slice, exactly the right slice (canonical text)."
    )
    cols = [("oracle_cause", "cause accuracy"), ("oracle", "FullAttr@1")]
    # The set ceiling per dataset, and on its concurrent episodes alone (the bar an agent's
    # two-cause score is read against; NaN on single-cause rows leaves them out of the count).
    sets = rows.assign(oracle_set_concurrent=rows["oracle_set"].where(rows["concurrent"]))
    set_cols = [("oracle_set", "set ceiling"), ("oracle_set_concurrent", "set ceiling, concurrent")]
    r.table(rate_table(sets, "dataset", cols + set_cols), "dataset")
    r.h("Per cause", 3)
    r.table(rate_table(first, "cause", cols), "cause")
    r.h("Per slice order", 3)
    r.table(rate_table(first.sort_values("slice_order"), "slice_order", cols), "slice order")
    wrong = first[first["oracle"] == 0]
    r.p(
        f"Median posterior margin (top-1 minus top-2): {first['margin'].median():.3f}; "
        f"{len(wrong)} episode(s) missed."
    )
    if len(wrong):
        shown = wrong[["episode_id", "cause", "slice", "pred_cause", "pred_slice", "posterior"]]
        r.table(shown.head(25).set_index("episode_id"), "episode (first 25 misses)")


def _distinguish(r: Report, out: Path, domain, first, causes, rng) -> None:
    r.h("2. Distinguishability")
    reach = dist.graph_reach(domain.scm, rng)
    r.p(
        "(a) From the graph: the observed nodes (the SCM's `observed` nodes) each cause's "
        "intervention reaches (its targets and their descendants). Two causes that reach the "
        "same observed set cannot be told apart by which columns move."
    )
    table = pd.DataFrame(
        {
            "targets": [", ".join(reach[c].targets) or "(none)" for c in causes],
            "observed reached": [", ".join(sorted(reach[c].reached)) or "(none)" for c in causes],
        },
        index=causes,
    )
    r.table(table, "cause")
    same = dist.indistinguishable_pairs(reach)
    r.p(
        "Graph-indistinguishable pairs: "
        + (", ".join(f"{a} / {b}" for a, b in same) if same else "none")
    )
    sep = dist.separating_nodes(reach)
    pairs = pd.DataFrame(
        {"separated by": [", ".join(sorted(v)) or "(nothing)" for v in sep.values()]},
        index=[f"{a} / {b}" for a, b in sep],
    )
    r.h("Observed variables that separate each pair", 3)
    r.table(pairs, "pair")
    heatmap(
        dist.separation_matrix(reach),
        out / "graph_separation.png",
        "observed nodes separating each pair of causes (0: indistinguishable)",
    )
    r.image("graph_separation.png", "graph separation")
    r.p("(b) By simulation: the oracle's confusion matrix (rows: true cause; columns: predicted).")
    conf = dist.confusion(first["cause"], first["pred_cause"], causes)
    conf = conf.loc[conf.sum(axis=1) > 0]
    heatmap(conf, out / "oracle_confusion.png", "oracle: true (rows) x predicted (columns)")
    r.image("oracle_confusion.png", "oracle confusion")
    r.table(conf, "true \\ predicted")


def _channels(r: Report, out: Path, domain, labels, threshold: float) -> None:
    r.h("3. Channels: measured vs declared")
    audit = ch.channel_audit(domain, labels, threshold)
    if audit is None:
        r.p(f"Not measured: domain {domain.name!r} does not implement `Domain.channel_readings`.")
        return
    r.p(
        f"Share of episodes in which each channel moved (a reading changed by more than "
        f"{threshold:.0%}, factual against counterfactual, from the labels' KPI totals). "
        # (CauseInfo.channels; the wording is kept so that regenerated reports stay the same)
        "Declared channels are the intervention points' `metadata['channels']`."
    )
    table = audit.moved.copy()
    table.insert(0, "declared", [", ".join(audit.declared.get(c, ())) or "-" for c in table.index])
    table.insert(1, "episodes", [audit.episodes.get(c, 0) for c in table.index])
    r.table(table, "cause")
    heatmap(
        audit.moved,
        out / "channels.png",
        "share of episodes in which a channel moved",
        fmt=".2f",
        cmap="Greens",
    )
    r.image("channels.png", "channels")
    flags = audit.flags()
    if flags:
        r.p("Mismatches:\n" + "\n".join(f"- {c}: {k}: {why}" for c, k, why in flags))
    else:
        r.p("No mismatch between declared and measured channels.")


PROBE_TITLES = {
    "structure": "structure and format features (the verdict of the summary)",
    "sizes": "file sizes and prompt length",
    "decoys": "decoy-table contents",
}


def _probes(r: Report, leaks: Sequence[ProbeResult], shortcut: ProbeResult) -> None:
    r.h("4. Leakage probe")
    r.p(
        "A random forest, stratified cross-validation, on features of the visible files that "
        "must carry no information about the cause: row counts, column sets, dates (tables and "
        "prompt), the episode id's number, row order (sortedness, position of the first row of "
        "each level), float formatting (most decimals of a nonzero value). Verdict `leak` when the lower end of the "
        "accuracy's Wilson interval is above chance. File sizes and the prompt's length are "
        "probed apart: they follow the content (compressed data, the alert's text), so above "
        "chance there says the stored bytes' size alone gives the cause away. The agent tools "
        "do not show them: the python tool takes the table files out of the sandbox once they "
        "are loaded, and the sql tool refuses the functions that report storage "
        "(tests/tools/test_tools_size_channel.py); the prompt's length follows the alert it names, "
        "which the agent is meant to read."
    )
    for probe in leaks:
        what = PROBE_TITLES.get(probe.name, probe.name)
        r.p(f"**{what}** ({probe.n_features} features, {probe.folds} folds): {_probe_line(probe)}")
        if probe.top_features:
            r.p(
                "Most used features: "
                + ", ".join(f"`{k}` ({v:.2f})" for k, v in probe.top_features[:6])
            )
    r.p(
        "The decoy-table probe reads the row count and kinds of the configured small tables "
        "(`decoy_tables`; for ads the change history). Those rows include the cause's own "
        "edit when the cause is an account edit, which is legitimate evidence and cannot be "
        "told from the decoys without the label: above chance there says edit kinds carry "
        "information, which the domain claims they do not."
    )
    r.h("5. Shortcut probe")
    r.p(
        "A shallow decision tree on at-a-glance statistics of the visible tables: the relative "
        "change (mean per day after the alert onset over before, minus 1) of every numeric "
        "column of every dated table summed over the table, and which one moved most."
    )
    r.p(f"Accuracy ({shortcut.folds}-fold): {_acc(shortcut)}; chance {shortcut.chance:.3f}.")
    if shortcut.rule:
        r.p("The rule (fitted on all episodes):")
        r.code(shortcut.rule)


def _curves(r: Report, out: Path, rows: pd.DataFrame, agents: Sequence[str]) -> None:
    r.h("6. Difficulty curves")
    found = cv.curves(rows, ["oracle", *agents])
    if not found:
        r.p("No difficulty knob found in the labels.")
        return
    r.p(
        "FullAttr@1 per bin of each knob (quantile bins for continuous knobs), the oracle "
        "(solid) and agents' results (dashed), one line per dataset; 95% Wilson intervals."
    )
    for knob, lines in found.items():
        name = f"curve_{knob.replace(':', '_').replace('/', '_')}.png"
        cv.plot_curves(lines, str(out / name))
        r.h(knob, 3)
        r.image(name, f"accuracy by {knob}")
        table = pd.DataFrame(
            {
                line.series: [
                    f"{a:.2f} (n={n})" if n else "" for a, n in zip(line.accuracy, line.n)
                ]
                for line in lines
            },
            index=lines[0].bins,
        )
        r.table(table, knob)


def _rules(r: Report, probe: RuleProbe, tables: Sequence[str]) -> None:
    r.h("7. Per-cause rule probe (record tables and alert line)")
    r.p(
        f"For each cause against the rest: shallow rules (trees of depth 1-3, a random forest's "
        f"score with a threshold) on features of the record tables ({', '.join(tables) or 'none'}) "
        f"and the prompt's alert line(s) only, no metric: counts of rows per value and pair of "
        f"values, parsed old/new values, edits shared across entities within an hour, timing "
        f"against the alert window, rows on the alerted scope, the alert's words "
        f"({probe.features} features, {probe.episodes} episodes). The operating point is chosen "
        f"on each training fold (highest precision at recall >= {probe.min_recall:.2f}) and "
        f"applied to the held-out fold; precision and recall are out-of-fold, pooled over "
        f"{_repeats(probe)} independent fold draws ('named': episodes named per draw; 'per "
        f"draw': each draw's own precision), with Wilson 95% intervals on one draw's counts. "
        f"Verdict **shortcut** at precision >= {probe.min_precision:.2f} and recall "
        f">= {probe.min_recall:.2f}: the cause can be named from these tables without reading "
        f"a metric. The rule is the selection refitted on all episodes."
    )
    table = pd.DataFrame(
        {
            "n": [rule.n for rule in probe.rules],
            "named": [_per_draw(rule.predicted, rule.repeats) for rule in probe.rules],
            "precision": [_interval(rule.precision, rule.predicted) for rule in probe.rules],
            "recall": [_interval(rule.recall, rule.n) for rule in probe.rules],
            "per draw": [_spread(rule.spread) for rule in probe.rules],
            "folds": [rule.folds for rule in probe.rules],
            "verdict": [rule.verdict for rule in probe.rules],
        },
        index=[rule.cause for rule in probe.rules],
    )
    r.table(table, "cause")
    for rule in probe.rules:
        if rule.rule:
            r.p(f"**{rule.cause}** ({rule.verdict}):")
            r.code(rule.rule)


def _repeats(probe: RuleProbe) -> int:
    return max((rule.repeats for rule in probe.rules), default=1)


def _per_draw(count: int, repeats: int) -> str:
    return f"{count / repeats:.1f}" if repeats > 1 else str(count)


def _spread(values: Sequence[float]) -> str:
    return ", ".join("-" if np.isnan(v) else f"{v:.2f}" for v in values) or "n/a"


def _interval(rate: tuple[float, float, float], n: int) -> str:
    p, lo, hi = rate
    return "n/a" if not n else f"{p:.2f} [{lo:.2f}, {hi:.2f}]"
