"""Scoring: the answer schema, a strict parser, pluggable rewards and metrics.

- :mod:`~causaltrace.episodes.answers`: :class:`Answer` and :class:`AnswerSpace` (what is a valid
  answer in a domain; JSON-serializable so reward workers rebuild it without the SCM).
- :mod:`~causaltrace.scoring.parsing`: :func:`parse_answer` finds the agent's final answer in
  messages, decoded transcripts or objects; strict about content, never raises.
- :mod:`~causaltrace.scoring.rewards`: the reward registry (:func:`register_reward`) and
  :class:`CompositeReward` (default TRACE: 0.65 graded + 0.30 full + 0.05 format).
- :mod:`~causaltrace.scoring.metrics`: FullAttr@1, accuracies, AC@k with bootstrap intervals,
  confusion matrices.
- :mod:`~causaltrace.scoring.hacks`: degenerate answers and the reward floor they stay under.

The trainers' side (ground truth and reward functions for TRL and verl, RL rows for Hugging
Face ``datasets``) is :mod:`causaltrace.training`.

Importing this package imports numpy only; pandas, pyarrow, matplotlib and ``datasets`` are
imported by the functions that need them.
"""

from causaltrace.episodes.answers import (
    NO_SIGNAL_GROUP,
    Answer,
    AnswerFormatError,
    AnswerSpace,
    Candidate,
    Impact,
)
from causaltrace.scoring.hacks import degenerate_floor, degenerate_outputs, hack_report
from causaltrace.scoring.metrics import (
    EpisodeOutcome,
    MetricsReport,
    MetricValue,
    ac_at_k,
    avg_at_k,
    bootstrap_ci,
    compute_metrics,
    confusion_matrix,
    plot_confusion,
    score_episodes,
)
from causaltrace.scoring.parsing import ParsedAnswer, ParsePolicy, parse_answer, split_segments
from causaltrace.scoring.rewards import (
    TRACE_WEIGHTS,
    CompositeReward,
    RewardResult,
    available_rewards,
    get_reward,
    register_reward,
    score_output,
    unregister_reward,
)

__all__ = [
    "NO_SIGNAL_GROUP",
    "TRACE_WEIGHTS",
    "Answer",
    "AnswerFormatError",
    "AnswerSpace",
    "Candidate",
    "CompositeReward",
    "EpisodeOutcome",
    "Impact",
    "MetricValue",
    "MetricsReport",
    "ParsePolicy",
    "ParsedAnswer",
    "RewardResult",
    "ac_at_k",
    "available_rewards",
    "avg_at_k",
    "bootstrap_ci",
    "compute_metrics",
    "confusion_matrix",
    "degenerate_floor",
    "degenerate_outputs",
    "get_reward",
    "hack_report",
    "parse_answer",
    "plot_confusion",
    "register_reward",
    "score_episodes",
    "score_output",
    "split_segments",
    "unregister_reward",
]
