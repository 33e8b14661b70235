"""A self-contained HTML report of an evaluation run: one file, inline CSS and JavaScript, the
confusion matrix inlined as a PNG data URI, no network access.

The left pane lists the episodes (filter by true cause, by outcome, by id); the right pane shows
the run's summary tables or, for a selected episode, its transcript (messages, tool calls and
tool outputs) beside its label, the agent's answer and the reward breakdown. ``#ep=<id>`` in
the URL opens an episode. The episode table and the summary are rendered here (so the page
shows them without JavaScript); the episode view is built by the script from an embedded JSON
block with ``textContent`` only, so agent text is never interpreted as HTML.
"""

from __future__ import annotations

import base64
import html
import json
import math
import re
import time
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from causaltrace.core.files import atomic_write_text
from causaltrace.episodes.answers import NO_SIGNAL_GROUP
from causaltrace.scoring.metrics import NO_ANSWER, MetricValue, bootstrap_means, episode_values

MAX_TOOL_CHARS = 8000
OUTCOMES = (
    ("correct", "correct"),
    ("slice", "right cause, wrong slice"),
    ("wrong", "wrong cause"),
    ("none", "no answer"),
    ("error", "error"),
)
SUMMARY_METRICS = (
    ("full_attr_at_1", "FullAttr@1"),
    ("cause_accuracy", "cause acc"),
    ("slice_exact_1d", "1D slice"),
    ("slice_exact_2d", "2D slice"),
    ("no_signal_accuracy", "no-signal acc"),
    ("parse_rate", "parse rate"),
    ("mean_tool_calls", "tool calls"),
    ("mean_reward", "reward"),
)


# -- every true cause of an episode: per-cause rows, the confusion, the episode-type split ----
CAUSE_METRICS = (
    ("attributed", "attributed"),
    ("cause_accuracy", "cause named"),
    ("full_attr_at_1", "FullAttr@1 (episode)"),
    *SUMMARY_METRICS[2:],  # the slice, no-signal, parse, tool-call and reward columns
)
MISSED = "(missed)"  # a true cause left unpaired: the answer named fewer causes
EXTRA = "(extra)"  # an answered cause left unpaired: the answer named more causes
EPISODE_TYPES = {"single": "single cause", "concurrent": "concurrent"}


@dataclass(frozen=True)
class CauseRow:
    """One true cause of one episode: a concurrent episode gives one row per cause.

    ``named``: the answer names this cause (any of its causes); ``attributed``: it names it with
    this cause's slice where the cause takes one (for a single-cause episode and a one-cause
    answer, exactly FullAttr@1); ``slice_named``: some answered cause has this cause's slice;
    ``full_attribution``: the episode's FullAttr@1 (a concurrent episode: the exact set), so a
    cause's table also says how often its episodes were solved whole. In the tables,
    ``cause_accuracy`` is ``named`` (on single-cause episodes with one-cause answers, the
    scoring module's cause accuracy)."""

    episode_id: str
    cause: str
    group: str
    slice: str | None
    slice_order: int
    takes_slice: bool
    concurrent: bool
    named: bool
    attributed: bool
    slice_named: bool
    full_attribution: bool
    parse_ok: bool
    tool_calls: int
    reward: float | None


def answer_candidates(answer: Any) -> list[tuple[str, str | None]]:
    """The (cause, slice) pairs a result record's ``answer`` names, first first: the single
    form ``{"root_cause", "slice"}`` or the list ``{"causes": [...]}``
    (:meth:`causaltrace.scoring.Answer.to_dict`); ``""`` is no slice."""
    if not isinstance(answer, Mapping):
        return []
    entries = answer.get("causes") if answer.get("causes") else [answer]
    out = []
    for entry in entries:
        if isinstance(entry, Mapping) and entry.get("root_cause"):
            out.append((str(entry["root_cause"]), entry.get("slice") or None))
    return out


def _canonical(space, text: str | None) -> str | None:
    if not text:
        return None
    try:
        return space.canonical_slice(text)
    except (ValueError, KeyError):
        return text  # not a slice of this panel: it matches no true slice


def _true_causes(label, space) -> list[tuple[str, str | None]]:
    return [(c, space.canonical_slice(s) if s else None) for c, s in label.causes]


def _answered(outcome, answers: Mapping[str, Any], space) -> list[tuple[str, str | None]]:
    """The causes an episode's answer names (canonical slices); none if it did not parse."""
    if not outcome.parse_ok:
        return []
    found = answer_candidates(answers.get(outcome.episode_id))
    if not found and outcome.pred_cause:
        found = [(outcome.pred_cause, outcome.pred_slice)]
    return [(c, _canonical(space, s)) for c, s in found]


def cause_rows(
    labels: Mapping[str, Any], outcomes: Sequence[Any], answers: Mapping[str, Any], space
) -> list[CauseRow]:
    """A row per (episode, true cause), in episode order then the label's cause order.
    ``answers``: each episode's answer as its result record stores it."""
    rows = []
    for o in outcomes:
        label = labels[o.episode_id]
        answered = _answered(o, answers, space)
        truths = _true_causes(label, space)
        for cause, true_slice in truths:
            takes = space.takes_slice(cause)
            named = any(c == cause for c, _ in answered)
            rows.append(
                CauseRow(
                    episode_id=o.episode_id,
                    cause=cause,
                    group=str(space.groups.get(cause, o.group)),
                    slice=true_slice,
                    slice_order=0 if not true_slice else true_slice.count("&") + 1,
                    takes_slice=takes,
                    concurrent=len(truths) > 1,
                    named=named,
                    attributed=any(
                        c == cause and (not takes or s == true_slice) for c, s in answered
                    ),
                    slice_named=any(s == true_slice for _, s in answered),
                    full_attribution=bool(o.full_attribution),
                    parse_ok=bool(o.parse_ok),
                    tool_calls=int(o.tool_calls),
                    reward=o.reward,
                )
            )
    return rows


def _row_values(rows: Sequence[CauseRow], no_signal_group: str) -> np.ndarray:
    """Per row, the values of :data:`CAUSE_METRICS`, in its order (NaN where not applicable)."""
    nan = math.nan
    out = []
    for r in rows:
        out.append(
            [
                float(r.attributed),
                float(r.named),
                float(r.full_attribution),
                float(r.slice_named) if r.takes_slice and r.slice_order == 1 else nan,
                float(r.slice_named) if r.takes_slice and r.slice_order == 2 else nan,
                float(r.named) if r.group == no_signal_group else nan,
                float(r.parse_ok),
                float(r.tool_calls),
                nan if r.reward is None else float(r.reward),
            ]
        )
    return np.asarray(out, dtype=np.float64).reshape(len(rows), len(CAUSE_METRICS))


def _scope(values: np.ndarray, names: Sequence[str], key: str, n_boot: int, seed: int) -> dict:
    """Means with percentile-bootstrap intervals, one generator per scope (seed, key), as
    :func:`causaltrace.scoring.compute_metrics` seeds its scopes."""

    rng = np.random.default_rng([seed, zlib.crc32(key.encode())])
    point, low, high, n = bootstrap_means(values, n_boot=n_boot, rng=rng)
    return {
        name: MetricValue(float(point[j]), float(low[j]), float(high[j]), int(n[j]))
        for j, name in enumerate(names)
        if n[j] > 0
    }


@dataclass(frozen=True)
class CauseTables:
    """The run's tables that read every cause of an episode (docs/evaluation.md)."""

    rows: list[CauseRow]
    by_cause: Mapping[str, Mapping[str, Any]]  # cause -> metric -> MetricValue
    by_group: Mapping[str, Mapping[str, Any]]
    by_type: Mapping[str, Mapping[str, Any]]  # "single" / "concurrent" -> episode metrics
    confusion: Any  # pandas DataFrame: true (+ "(extra)") x predicted (+ missed, no answer)

    def to_dict(self) -> dict[str, Any]:
        def block(metrics: Mapping[str, Any]) -> dict[str, dict[str, float]]:
            return {
                k: {"value": v.value, "low": v.low, "high": v.high, "n": v.n}
                for k, v in metrics.items()
            }

        return {
            "by_cause": {c: block(m) for c, m in self.by_cause.items()},
            "by_group": {g: block(m) for g, m in self.by_group.items()},
            "by_episode_type": {t: block(m) for t, m in self.by_type.items()},
            "concurrent_rows": {
                c: sum(r.concurrent for r in self.rows if r.cause == c) for c in self.by_cause
            },
        }


def cause_confusion(
    labels: Mapping[str, Any], outcomes: Sequence[Any], answers: Mapping[str, Any], space
):
    """Counts of (true cause, answered cause) over every cause of every episode.

    Per episode: true and answered causes with the same name pair up first (the diagonal);
    the true causes left over pair with the answered causes left over, in order (the label's
    order, the answer's order: a wrong one-cause answer is one off-diagonal count, as in a
    single-cause matrix); a true cause still left is counted against ``(missed)``, an answered
    one against the row ``(extra)``; an episode without a parsed answer counts each true cause
    against ``(no answer)``. So every true cause is counted once, and every answered one."""
    # lazy: pandas takes ~0.5 s to import; the rest of this module does not need it
    import pandas as pd

    truths = {
        o.episode_id: [c for c, _ in _true_causes(labels[o.episode_id], space)] for o in outcomes
    }
    said_by = {o.episode_id: [c for c, _ in _answered(o, answers, space)] for o in outcomes}
    order = list(dict.fromkeys([*space.causes, *(c for t in truths.values() for c in t)]))
    named = [c for a in said_by.values() for c in a]
    cols = [*dict.fromkeys([*order, *named]), MISSED, NO_ANSWER]
    frame = pd.DataFrame(
        0, index=pd.Index([*order, EXTRA], name="true"), columns=pd.Index(cols, name="predicted")
    )
    for o in outcomes:
        true, said = list(truths[o.episode_id]), list(said_by[o.episode_id])
        if not said:
            for cause in true:
                frame.loc[cause, NO_ANSWER] += 1
            continue
        for cause in list(true):
            if cause in said:
                frame.loc[cause, cause] += 1
                true.remove(cause)
                said.remove(cause)
        for cause, answer in zip(true, said):
            frame.loc[cause, answer] += 1
        for cause in true[len(said) :]:
            frame.loc[cause, MISSED] += 1
        for answer in said[len(true) :]:
            frame.loc[EXTRA, answer] += 1
    keep_rows = [i for i in frame.index if i != EXTRA or frame.loc[EXTRA].sum() > 0]
    keep_cols = [c for c in frame.columns if c not in (MISSED,) or frame[c].sum() > 0]
    return frame.loc[keep_rows, keep_cols]


def cause_tables(
    labels: Mapping[str, Any],
    outcomes: Sequence[Any],
    answers: Mapping[str, Any],
    space,
    *,
    n_boot: int = 1000,
    seed: int = 0,
) -> CauseTables:
    """Per-cause and per-group tables over :func:`cause_rows`, FullAttr@1 (and the episode
    metrics) per episode type, and :func:`cause_confusion`."""

    rows = cause_rows(labels, outcomes, answers, space)
    values = _row_values(rows, NO_SIGNAL_GROUP)
    names = [k for k, _ in CAUSE_METRICS]
    every = np.arange(len(rows))
    causes = list(dict.fromkeys([*space.causes, *(r.cause for r in rows)]))
    by_cause = {
        c: _scope(values[every[[r.cause == c for r in rows]]], names, f"cause:{c}", n_boot, seed)
        for c in causes
        if any(r.cause == c for r in rows)
    }
    groups = list(dict.fromkeys(r.group for r in rows))
    by_group = {
        g: _scope(values[every[[r.group == g for r in rows]]], names, f"group:{g}", n_boot, seed)
        for g in groups
    }
    ep_names, ep_values = episode_values(outcomes)
    concurrent = np.array([len(labels[o.episode_id].causes) > 1 for o in outcomes], dtype=bool)
    by_type = {}
    for key, mask in (("single", ~concurrent), ("concurrent", concurrent)):
        if mask.any():
            by_type[key] = _scope(ep_values[mask], ep_names, f"type:{key}", n_boot, seed)
    confusion = cause_confusion(labels, outcomes, answers, space)
    return CauseTables(rows, by_cause, by_group, by_type, confusion)


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _wbr(value: Any) -> str:
    """Escaped text that may wrap after underscores (long cause names)."""
    return _e(value).replace("_", "_<wbr>")


def _json_for_script(data: Any) -> str:
    """JSON that is safe inside ``<script type="application/json">``."""
    text = json.dumps(data, ensure_ascii=False, allow_nan=False, default=str)
    for char, escape in (
        ("<", "\\u003c"),
        (">", "\\u003e"),
        ("&", "\\u0026"),
        ("\u2028", "\\u2028"),
        ("\u2029", "\\u2029"),
    ):
        text = text.replace(char, escape)
    return text


def _finite(value: Any) -> Any:
    """JSON-safe data: NaN and infinities become null."""
    if isinstance(value, Mapping):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def read_transcript(path: Path) -> list[dict[str, Any]]:
    """The messages of a transcript file written by ``DiagnosisSession.write_transcript``."""
    if not path.exists():
        return []
    messages = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict) and row.get("type") == "message":
            messages.append({k: v for k, v in row.items() if k != "type"})
    return messages


def _clip(text: Any, limit: int) -> str | None:
    if text is None:
        return None
    text = text if isinstance(text, str) else json.dumps(text, ensure_ascii=False)
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n... ({len(text) - limit} more characters in the transcript file)"


def _view_message(m: Mapping[str, Any], limit: int) -> dict[str, Any]:
    role = m.get("role")
    out: dict[str, Any] = {"role": role}
    out["content"] = _clip(m.get("content"), limit if role == "tool" else 10 * limit)
    if m.get("reasoning"):
        out["reasoning"] = _clip(m["reasoning"], 10 * limit)
    if m.get("error"):
        out["error"] = str(m["error"])
    if role == "tool":
        out["name"] = m.get("name")
        out["tool_call_id"] = m.get("tool_call_id")
    calls = []
    for tc in m.get("tool_calls") or []:
        fn = tc.get("function") or {}
        calls.append(
            {
                "id": tc.get("id"),
                "name": fn.get("name"),
                "arguments": _clip(fn.get("arguments"), 10 * limit),
            }
        )
    if calls:
        out["tool_calls"] = calls
    return out


def _outcome(record: Mapping[str, Any], outcome) -> str:
    if record.get("error"):
        return "error"
    if outcome is None or not outcome.parse_ok:
        return "none"
    if outcome.full_attribution:
        return "correct"
    return "slice" if outcome.cause_correct else "wrong"


def _label_view(label) -> dict[str, Any]:
    effects = {
        kpi: {"factual": e.factual, "counterfactual": e.counterfactual}
        for kpi, e in (label.effect_in_slice or {}).items()
    }
    return {
        "causes": [c for c, _ in label.causes],  # every true cause (concurrent: several)
        "also": [{"cause": a.cause, "slice": a.slice} for a in label.also],
        "cause": label.cause,
        "group": label.group,
        "slice": label.slice,
        "onset": label.onset,
        "onset_time": label.onset_time,
        "profile": label.profile,
        "strength": label.strength,
        "effect_in_slice": effects,
    }


def _fmt_metric(metrics: Mapping[str, Any], key: str) -> tuple[str, str]:
    mv = metrics.get(key)
    if mv is None or mv.value != mv.value:
        return "–", ""
    digits = 1 if key == "mean_tool_calls" else 3
    ci = ""
    if mv.low == mv.low and mv.high == mv.high:
        ci_digits = 1 if key == "mean_tool_calls" else 2
        ci = f"[{mv.low:.{ci_digits}f}, {mv.high:.{ci_digits}f}]"
    return f"{mv.value:.{digits}f}", ci


def _metrics_table(
    rows: Sequence[tuple[str, Mapping[str, Any]]], first: str, columns=SUMMARY_METRICS
) -> str:
    head = "".join(f"<th>{_e(t)}</th>" for t in (first, "n", *(t for _, t in columns)))
    body = []
    for name, metrics in rows:
        n = metrics["full_attr_at_1"].n if "full_attr_at_1" in metrics else 0
        cells = [f'<td class="k">{_wbr(name)}</td>', f'<td class="num">{n}</td>']
        for key, _ in columns:
            value, ci = _fmt_metric(metrics, key)
            cells.append(f'<td class="num">{_e(value)}<span class="ci">{_e(ci)}</span></td>')
        body.append("<tr>" + "".join(cells) + "</tr>")
    return (
        f'<div class="table-x"><table class="metrics"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table></div>"
    )


def _summary_html(
    metrics, counts: Mapping[str, Any], confusion_png: Path | None, tables: CauseTables | None
) -> str:
    parts = ['<section id="summary-view"><h2>Summary</h2>']
    if metrics is None:
        parts.append("<p>No episode was scored.</p></section>")
        return "".join(parts)
    cards = []
    for key, title in (
        ("full_attr_at_1", "FullAttr@1"),
        ("cause_accuracy", "cause accuracy"),
        ("parse_rate", "parse rate"),
        ("mean_tool_calls", "tool calls / ep."),
    ):
        value, ci = _fmt_metric(metrics.overall, key)
        cards.append(
            f'<div class="card"><div class="card-v">{_e(value)}</div>'
            f'<div class="card-t">{_e(title)}</div><div class="ci">{_e(ci)}</div></div>'
        )
    cards.append(
        f'<div class="card"><div class="card-v">{counts["episodes"]}</div>'
        f'<div class="card-t">episodes</div><div class="ci">{counts["errors"]} errors, '
        f"{counts['no_answer']} without answer</div></div>"
    )
    parts.append(f'<div class="cards">{"".join(cards)}</div>')
    parts.append(
        f'<p class="note">Means with {metrics.confidence:.0%} percentile-bootstrap '
        f"intervals over episodes ({metrics.n_boot} resamples); – means not "
        f"applicable. Select an episode on the left to read its transcript.</p>"
    )
    if tables is None:
        parts.append("<h3>By cause group</h3>")
        parts.append(_metrics_table(list(metrics.by_group.items()), "group"))
        parts.append("<h3>By cause</h3>")
        parts.append(_metrics_table(list(metrics.by_cause.items()), "cause"))
    else:
        types = [(EPISODE_TYPES[k], m) for k, m in tables.by_type.items()]
        parts.append("<h3>By episode type</h3>")
        parts.append(_metrics_table(types, "episodes"))
        parts.append(
            '<p class="note">A row per true cause of each episode: a concurrent episode counts '
            "under each of its causes (n counts causes). attributed: the answer names the cause "
            "with its slice; cause named: it names the cause; FullAttr@1 (episode): the whole "
            "episode was solved.</p>"
        )
        parts.append("<h3>By cause group</h3>")
        parts.append(_metrics_table(list(tables.by_group.items()), "group", CAUSE_METRICS))
        parts.append("<h3>By cause</h3>")
        parts.append(_metrics_table(list(tables.by_cause.items()), "cause", CAUSE_METRICS))
    if confusion_png is not None and Path(confusion_png).exists():
        data = base64.b64encode(Path(confusion_png).read_bytes()).decode("ascii")
        parts.append(
            "<h3>Cause confusion (rows: true cause, normalized; every cause of an episode: "
            f"{_e(MISSED)} a true cause the answer left out, {_e(EXTRA)} an answered cause "
            "too many)</h3>"
        )
        parts.append(
            f'<img class="confusion" alt="cause confusion matrix" '
            f'src="data:image/png;base64,{data}">'
        )
    parts.append("</section>")
    return "".join(parts)


def _causes_html(pairs: Sequence[tuple[Any, Any]]) -> str:
    return "".join(
        f'{_wbr(cause)}<div class="sl">{_e(sl or "(no slice)")}</div>' for cause, sl in pairs
    )


def _row_html(ep: Mapping[str, Any]) -> str:
    label, answer = ep["label"], ep.get("answer")
    if ep["outcome"] == "error":
        pred = '<span class="muted">error</span>'
    elif not answer:
        pred = '<span class="muted">no answer</span>'
    else:
        pred = _causes_html(answer_candidates(answer)) or '<span class="muted">no answer</span>'
    truth = _causes_html(
        [(label["cause"], label["slice"]), *((a["cause"], a["slice"]) for a in label["also"])]
    )
    return (
        f'<tr class="ep {ep["outcome"]}" data-ep="{_e(ep["id"])}" '
        f'data-cause="{_e(" ".join(label["causes"]))}" data-outcome="{_e(ep["outcome"])}" '
        'tabindex="0">'
        f'<td class="id">{_e(ep["id"])}</td><td>{truth}</td>'
        f'<td class="pred">{pred}</td>'
        f'<td class="num"><span class="dot"></span>{ep["score"]:.2f}</td></tr>'
    )


def build_report(
    *,
    records: Sequence[Mapping[str, Any]],
    labels: Mapping[str, Any],
    outcomes: Sequence[Any],
    metrics,
    info: Mapping[str, Any],
    counts: Mapping[str, Any],
    transcript_dir: Path,
    confusion_png: Path | None = None,
    max_tool_chars: int = MAX_TOOL_CHARS,
    tables: CauseTables | None = None,
) -> str:
    """The report's HTML text. ``tables`` (:func:`cause_tables`): the summary's per-cause and
    per-group tables and the episode-type split, reading every cause of an episode."""
    by_id = {o.episode_id: o for o in outcomes}
    episodes = []
    for r in records:
        ep_id = r["episode_id"]
        outcome = by_id.get(ep_id)
        messages = read_transcript(Path(transcript_dir) / f"{ep_id}.jsonl")
        episodes.append(
            {
                "id": ep_id,
                "label": _label_view(labels[ep_id]),
                "answer": r.get("answer"),
                "outcome": _outcome(r, outcome),
                "score": float(r.get("score") or 0.0),
                "reward": r.get("reward") or {},
                "takes_slice": bool(outcome.takes_slice) if outcome else None,
                "cause_ok": bool(outcome.cause_correct) if outcome else False,
                "slice_ok": bool(outcome.slice_exact) if outcome else False,
                "reason": r.get("reason"),
                "parse_error": r.get("parse_error"),
                "error": r.get("error"),
                "tool_calls": r.get("tool_calls"),
                "turns": r.get("turns"),
                "seconds": r.get("seconds"),
                "messages": [_view_message(m, max_tool_chars) for m in messages],
            }
        )
    ds, agent = info["dataset"], info["agent"]
    model = (agent.get("config") or {}).get("model")
    title = f"{agent['name']}{' (' + str(model) + ')' if model else ''} on {ds['name']}"
    causes = sorted({c for ep in episodes for c in ep["label"]["causes"]})
    cause_options = "".join(f'<option value="{_e(c)}">{_e(c)}</option>' for c in causes)
    outcome_options = "".join(f'<option value="{k}">{_e(t)}</option>' for k, t in OUTCOMES)
    meta = (
        f"split {_e(ds['split'])} · {counts['episodes']} episodes · seed {_e(info['seed'])}"
        f" · budgets {_e(info['env'].get('max_tool_calls'))} calls / "
        f"{_e(info['env'].get('max_turns'))} turns · generated "
        f"{_e(time.strftime('%Y-%m-%d %H:%M'))}"
    )
    parts = {
        "TITLE": _e(title),
        "META": meta,
        "CAUSE_OPTIONS": cause_options,
        "OUTCOME_OPTIONS": outcome_options,
        "ROWS": "".join(_row_html(ep) for ep in episodes),
        "SUMMARY": _summary_html(metrics, counts, confusion_png, tables),
        "N": str(len(episodes)),
        "DATA": _json_for_script(_finite({"episodes": episodes})),
    }
    # one pass, so that no inserted text is ever substituted again
    return re.sub(r"__([A-Z_]+)__", lambda m: parts.get(m.group(1), m.group(0)), PAGE)


def write_report(path: str | Path, **kwargs: Any) -> Path:
    """Write :func:`build_report`'s page to ``path`` (atomically); returns the path."""
    path = Path(path)
    atomic_write_text(path, build_report(**kwargs))
    return path


PAGE = r"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>__TITLE__ · causaltrace evaluation</title>
<style>
:root { --fg:#1d2433; --muted:#6b7385; --line:#dfe3ea; --bg:#f6f7f9; --ok:#1a7f37;
  --warn:#b26a00; --bad:#c62828; --accent:#2f5bd3; --code:#f3f4f7; }
* { box-sizing: border-box; }
html, body { margin:0; height:100%; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif;
  color:var(--fg); background:var(--bg); display:flex; flex-direction:column; }
header { background:#1d2433; color:#fff; padding:10px 18px; display:flex; align-items:baseline;
  gap:16px; flex-wrap:wrap; }
header h1 { font-size:17px; margin:0; font-weight:600; }
header .meta { color:#b8c0d0; font-size:12.5px; }
main { flex:1; display:flex; min-height:0; }
#list { width:480px; min-width:360px; border-right:1px solid var(--line); background:#fff;
  display:flex; flex-direction:column; min-height:0; }
.filters { padding:10px 12px; border-bottom:1px solid var(--line); display:flex; gap:6px;
  flex-wrap:wrap; align-items:center; }
.filters select, .filters input { font:inherit; font-size:12.5px; padding:4px 6px;
  border:1px solid var(--line); border-radius:5px; background:#fff; }
.filters input { flex:1; min-width:90px; }
#shown { color:var(--muted); font-size:12px; width:100%; }
.table-wrap { overflow:auto; flex:1; }
table { border-collapse:collapse; width:100%; }
#episodes { table-layout:fixed; }
#episodes col.c-id { width:128px; } #episodes col.c-score { width:64px; }
#episodes th { position:sticky; top:0; background:#fafbfc; text-align:left; font-weight:600;
  font-size:12px; color:var(--muted); padding:6px 8px; border-bottom:1px solid var(--line); }
#episodes td { padding:6px 8px; border-bottom:1px solid #eef0f4; vertical-align:top;
  font-size:12.5px; overflow-wrap:anywhere; }
#episodes tr.ep { cursor:pointer; }
#episodes tr.ep:hover { background:#f3f6fd; }
#episodes tr.ep.selected { background:#e4ebfb; }
td.id { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size:11.5px; }
.sl { color:var(--muted); font-size:11.5px; word-break:break-all; }
.num { text-align:right; white-space:nowrap; }
.dot { display:inline-block; width:9px; height:9px; border-radius:50%; margin-right:6px;
  background:var(--muted); }
tr.correct .dot { background:var(--ok); } tr.slice .dot { background:var(--warn); }
tr.wrong .dot, tr.error .dot { background:var(--bad); }
tr.correct td.pred { color:var(--ok); } tr.slice td.pred { color:var(--warn); }
tr.wrong td.pred { color:var(--bad); }
.muted { color:var(--muted); font-style:italic; }
#detail { flex:1; overflow:auto; padding:16px 22px; min-width:0; }
h2 { font-size:16px; margin:4px 0 12px; } h3 { font-size:14px; margin:20px 0 8px; }
.cards { display:flex; gap:10px; flex-wrap:wrap; }
.card { background:#fff; border:1px solid var(--line); border-radius:8px; padding:10px 14px;
  min-width:130px; }
.card-v { font-size:22px; font-weight:650; } .card-t { color:var(--muted); font-size:12px; }
.ci { color:var(--muted); font-size:11px; margin-left:4px; }
.note { color:var(--muted); font-size:12.5px; }
table.metrics { background:#fff; border:1px solid var(--line); font-size:12px; }
table.metrics th, table.metrics td { padding:4px 6px; border-bottom:1px solid #eef0f4; }
table.metrics .ci { display:block; margin:0; font-size:10.5px; }
.table-x { overflow-x:auto; }
table.metrics th { background:#fafbfc; color:var(--muted); font-weight:600; text-align:right; }
table.metrics th:first-child, td.k { text-align:left; }
img.confusion { max-width:100%; background:#fff; border:1px solid var(--line); }
.ep-head { display:flex; align-items:center; gap:10px; margin-bottom:12px; flex-wrap:wrap; }
.ep-head h2 { margin:0; font-family: ui-monospace, "DejaVu Sans Mono", monospace; }
button { font:inherit; font-size:12.5px; padding:3px 10px; border:1px solid var(--line);
  background:#fff; border-radius:5px; cursor:pointer; }
.badge { font-size:12px; padding:2px 8px; border-radius:10px; color:#fff; }
.badge.correct { background:var(--ok); } .badge.slice { background:var(--warn); }
.badge.wrong, .badge.error { background:var(--bad); } .badge.none { background:var(--muted); }
.cols { display:flex; gap:18px; align-items:flex-start; }
.transcript { flex:1; min-width:0; }
.side { width:290px; flex-shrink:0; position:sticky; top:0; }
.panel { background:#fff; border:1px solid var(--line); border-radius:8px; padding:10px 12px;
  margin-bottom:12px; }
.panel h4 { margin:0 0 6px; font-size:11.5px; text-transform:uppercase; letter-spacing:.06em;
  color:var(--muted); }
.kv { display:grid; grid-template-columns:max-content 1fr; gap:3px 10px; font-size:12.5px; }
.kv .k { color:var(--muted); } .kv .v { overflow-wrap:anywhere; min-width:0; }
.ok { color:var(--ok); } .bad { color:var(--bad); }
.msg { background:#fff; border:1px solid var(--line); border-left:4px solid var(--line);
  border-radius:6px; margin-bottom:10px; padding:8px 12px; }
.msg.user { border-left-color:#7c8aa5; } .msg.assistant { border-left-color:var(--accent); }
.msg.tool { border-left-color:#9aa3b5; background:#fbfbfc; }
.msg.error { border-left-color:var(--bad); }
.role { font-size:11.5px; color:var(--muted); text-transform:uppercase; letter-spacing:.05em;
  margin-bottom:4px; }
.text { white-space:pre-wrap; word-break:break-word; }
pre { background:var(--code); padding:8px 10px; border-radius:5px; margin:6px 0 0;
  white-space:pre-wrap; word-break:break-word; font: 12px/1.4 ui-monospace, "DejaVu Sans Mono",
  monospace; max-height:340px; overflow:auto; }
.call { margin-top:6px; } .call-name { font-weight:600; color:var(--accent); font-size:12.5px; }
.headline { font-weight:600; margin-bottom:4px; }
.errbox { color:var(--bad); font-weight:600; margin-top:4px; white-space:pre-wrap; }
details summary { cursor:pointer; color:var(--muted); font-size:12.5px; }
.hidden { display:none !important; }
</style>
</head>
<body>
<header><h1>__TITLE__</h1><span class="meta">__META__</span></header>
<main>
<nav id="list">
  <div class="filters">
    <select id="f-cause" aria-label="true cause"><option value="">all causes</option>__CAUSE_OPTIONS__</select>
    <select id="f-outcome" aria-label="outcome"><option value="">all outcomes</option>__OUTCOME_OPTIONS__</select>
    <input id="f-text" type="search" placeholder="episode id" aria-label="episode id">
    <button id="show-summary" type="button">summary</button>
    <span id="shown">__N__ episodes</span>
  </div>
  <div class="table-wrap">
    <table id="episodes"><colgroup><col class="c-id"><col><col><col class="c-score"></colgroup>
      <thead><tr><th>episode</th><th>truth</th><th>answer</th><th class="num">score</th></tr>
      </thead><tbody>__ROWS__</tbody></table>
  </div>
</nav>
<section id="detail">
__SUMMARY__
<section id="episode-view" class="hidden"></section>
</section>
</main>
<script type="application/json" id="report-data">__DATA__</script>
<script>
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("report-data").textContent);
  var byId = {};
  data.episodes.forEach(function (ep) { byId[ep.id] = ep; });
  var rows = Array.prototype.slice.call(document.querySelectorAll("#episodes tr.ep"));
  var view = document.getElementById("episode-view");
  var summary = document.getElementById("summary-view");
  var current = null;

  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }
  function kv(parent, key, value, cls) {
    parent.appendChild(el("div", "k", key));
    var v = el("div", "v" + (cls ? " " + cls : ""), value === null || value === undefined ||
      value === "" ? "–" : value);
    parent.appendChild(v);
    return v;
  }
  function fmt(x, digits) {
    return (typeof x === "number" && isFinite(x)) ? x.toFixed(digits) : "–";
  }
  function prettyArgs(raw) {
    try {
      var obj = JSON.parse(raw);
      if (obj && typeof obj === "object" && !Array.isArray(obj)) {
        var keys = Object.keys(obj);
        if (keys.length === 1 && typeof obj[keys[0]] === "string") return obj[keys[0]];
        return JSON.stringify(obj, null, 2);
      }
    } catch (e) { /* shown as sent */ }
    return raw;
  }
  var OUTCOME = {correct: "correct", slice: "right cause, wrong slice", wrong: "wrong cause",
    none: "no answer", error: "error"};

  function renderMessage(m, turn) {
    var box = el("div", "msg " + m.role + (m.error ? " error" : ""));
    var role = m.role === "assistant" ? "assistant · turn " + turn :
      m.role === "tool" ? "tool · " + (m.name || "?") + (m.tool_call_id ? " · " +
      m.tool_call_id : "") : m.role;
    box.appendChild(el("div", "role", role));
    if (m.reasoning) {
      var d = el("details");
      d.appendChild(el("summary", null, "reasoning (" + m.reasoning.length + " characters)"));
      d.appendChild(el("div", "text", m.reasoning));
      box.appendChild(d);
    }
    if (m.role === "user") {
      var text = String(m.content || "");
      var lines = text.split("\n");
      var headline = lines.filter(function (l) { return /^ALERT/.test(l); })[0] || lines[0];
      box.appendChild(el("div", "text headline", headline));
      var p = el("details");
      p.appendChild(el("summary", null, "full prompt (" + text.length + " characters)"));
      p.appendChild(el("div", "text", text));
      box.appendChild(p);
    } else if (m.role === "tool") {
      box.appendChild(el("pre", null, m.content));
    } else if (m.content) {
      box.appendChild(el("div", "text", m.content));
    }
    (m.tool_calls || []).forEach(function (c) {
      var call = el("div", "call");
      call.appendChild(el("span", "call-name", "→ " + (c.name || "(no name)")));
      call.appendChild(el("span", "ci", c.id || ""));
      call.appendChild(el("pre", null, prettyArgs(c.arguments || "")));
      box.appendChild(call);
    });
    if (m.error) box.appendChild(el("div", "errbox", "error: " + m.error));
    if (m.role === "assistant" && !m.content && !(m.tool_calls || []).length && !m.error) {
      box.appendChild(el("div", "muted", "(empty message)"));
    }
    return box;
  }

  function renderSide(ep) {
    var side = el("div", "side");
    var lab = ep.label;
    var truth = el("div", "panel");
    truth.appendChild(el("h4", null, "label (oracle)"));
    var t = el("div", "kv");
    kv(t, "cause", lab.cause);
    kv(t, "group", lab.group);
    kv(t, "slice", lab.slice || "(no slice)");
    (lab.also || []).forEach(function (a) {
      kv(t, "also", a.cause + " · " + (a.slice || "(no slice)"));
    });
    kv(t, "onset", (lab.onset_time || "") + " (day " + lab.onset + ")");
    kv(t, "profile", lab.profile + ", strength " + fmt(lab.strength, 2));
    truth.appendChild(t);
    side.appendChild(truth);

    var ans = el("div", "panel");
    ans.appendChild(el("h4", null, "answer"));
    var a = el("div", "kv");
    if (ep.answer && ep.answer.causes) {
      ep.answer.causes.forEach(function (c, i) {
        kv(a, "cause " + (i + 1), c.root_cause + " · " + (c.slice || "(no slice)"));
      });
    } else if (ep.answer) {
      kv(a, "cause", (ep.cause_ok ? "✓ " : "✗ ") + ep.answer.root_cause,
        ep.cause_ok ? "ok" : "bad");
      var sliceText = ep.answer.slice || "(no slice)";
      if (ep.takes_slice) {
        kv(a, "slice", (ep.slice_ok ? "✓ " : "✗ ") + sliceText, ep.slice_ok ? "ok" : "bad");
      } else {
        kv(a, "slice", sliceText + " (not scored)");
      }
    } else {
      kv(a, "answer", "none", "bad");
    }
    kv(a, "outcome", OUTCOME[ep.outcome] || ep.outcome);
    kv(a, "ended by", ep.reason);
    if (ep.parse_error) kv(a, "parse", ep.parse_error, "bad");
    if (ep.error) kv(a, "error", ep.error, "bad");
    ans.appendChild(a);
    side.appendChild(ans);

    var rew = el("div", "panel");
    rew.appendChild(el("h4", null, "reward"));
    var r = el("div", "kv");
    kv(r, "score", fmt(ep.score, 4));
    Object.keys(ep.reward || {}).forEach(function (k) {
      if (k === "score" || k === "tool_calls" || k === "turns") return;
      kv(r, k, fmt(ep.reward[k], 3));
    });
    kv(r, "tool calls", ep.tool_calls);
    kv(r, "turns", ep.turns);
    kv(r, "seconds", fmt(ep.seconds, 1));
    rew.appendChild(r);
    side.appendChild(rew);

    var kpis = Object.keys(lab.effect_in_slice || {});
    if (kpis.length) {
      var eff = el("div", "panel");
      eff.appendChild(el("h4", null, "effect in the slice after onset"));
      var e = el("div", "kv");
      kpis.forEach(function (k) {
        var x = lab.effect_in_slice[k];
        var rel = x.counterfactual ? (x.factual - x.counterfactual) / x.counterfactual : null;
        kv(e, k, fmt(x.factual, 0) + " vs " + fmt(x.counterfactual, 0) +
          (rel === null ? "" : " (" + (rel >= 0 ? "+" : "") + fmt(100 * rel, 1) + "%)"));
      });
      eff.appendChild(e);
      side.appendChild(eff);
    }
    return side;
  }

  function show(id, scroll) {
    var ep = byId[id];
    if (!ep) { showSummary(); return; }
    current = id;
    rows.forEach(function (row) {
      row.classList.toggle("selected", row.getAttribute("data-ep") === id);
      if (scroll && row.getAttribute("data-ep") === id) row.scrollIntoView({block: "nearest"});
    });
    summary.classList.add("hidden");
    view.classList.remove("hidden");
    view.textContent = "";
    var head = el("div", "ep-head");
    head.appendChild(el("h2", null, ep.id));
    head.appendChild(el("span", "badge " + ep.outcome, OUTCOME[ep.outcome] || ep.outcome));
    var prev = el("button", null, "← previous"), next = el("button", null, "next →");
    prev.type = next.type = "button";
    prev.onclick = function () { step(-1); };
    next.onclick = function () { step(1); };
    head.appendChild(prev);
    head.appendChild(next);
    view.appendChild(head);
    var cols = el("div", "cols");
    var tr = el("div", "transcript");
    var turn = 0;
    if (!ep.messages.length) tr.appendChild(el("p", "muted", "no transcript file"));
    ep.messages.forEach(function (m) {
      if (m.role === "assistant") turn += 1;
      tr.appendChild(renderMessage(m, turn));
    });
    cols.appendChild(tr);
    cols.appendChild(renderSide(ep));
    view.appendChild(cols);
    document.getElementById("detail").scrollTop = 0;
    if (location.hash !== "#ep=" + encodeURIComponent(id)) {
      history.replaceState(null, "", "#ep=" + encodeURIComponent(id));
    }
  }
  function showSummary() {
    current = null;
    rows.forEach(function (row) { row.classList.remove("selected"); });
    view.classList.add("hidden");
    summary.classList.remove("hidden");
    if (location.hash) history.replaceState(null, "", location.pathname + location.search);
  }
  function visibleRows() {
    return rows.filter(function (row) { return !row.classList.contains("hidden"); });
  }
  function step(delta) {
    var vis = visibleRows();
    if (!vis.length) return;
    var ids = vis.map(function (row) { return row.getAttribute("data-ep"); });
    var i = ids.indexOf(current);
    var j = i < 0 ? 0 : Math.min(ids.length - 1, Math.max(0, i + delta));
    show(ids[j], true);
  }
  function applyFilters() {
    var cause = document.getElementById("f-cause").value;
    var outcome = document.getElementById("f-outcome").value;
    var text = document.getElementById("f-text").value.trim().toLowerCase();
    var n = 0;
    rows.forEach(function (row) {
      var causes = (row.getAttribute("data-cause") || "").split(" ");
      var keep = (!cause || causes.indexOf(cause) >= 0) &&
        (!outcome || row.getAttribute("data-outcome") === outcome) &&
        (!text || row.getAttribute("data-ep").toLowerCase().indexOf(text) >= 0);
      row.classList.toggle("hidden", !keep);
      if (keep) n += 1;
    });
    document.getElementById("shown").textContent = n + " of " + rows.length + " episodes";
  }
  rows.forEach(function (row) {
    row.addEventListener("click", function () { show(row.getAttribute("data-ep"), false); });
    row.addEventListener("keydown", function (ev) {
      if (ev.key === "Enter") show(row.getAttribute("data-ep"), false);
    });
  });
  ["f-cause", "f-outcome", "f-text"].forEach(function (id) {
    document.getElementById(id).addEventListener("input", applyFilters);
  });
  document.getElementById("show-summary").addEventListener("click", showSummary);
  document.addEventListener("keydown", function (ev) {
    if (ev.target && (ev.target.tagName === "INPUT" || ev.target.tagName === "SELECT")) return;
    if (ev.key === "j" || ev.key === "ArrowDown") { step(1); ev.preventDefault(); }
    if (ev.key === "k" || ev.key === "ArrowUp") { step(-1); ev.preventDefault(); }
    if (ev.key === "Escape") showSummary();
  });
  function fromHash() {
    var m = /^#ep=(.+)$/.exec(location.hash);
    if (m) show(decodeURIComponent(m[1]), true);
  }
  window.addEventListener("hashchange", fromHash);
  applyFilters();
  fromHash();
  document.body.setAttribute("data-ready", "1");
})();
</script>
</body>
</html>
"""
