"""Trainer adapters (verl, TRL, Hugging Face ``datasets``). None imports a trainer library:
the modules build plain rows and functions; ``datasets`` and ``pyarrow`` are imported only by
the functions that write files or build a ``datasets.Dataset``."""

from causaltrace.scoring.adapters.common import (
    EpisodeRecord,
    GroundTruth,
    as_record,
    as_records,
    ground_truth_json,
    load_ground_truth,
)

__all__ = [
    "EpisodeRecord",
    "GroundTruth",
    "as_record",
    "as_records",
    "ground_truth_json",
    "load_ground_truth",
]
