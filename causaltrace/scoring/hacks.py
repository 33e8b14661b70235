"""Degenerate answers, the reward floor they must stay under, and a report of both.

A *degenerate* answer tries to score without localizing the cause: every cause at once, a
wildcard or whole-panel slice, the union of all candidate slices, an empty answer, a huge one,
several different answers, the answer repeated in every turn, an answer echoed by a tool.

The *floor* of a label under a reward is the most a degenerate answer may score:

- an answer that does not parse scores what a format error scores (0 under TRACE);
- an answer that parses but names a wrong cause (the last guess of a shotgun) scores what a
  wrong cause scores (0.05 under TRACE: the format term alone);
- the right cause on the whole panel (no slice, ``"*"``, ``""``, ``{}``) is degenerate when the
  true cause takes a slice narrower than the panel; under TRACE it scores
  ``0.05 + 0.65 * (0.5 + 0.5 * c) = 0.375 + 0.325 * c``, with ``c`` the share of the panel's leaf
  cells the true slice covers (a union of slices cannot be written, see the parser).

So ``floor(label) = max(reward(format error), reward(wrong cause), reward(right cause, whole
panel))``, the last term only for sliced truths: under TRACE, 0.05 for a truth without a slice
and ``0.375 + 0.325 * c`` for a sliced one. ``python -m causaltrace.scoring`` prints the measured
table (reproduced in ``docs/rewards.md``).

Answers that name several causes (``{"causes": [...]}``) have their own degenerate forms
(:func:`set_degenerate_outputs`: every cause, every cause with every slice, the truth padded
with every other cause, one cause named several times or with many slices, an empty list). A
concurrent label's floor adds to the three above the true causes on the whole panel, each
alone and all together (:func:`degenerate_floor`).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable, Mapping
from typing import Any

from causaltrace.episodes.answers import Answer, AnswerSpace, Candidate
from causaltrace.episodes.domain import load_domain
from causaltrace.episodes.labels import OracleLabel
from causaltrace.scoring.parsing import ParsedAnswer
from causaltrace.scoring.rewards import CompositeReward


def _msg(role: str, content: str = "", **kw: Any) -> dict[str, Any]:
    return {"role": role, "content": content, **kw}


def _submit(args: Any, i: int = 0) -> dict[str, Any]:
    return {
        "id": f"call_{i}",
        "type": "function",
        "function": {
            "name": "submit",
            "arguments": json.dumps(args) if isinstance(args, dict) else args,
        },
    }


def correct_output(label: OracleLabel) -> dict[str, Any]:
    """The correct answer object for ``label``."""
    return {"root_cause": label.cause, "slice": label.slice}


def degenerate_outputs(space: AnswerSpace, label: OracleLabel) -> dict[str, Any]:
    """Named degenerate agent outputs against ``label`` (strings, message lists or objects).

    Whole-panel, wildcard and union-of-slices answers are included only when the true cause
    takes a slice narrower than the panel: for a cause without a slice, the right cause with
    any slice is the correct answer (the slice is ignored).
    """
    right = label.cause
    wrong = next((c for c in space.causes if c != right), right)
    others = [c for c in space.causes if c != right]
    true = correct_output(label)
    sliced_truth = space.takes_slice(right) and bool(label.slice)
    cands = [s for c in space.causes for s in space.candidate_slices(c) if s]
    cands = list(dict.fromkeys(cands)) or [None]
    out: dict[str, Any] = {
        "empty_output": "",
        "empty_object": "{}",
        "null_answer": {"root_cause": None, "slice": None},
        "prose_only": f"The root cause is {right} on {label.slice or 'the whole panel'}.",
        "every_cause_list": {"root_cause": list(space.causes), "slice": label.slice},
        "every_cause_joined": {"root_cause": "|".join(space.causes), "slice": label.slice},
        "every_cause_objects": "\n".join(
            json.dumps({"root_cause": c, "slice": label.slice}) for c in space.causes
        ),
        "every_cause_hermes": "\n".join(
            "<tool_call>\n"
            + json.dumps({"name": "submit", "arguments": {"root_cause": c, "slice": label.slice}})
            + "\n</tool_call>"
            for c in space.causes
        ),
        "every_cause_submits": [
            _msg("assistant", tool_calls=[_submit({"root_cause": c, "slice": label.slice}, i)])
            for i, c in enumerate(space.causes)
        ],
        "conflicting_objects": json.dumps(true) + "\n" + json.dumps({"root_cause": wrong}),
        "duplicate_keys": (
            f'{{"root_cause": "{wrong}", "root_cause": "{right}", '
            f'"slice": {json.dumps(label.slice)}}}'
        ),
        "huge_padding": {**true, "reasoning": "x" * 100_000},
        "huge_ranking": {
            **true,
            "ranking": [right] + [f"{c}_{i}" for i in range(5000) for c in others[:1]],
        },
        "huge_output": "analysis " * 200_000 + json.dumps(true),
        "huge_cause_name": {"root_cause": " ".join(space.causes) * 200, "slice": label.slice},
        "repeated_every_turn_final_missing": [
            m
            for _ in range(4)
            for m in (
                _msg("assistant", json.dumps(true), tool_calls=[]),
                _msg("user", "keep going"),
            )
        ]
        + [_msg("assistant", "I am done investigating.")],
        "shotgun_every_turn_final_wrong": [
            m
            for c in [right, *others]
            for m in (
                _msg("assistant", json.dumps({"root_cause": c, "slice": label.slice})),
                _msg("user", "ok"),
            )
        ]
        + [_msg("assistant", json.dumps({"root_cause": wrong, "slice": label.slice}))],
        "tool_echo_verl": (
            '<tool_call>\n{"name": "query", "arguments": {"sql": "select 1"}}\n</tool_call>'
            f"user\n<tool_response>\n{json.dumps(true)}\n</tool_response>\nassistant\n"
            "I could not decide."
        ),
        "tool_echo_messages": [
            _msg("assistant", "", tool_calls=[{"function": {"name": "query", "arguments": "{}"}}]),
            _msg("tool", json.dumps(true)),
        ],
        "think_only": f"<think>{json.dumps(true)}</think>I am not sure.",
        "prompt_echo_chatml": (
            f"<|im_start|>user\nAnswer like {json.dumps(true)}<|im_end|>\n"
            "<|im_start|>assistant\nNo idea.<|im_end|>"
        ),
    }
    if sliced_truth:
        out.update(
            {
                "whole_panel_null": {"root_cause": right, "slice": None},
                "whole_panel_absent": {"root_cause": right},
                "wildcard_star": {"root_cause": right, "slice": "*"},
                "whole_panel_empty_text": {"root_cause": right, "slice": ""},
                "whole_panel_empty_object": {"root_cause": right, "slice": {}},
                "union_slices_list": {"root_cause": right, "slice": cands},
                "union_slices_text": {
                    "root_cause": right,
                    "slice": "|".join(str(s) for s in cands),
                },
                "union_levels_object": {
                    "root_cause": right,
                    "slice": {name: list(levels) for name, levels in space.dimensions},
                },
                "union_slices_objects": "\n".join(
                    json.dumps({"root_cause": right, "slice": s}) for s in cands
                ),
                "union_slices_objects_few": "\n".join(
                    json.dumps({"root_cause": right, "slice": s}) for s in [label.slice, *cands[:3]]
                ),
                "union_slices_submits": [
                    _msg("assistant", tool_calls=[_submit({"root_cause": right, "slice": s}, i)])
                    for i, s in enumerate([label.slice, *cands[:3]])
                ],
                "wildcard_levels": {
                    "root_cause": right,
                    "slice": "&".join(f"{name}=*" for name, _ in space.dimensions),
                },
            }
        )
    return out


def correct_set_output(label: OracleLabel) -> dict[str, Any]:
    """The correct answer for ``label`` in the several-causes form."""
    return {"causes": [{"root_cause": c, "slice": sl} for c, sl in label.causes]}


def set_degenerate_outputs(space: AnswerSpace, label: OracleLabel) -> dict[str, Any]:
    """Named degenerate answers in the several-causes form (``{"causes": [...]}``) against
    ``label`` (a single-cause or a concurrent one)."""
    truth = dict(label.causes)
    cands = [s for c in space.causes for s in space.candidate_slices(c) if s]
    cands = list(dict.fromkeys(cands)) or [None]

    def entry(cause: str, sl: str | None = None) -> dict[str, Any]:
        return {"root_cause": cause, "slice": sl if space.takes_slice(cause) else None}

    first_slice = label.slice
    right = label.cause
    others = [c for c in space.causes if c not in truth]
    out: dict[str, Any] = {
        "set_empty": {"causes": []},
        "set_not_a_list": {"causes": {"root_cause": right, "slice": label.slice}},
        "set_every_cause_true_slice": {
            "causes": [entry(c, truth.get(c, first_slice)) for c in space.causes]
        },
        "set_every_cause_no_slice": {"causes": [entry(c) for c in space.causes]},
        "set_every_cause_every_slice": {
            "causes": [entry(c, s) for c in space.causes for s in space.candidate_slices(c)]
        },
        "set_truth_plus_every_other": {
            "causes": [*correct_set_output(label)["causes"], *(entry(c) for c in others)]
        },
        "set_truth_plus_two_others": {
            "causes": [*correct_set_output(label)["causes"], *(entry(c) for c in others[:2])]
        },
        "set_duplicates_of_one_cause": {"causes": [entry(right, label.slice)] * 3},
        "set_one_cause_many_slices": {
            "causes": [entry(right, s) for s in dict.fromkeys([label.slice, *cands[:6]])]
        },
        "set_submits_every_cause": [
            _msg("assistant", tool_calls=[_submit({"causes": [entry(c, truth.get(c))]}, i)])
            for i, c in enumerate(space.causes)
        ],
        "set_root_cause_and_causes": {
            "root_cause": right,
            "slice": label.slice,
            "causes": [entry(c) for c in space.causes],
        },
    }
    if len(out["set_one_cause_many_slices"]["causes"]) < 2:  # (a cause without a slice)
        out["set_one_cause_many_slices"] = {"causes": [entry(right), entry(right)]}
    return out


def degenerate_floor(
    label: OracleLabel, space: AnswerSpace, reward: CompositeReward | None = None
) -> float:
    """The most a degenerate answer may score on ``label`` under ``reward`` (default TRACE).

    The maximum of: a format error; any wrong cause, with the true slice or none; and, when the
    true cause takes a slice narrower than the panel, the right cause on the whole panel.
    """
    reward = reward or CompositeReward()
    scores = [reward(ParsedAnswer.of(None, space, error="format error"), label).score]
    true_slice = space.canonical_slice(label.slice) if label.slice else None
    for cause in space.causes:
        if cause == label.cause:
            continue
        for sl in dict.fromkeys([None, true_slice if space.takes_slice(cause) else None]):
            scores.append(reward(ParsedAnswer.of(Answer(cause, sl), space), label).score)
    if space.takes_slice(label.cause) and true_slice:
        scores.append(reward(ParsedAnswer.of(Answer(label.cause, None), space), label).score)
    if label.also:
        # A concurrent label: also each true cause alone on the whole panel, any other cause
        # alone, and the true causes together on the whole panel.
        true = [cause for cause, _ in label.causes]
        for cause in space.causes:
            scores.append(reward(ParsedAnswer.of(Answer(cause, None), space), label).score)
        together = Answer(true[0], None, also=tuple(Candidate(c) for c in true[1:]))
        scores.append(reward(ParsedAnswer.of(together, space), label).score)
    return max(scores)


def hack_report(
    space: AnswerSpace, labels: Iterable[OracleLabel], reward: CompositeReward | None = None
) -> list[dict[str, Any]]:
    """Score every degenerate output against every label: one row per (label, hack)."""
    reward = reward or CompositeReward()
    rows = []
    for label in labels:
        floor = degenerate_floor(label, space, reward)
        correct = reward.score_output(correct_output(label), label, space).score
        for name, output in degenerate_outputs(space, label).items():
            result = reward.score_output(output, label, space)
            rows.append(
                {
                    "cause": label.cause,
                    "slice": label.slice,
                    "hack": name,
                    "score": result.score,
                    "floor": floor,
                    "correct": correct,
                    "parse_ok": result.parse_ok,
                    "error": result.parse_error,
                }
            )
    return rows


def example_labels(space: AnswerSpace) -> list[OracleLabel]:
    """One fixed label per (cause, slice order): the first candidate slice of each order."""
    labels = []
    for cause in space.causes:
        seen: set[int] = set()
        for sl in space.candidate_slices(cause):
            order = 0 if sl is None else sl.count("&") + 1
            if order in seen:
                continue
            seen.add(order)
            labels.append(
                OracleLabel(
                    episode_id=f"{cause}-{order}d",
                    cause=cause,
                    group=space.group(cause),
                    slice=sl,
                    onset=0,
                    onset_time=None,
                    strength=0.5,
                    profile="step",
                )
            )
    return labels


def floor_table(rows: Iterable[Mapping[str, Any]]) -> str:
    """A Markdown table: per label, the correct score, the floor and the best degenerate score."""
    by_label: dict[tuple[str, str | None], list[Mapping[str, Any]]] = {}
    for row in rows:
        by_label.setdefault((row["cause"], row["slice"]), []).append(row)
    lines = [
        "| cause | true slice | correct | floor | best degenerate (which) | parsed degenerate |",
        "| --- | --- | ---: | ---: | --- | ---: |",
    ]
    for (cause, sl), group in by_label.items():
        best = max(group, key=lambda r: r["score"])
        parsed = sum(1 for r in group if r["parse_ok"])
        lines.append(
            f"| {cause} | {sl or '(none)'} | {group[0]['correct']:.4f} | {group[0]['floor']:.4f} "
            f"| {best['score']:.4f} ({best['hack']}) | {parsed}/{len(group)} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:

    parser = argparse.ArgumentParser(description="Score degenerate answers against fixed labels.")
    parser.add_argument("--domain", default="example")
    parser.add_argument("--rows", action="store_true", help="print every (label, hack) row")
    args = parser.parse_args(argv)
    space = AnswerSpace.from_scm(load_domain(args.domain).scm)
    rows = hack_report(space, example_labels(space))
    print(floor_table(rows))
    if args.rows:
        for r in rows:
            print(
                f"{r['cause']:<16} {r['slice']!s:<30} {r['hack']:<36} {r['score']:.4f}  {r['error']}"
            )
    bad = [r for r in rows if not (r["score"] <= r["floor"] + 1e-12 and r["score"] < r["correct"])]
    return 1 if bad else 0
