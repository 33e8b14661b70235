"""The change-attribution audit (causaltrace.audit.changes): its counts follow the rules, and
its measurement does not depend on how many processes share it."""

from __future__ import annotations

from pathlib import Path

from causaltrace.audit.changes import EpisodeChanges, measure, summary, to_markdown

ROOT = Path(__file__).resolve().parents[2]


def _row(episode: str, signal: bool, top: float, cause_on_top: float, paged: float, rank=1):
    return EpisodeChanges(
        split="s",
        episode_id=episode,
        causes=("X",),
        signal=signal,
        top_change="twin:X#1",
        top_kind="twin:X",
        top_alert="cost@account",
        top_rank=rank,
        top_share=top,
        top_cause_share=cause_on_top,
        paged_share=paged,
        residual=0.001,
        method="pairwise",
    )


def test_summary_counts_each_rule():
    rows = [
        _row("a", True, 0.30, 0.60, 0.70, rank=2),  # named (>= 0.25), not above the cause
        _row("b", True, 0.12, 0.05, 0.40),  # not harmless, beats the cause, paged < 0.5
        _row("c", True, 0.09, 0.90, 0.90),  # within every rule
        _row("d", False, 0.50, 0.0, 0.0),  # a no-signal episode the background paged
        _row("e", True, -0.40, 1.30, 1.30),  # hid part of the move: explains none of it
    ]
    s = summary(rows)
    assert s["episodes"] == 5 and s["signal"] == 4
    assert s["background_named"] == 2 and s["background_named_signal"] == 1
    assert s["background_not_harmless"] == 3
    assert s["background_beats_cause"] == 1
    assert s["paged_below_half"] == 1
    assert s["named_by_rank"] == {1: 1, 2: 1}
    assert "| s | 5 (4) | 2 | 3 | 1 | 1 | twin:X 2 |" in to_markdown({"s": s})


def test_measure_is_the_same_on_one_and_two_workers():
    split = ROOT / "data" / "ads_hard"
    one = measure([split], episodes=2, workers=1)
    two = measure([split], episodes=2, workers=2)
    assert one == two
    assert [r.episode_id for r in one] == sorted(r.episode_id for r in one)
    assert all(r.split == "ads_hard" and r.residual <= 0.05 for r in one)
