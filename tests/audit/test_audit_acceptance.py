"""The acceptance audit remakes every attempt's draw from the seeds: the accepted one is the
label's, the number of draws is the stats' number of attempts, and the per-cause summary counts
them all."""

import json

import pytest

from causaltrace.audit.acceptance import acceptance_shift, attempt_draws, shift_table
from causaltrace.datasets.generation import Job, run


@pytest.fixture(scope="module")
def split(tmp_path_factory):
    out = tmp_path_factory.mktemp("acceptance") / "split"
    job = Job.from_config(
        {
            "out_dir": str(out),
            "domain": {"name": "ads", "preset": "small"},
            "dataset": {
                "name": "acc",
                "split": "acc",
                "seed": 5,
                "n_episodes": 8,
                "composition": {"kind": "quotas", "total": 8, "sliced": 5, "two_d": 2},
                "shard_size": 4,
                "max_attempts": 400,
                "materialize": False,
            },
        }
    )
    run(job, show_progress=False)
    return out


def _jsonl(path):
    return [
        json.loads(line)
        for f in sorted(path.glob("*.jsonl"))
        for line in f.read_text().splitlines()
    ]


@pytest.mark.slow
def test_remade_draws_are_the_attempts_and_the_accepted_one_is_the_label(split):
    draws = list(attempt_draws(split))
    stats = [
        row
        for f in sorted((split / "private" / "stats").glob("*.json"))
        for row in json.loads(f.read_text())
    ]
    assert len(draws) == sum(row["attempts"] for row in stats)
    labels = {row["episode_id"]: row for row in _jsonl(split / "private" / "labels")}
    accepted = [d for d in draws if d.accepted]
    assert sorted(d.episode_id for d in accepted) == sorted(labels)
    for item in accepted:
        label = labels[item.episode_id]
        assert item.draw.point == label["cause"]
        assert (item.draw.slice.canonical() or None) == label["slice"]
        assert item.draw.strength == label["strength"]
        assert item.draw.window.onset == label["onset"]


def test_the_summary_counts_every_attempt(split):
    shifts = acceptance_shift(split)
    draws = list(attempt_draws(split))
    assert sum(s.attempted for s in shifts) == len(draws)
    assert sum(s.accepted for s in shifts) == 8
    for s in shifts:
        assert 0 < s.accepted <= s.attempted
        assert 0.0 < s.cells_accepted_mean <= 1.0
    table = shift_table(shifts)
    assert table.count("\n") == len(shifts) + 1
