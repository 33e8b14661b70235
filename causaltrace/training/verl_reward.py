"""verl adapter: a ``compute_score`` for verl's reward manager and a parquet exporter.

Point verl at the score function with::

    custom_reward_function.path=<site-packages>/causaltrace/training/verl_reward.py
    custom_reward_function.name=compute_score

verl passes the whole decoded response (``solution_str``), tool outputs included, usually decoded
with ``skip_special_tokens=True``. The parser reads only the agent's text: ``<tool_response>``
blocks (and ChatML / Llama 3 / Gemma tool turns, when their markers survive decoding) are tool
segments and never searched; the answer is the ``submit`` call's arguments, else the JSON answer in
the last agent segment after the last tool output (see :mod:`causaltrace.scoring.parsing`).

Nothing here imports verl or torch; :func:`export_verl_parquet` imports pyarrow when called.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from causaltrace.scoring.rewards import CompositeReward
from causaltrace.training.records import (
    RL_RULES,
    EpisodeRules,
    as_records,
    ground_truth_json,
    load_ground_truth,
)

DEFAULT_DATA_SOURCE = "causaltrace"
DEFAULT_ABILITY = "root_cause_analysis"


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: str | Mapping[str, Any],
    extra_info: Mapping[str, Any] | None = None,
    reward: CompositeReward | Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> dict[str, float]:
    """Score one verl response. Returns ``{"score": ..., <term>: ..., "parse_ok", "tool_calls",
    "turns"}`` (floats only, the same keys for every row, as verl's metric logging needs).

    The reward is, in order: ``reward`` (e.g. from ``custom_reward_function.reward_kwargs``), the
    reward config stored in the ground truth, TRACE's default; the environment's rules stored in
    the ground truth (the tool-call budget, retries of a malformed submit) apply to it, so a
    sample that ran out of budget scores as the environment ended it. Tool calls are read in
    every supported format (Hermes and Llama 3 JSON, Qwen3.5 / Qwen3-Coder XML, GLM, Kimi: see
    :mod:`causaltrace.scoring.call_formats`). A bad ``ground_truth`` raises (it is the
    dataset's fault); nothing the agent wrote does.

    Args:
        data_source: The row's data source; not used (verl passes it).
        solution_str: The decoded response, tool turns included.
        ground_truth: The row's ground truth (:func:`ground_truth_json`'s string or its mapping).
        extra_info: The row's ``extra_info``; not used.
        reward: The reward to score with; by default the ground truth's own, else TRACE.
        **kwargs: Anything else verl passes; ignored.

    Raises:
        ValueError: ``ground_truth`` is not a valid ground truth.
    """
    gt = load_ground_truth(ground_truth)
    return gt.scoring_reward(reward).score_output(solution_str, gt.label, gt.space).to_dict()


def verl_rows(
    records: Iterable[Any],
    *,
    data_source: str = DEFAULT_DATA_SOURCE,
    ability: str = DEFAULT_ABILITY,
    split: str = "train",
    tool_names: Sequence[str] = ("sql", "python", "submit"),
    interaction_name: str | None = None,
    reward: CompositeReward | Mapping[str, Any] | None = None,
    rules: EpisodeRules | None = RL_RULES,
) -> list[dict[str, Any]]:
    """Rows in verl's dataset schema, one per record.

    ``prompt`` is the chat messages; ``reward_model`` is ``{"style": "rule", "ground_truth":
    <label + answer space JSON>}``; ``extra_info`` carries the split, the row index, the episode
    id, the answer-free metadata and, for each tool in ``tool_names``, ``create_kwargs`` with the
    episode id (so a tool instance opens the right episode), plus ``interaction_kwargs`` when an
    interaction is named.

    Args:
        records: The split's records (see :func:`~causaltrace.training.records.as_record`).
        data_source: Every row's ``data_source``; ``"causaltrace"`` by default.
        ability: Every row's ``ability``; ``"root_cause_analysis"`` by default.
        split: The split's name, stored in ``extra_info``; ``"train"`` by default.
        tool_names: The tools that get the episode id as ``create_kwargs``; ``sql``,
            ``python`` and ``submit`` by default (none: no tool kwargs).
        interaction_name: The verl interaction to name in ``interaction_kwargs``; none by default.
        reward: A reward config to store in each ground truth; none by default.
        rules: The environment's rules to store in each ground truth (the budget of the tools'
            config, retries of a malformed submit); :class:`EpisodeRules`' defaults by default.
    """
    rows = []
    for index, rec in enumerate(as_records(records)):
        extra: dict[str, Any] = {"split": split, "index": index, "episode_id": rec.episode_id}
        if rec.metadata:
            extra["metadata"] = dict(rec.metadata)
        if tool_names:
            extra["need_tools_kwargs"] = True
            extra["tools_kwargs"] = {
                name: {"create_kwargs": {"episode_id": rec.episode_id}} for name in tool_names
            }
        if interaction_name:
            extra["interaction_kwargs"] = {"name": interaction_name, "episode_id": rec.episode_id}
        rows.append(
            {
                "data_source": data_source,
                "prompt": [dict(m) for m in rec.prompt],
                "ability": ability,
                "reward_model": {
                    "style": "rule",
                    "ground_truth": ground_truth_json(rec.label, rec.space, reward, rules),
                },
                "extra_info": extra,
            }
        )
    return rows


def export_verl_parquet(records: Iterable[Any], path: str | Path, **kwargs: Any) -> str:
    """Write :func:`verl_rows` to a parquet file (imports pyarrow); returns the path.

    Args:
        records: The split's records.
        path: The Parquet file to write (its directory is created).
        **kwargs: Passed to :func:`verl_rows`.

    Raises:
        ValueError: There are no records.
    """
    # lazy: only writing Parquet needs it
    import pyarrow as pa

    # lazy: only writing Parquet needs it
    import pyarrow.parquet as pq

    rows = verl_rows(records, **kwargs)
    if not rows:
        raise ValueError("no records to export")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path)
    return str(path)
