"""Evaluation: run an agent over a dataset split and report how it did.

- :func:`evaluate` (asyncio): concurrent, resumable runs; one result line and one transcript per
  episode; then ``summary.md``, ``metrics.json``, ``confusion.png`` and ``report.html``.
- :func:`rebuild_reports`: re-write the reports of an existing run directory.
- :mod:`causaltrace.eval.report`: the self-contained HTML report.

The command line is ``causaltrace-eval`` (:mod:`causaltrace.apps.evaluate`); SFT data is
exported from a run with ``causaltrace-export sft`` (:mod:`causaltrace.apps.export`).
"""

from causaltrace.eval.harness import (
    EvalSummary,
    episode_rng,
    evaluate,
    outcome_of,
    read_results,
    rebuild_reports,
    write_reports,
)

__all__ = [
    "EvalSummary",
    "episode_rng",
    "evaluate",
    "outcome_of",
    "read_results",
    "rebuild_reports",
    "write_reports",
]
