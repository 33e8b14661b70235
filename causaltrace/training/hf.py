"""Hugging Face ``datasets`` export of a split: prompt, answer-free metadata, label kept apart.

Columns: ``episode_id``, ``prompt`` (chat messages), ``metadata`` (answer-free: the domain and
the record's metadata) and ``ground_truth`` (JSON: the oracle label and the answer space; the
reward functions read it). ``include_label=False`` drops ``ground_truth`` for a split released
without answers. The rows are built without ``datasets``; only :func:`to_hf_dataset` and
:func:`export_hf_dataset` import it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from causaltrace.scoring.rewards import CompositeReward
from causaltrace.training.records import RL_RULES, EpisodeRules, as_records, ground_truth_json

LABEL_COLUMN = "ground_truth"


def hf_columns(
    records: Iterable[Any],
    *,
    split: str | None = None,
    include_label: bool = True,
    reward: CompositeReward | Mapping[str, Any] | None = None,
    rules: EpisodeRules | None = RL_RULES,
) -> dict[str, list[Any]]:
    """The split as columns (a dict of equal-length lists), ready for ``Dataset.from_dict``.

    Args:
        records: The split's records (see :func:`~causaltrace.training.records.as_record` for the
            forms accepted).
        split: The split's name, added to every row's metadata; none by default.
        include_label: Keep the ``ground_truth`` column; on by default (off for a split
            released without answers).
        reward: A reward config to store in each row's ground truth; none by default (the
            reward functions then use TRACE).
        rules: The environment's rules to store in each ground truth;
            :data:`~causaltrace.training.records.RL_RULES` by default.
    """
    cols: dict[str, list[Any]] = {"episode_id": [], "prompt": [], "metadata": []}
    if include_label:
        cols[LABEL_COLUMN] = []
    for rec in as_records(records):
        cols["episode_id"].append(rec.episode_id)
        cols["prompt"].append([dict(m) for m in rec.prompt])
        meta = {"domain": rec.space.name, **({"split": split} if split else {}), **rec.metadata}
        cols["metadata"].append(meta)
        if include_label:
            cols[LABEL_COLUMN].append(ground_truth_json(rec.label, rec.space, reward, rules))
    return cols


def to_hf_dataset(records: Iterable[Any], **kwargs: Any):
    """A ``datasets.Dataset`` of :func:`hf_columns` (imports ``datasets``).

    Args:
        records: The split's records.
        **kwargs: Passed to :func:`hf_columns` (``split``, ``include_label``, ``reward``).

    Raises:
        ImportError: ``datasets`` is not installed.
    """
    try:
        # optional: the train extra
        import datasets
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "to_hf_dataset needs the 'datasets' package (pip install datasets); "
            "hf_columns builds the same columns without it"
        ) from exc
    return datasets.Dataset.from_dict(hf_columns(records, **kwargs))


def export_hf_dataset(records: Iterable[Any], path: str | Path, **kwargs: Any) -> str:
    """Save the split with ``Dataset.save_to_disk`` (imports ``datasets``); returns the path.

    Args:
        records: The split's records.
        path: The directory to save the dataset to.
        **kwargs: Passed to :func:`hf_columns` (``split``, ``include_label``, ``reward``).
    """
    dataset = to_hf_dataset(records, **kwargs)
    dataset.save_to_disk(str(path))
    return str(path)
