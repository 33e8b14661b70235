"""The curriculum: index and reward schedules, reproducible from the seed and resumable."""

from __future__ import annotations

import math
from collections import Counter

import pytest

from causaltrace.env import Curriculum, CurriculumConfig, Stage
from causaltrace.env.curriculum import CurriculumError

EPISODES = {
    "easy": [f"easy-{i:06d}" for i in range(10)],
    "hard": [f"hard-{i:06d}" for i in range(7)],
    "expert": [f"expert-{i:06d}" for i in range(5)],
}


def index_curriculum(seed=3, replay=0.0):
    stages = (
        Stage("easy", "data/easy", until=30),
        Stage("hard", "data/hard", until=58),
        Stage("expert", "data/expert"),
    )
    return Curriculum(CurriculumConfig(stages, "index", seed, replay=replay), EPISODES)


def reward_curriculum(seed=3, window=4):
    stages = (
        Stage("easy", "data/easy", promote_at=0.7),
        Stage("hard", "data/hard", promote_at=0.5),
        Stage("expert", "data/expert"),
    )
    return Curriculum(CurriculumConfig(stages, "reward", seed, window=window), EPISODES)


def test_index_schedule_moves_at_the_boundaries_and_covers_each_epoch():
    cur = index_curriculum()
    refs = cur.batch(0, 80)
    assert [r.stage for r in refs] == ["easy"] * 30 + ["hard"] * 28 + ["expert"] * 22
    # Within a stage, every episode once before any twice (epochs of a permutation).
    easy = [r.episode_id for r in refs[:30]]
    for epoch in range(3):
        assert sorted(easy[10 * epoch : 10 * epoch + 10]) == EPISODES["easy"]
    assert all(r.dataset == "data/hard" for r in refs[30:58])


def test_same_seed_same_schedule_any_order_other_seed_another():
    a, b = index_curriculum(seed=3), index_curriculum(seed=3)
    forward = [a.sample(i) for i in range(80)]
    backward = [b.sample(i) for i in reversed(range(80))][::-1]
    assert forward == backward  # a pure function of (seed, index): any worker, any order
    assert forward != [index_curriculum(seed=4).sample(i) for i in range(80)]


def test_replay_share_follows_the_config():
    cur = index_curriculum(replay=0.25)
    n = 2000
    later = [cur.sample(i) for i in range(58, 58 + n)]  # the expert stage
    replayed = sum(r.stage != "expert" for r in later)
    # Binomial(2000, 0.25): sd = 19.4; 4 sd bounds a 6e-5 false alarm.
    assert abs(replayed - 0.25 * n) <= 4 * math.sqrt(n * 0.25 * 0.75)
    assert Counter(r.stage for r in later if r.stage != "expert").keys() == {"easy", "hard"}
    assert all(r.stage == "easy" for r in (cur.sample(i) for i in range(30)))  # nothing earlier


def test_reward_schedule_promotes_only_on_a_full_window_at_the_threshold():
    cur = reward_curriculum(window=4)
    cur.batch(0, 4)
    assert not cur.report([1.0, 1.0, 1.0])  # mean 1.0, but the window is not full yet
    assert cur.stage.name == "easy"
    assert cur.report([0.0])  # full window 1, 1, 1, 0: mean 0.75 >= 0.7
    assert cur.stage.name == "hard"


def test_reward_schedule_promotion_and_resume():
    cur = reward_curriculum(window=4)
    cur.batch(0, 8)
    assert not cur.report([0.5, 0.6, 0.6, 0.6])  # mean 0.575 < 0.7
    assert cur.stage.name == "easy"
    assert cur.report([0.9, 0.9, 0.9, 0.9])  # last 4: mean 0.9
    assert cur.stage.name == "hard"
    assert cur.sample(8).stage == "hard" and cur.sample(7).stage == "easy"
    state = cur.state_dict()
    resumed = reward_curriculum(window=4)
    resumed.load_state_dict(state)
    assert [resumed.sample(i) for i in range(20)] == [cur.sample(i) for i in range(20)]
    # The last stage has nowhere to go.
    cur.batch(8, 4)
    assert cur.report([1.0] * 4)
    assert cur.stage.name == "expert"
    cur.batch(12, 4)
    assert not cur.report([1.0] * 4)


@pytest.mark.parametrize(
    "config, message",
    [
        ({"stages": []}, "stages is empty"),
        ({"stages": [{"dataset": "a", "until": 5}, {"dataset": "b"}], "mode": "x"}, "mode"),
        ({"stages": [{"dataset": "a"}, {"dataset": "b"}]}, "needs 'until'"),
        ({"stages": [{"name": "a", "dataset": "a", "until": 5, "bad": 1}]}, "unknown key"),
        ({"stages": [{"dataset": "a"}], "replay": 1.5}, "replay"),
        ({"stages": [{"dataset": "/nonexistent/ds"}]}, "no manifest.json"),
    ],
)
def test_bad_configs_are_named(config, message):
    with pytest.raises(CurriculumError, match=message):
        Curriculum.from_mapping(config)


def test_non_finite_rewards_are_refused():
    with pytest.raises(CurriculumError, match="finite"):
        reward_curriculum().report([float("nan")])
