"""A curriculum: which episode each training sample gets, moving from easy tiers to hard ones.

Stages are generated datasets (typically one difficulty tier each: ``ads_easy``, ``ads_medium``,
...). Two schedules, both reproducible from the seed:

* ``index``: stage k serves the sample indices below its ``until`` (the last stage serves the
  rest). Sample ``i`` is a pure function of ``(seed, i)``: any worker can compute any sample,
  and a resumed run continues where it stopped.
* ``reward``: the trainer reports its rewards between steps (:meth:`Curriculum.report`); when
  the mean of the last ``window`` rewards reaches the current stage's ``promote_at``, the next
  stage starts at the next sample index. Which sample comes next is a pure function of
  ``(seed, index, the indices at which stages started)``; the latter is the curriculum's
  state (:meth:`Curriculum.state_dict`), so a run that saves it with its checkpoint resumes
  exactly, and the same rewards give the same schedule.

Within a stage, episodes are served in a seeded permutation, one epoch after another (every
episode once before any twice). With ``replay`` > 0, that share of samples (chosen per index
from the seed) comes from an earlier stage, against forgetting.

A trainer between epochs::

    curriculum = Curriculum.from_mapping(cfg)            # domains/ads/conf/curriculum/ads.yaml
    for step in range(steps):
        refs = curriculum.batch(step * batch_size, batch_size)   # EpisodeRef(dataset, episode)
        rewards = run_rollouts(refs)
        curriculum.report(rewards)                       # reward schedule: may promote
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from causaltrace.datasets.reading import DatasetSource
from causaltrace.errors import CausalTraceError

MODES = ("index", "reward")


class CurriculumError(CausalTraceError):
    """A curriculum config is malformed or names a dataset that cannot be opened."""


@dataclass(frozen=True)
class Stage:
    """One step of the curriculum: a generated dataset and when to leave it.

    Args:
        name: The stage's name (unique in the curriculum).
        dataset: The stage's dataset directory.
        until: Index mode: the sample index at which the next stage starts; ``None`` (the
            default) for the last stage.
        promote_at: Reward mode: the mean reward over the window that moves on; ``None`` (the
            default) stays.
    """

    name: str
    dataset: str
    until: int | None = None  # index schedule: samples below this index (None: the rest)
    promote_at: float | None = None  # reward schedule: mean reward that moves on (None: stay)


@dataclass(frozen=True)
class EpisodeRef:
    """Where a training sample's episode lives (open it with ``DatasetSource(dataset)``).

    Args:
        dataset: The dataset directory.
        episode_id: The episode id.
        stage: The name of the stage it was drawn for.
    """

    dataset: str
    episode_id: str
    stage: str


@dataclass(frozen=True)
class CurriculumConfig:
    """The curriculum's stages and schedule.

    Args:
        stages: The stages, easiest first (at least one; unique names).
        mode: ``"index"`` (stages by sample index, ``until``) or ``"reward"`` (promote on
            mean reward, ``promote_at``); ``"index"`` by default.
        seed: The seed of the episode order; 0 by default.
        window: Reward mode: how many recent rewards the mean is over; 64 by default.
        replay: The share of samples drawn from earlier stages, in [0, 1); 0 by default.

    Raises:
        CurriculumError: A bad mode, window or replay, no stages, duplicate names, or (index
            mode) missing or non-increasing ``until``.
    """

    stages: tuple[Stage, ...]
    mode: str = "index"
    seed: int = 0
    window: int = 64
    replay: float = 0.0

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise CurriculumError(f"curriculum.mode must be one of {MODES}, got {self.mode!r}")
        if not self.stages:
            raise CurriculumError("curriculum.stages is empty")
        if not 0.0 <= self.replay < 1.0:
            raise CurriculumError(f"curriculum.replay must be in [0, 1), got {self.replay!r}")
        if self.window < 1:
            raise CurriculumError(f"curriculum.window must be >= 1, got {self.window!r}")
        names = [s.name for s in self.stages]
        if len(set(names)) != len(names):
            raise CurriculumError(f"curriculum.stages: duplicate stage names {names}")
        if self.mode == "index":
            bounds = [s.until for s in self.stages[:-1]]
            if any(b is None for b in bounds):
                raise CurriculumError(
                    "curriculum (index mode): every stage but the last needs 'until'"
                )
            if any(b <= a for a, b in zip([0, *bounds], bounds, strict=False)):
                raise CurriculumError(
                    f"curriculum (index mode): 'until' must increase, got {bounds}"
                )


class Curriculum:
    """The episode schedule of a training run (see the module docstring).

    Args:
        config: The stages and schedule.
        episodes: Stage name -> its episode ids; read from each stage's dataset by default.

    Raises:
        CurriculumError: A stage has no episodes, or its dataset cannot be opened.
    """

    def __init__(
        self, config: CurriculumConfig, episodes: Mapping[str, Sequence[str]] | None = None
    ):
        self.config = config
        if episodes is None:
            episodes = {s.name: _episode_ids(s.dataset) for s in config.stages}
        self._episodes = {s.name: tuple(episodes[s.name]) for s in config.stages}
        for name, ids in self._episodes.items():
            if not ids:
                raise CurriculumError(f"curriculum stage {name!r}: its dataset has no episodes")
        self._starts: list[int] = [0]  # sample index at which each started stage began
        self._rewards: deque[float] = deque(maxlen=config.window)
        self._next_index = 0

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> Curriculum:
        """A curriculum from a config mapping (the keys of :class:`CurriculumConfig`, stages
        as mappings with the keys of :class:`Stage`).

        Args:
            data: The ``curriculum`` section of a config.

        Raises:
            CurriculumError: An unknown key or a malformed stage.
        """
        data = dict(data)
        known = {"stages", "mode", "seed", "window", "replay"}
        unknown = sorted(set(data) - known)
        if unknown:
            raise CurriculumError(f"curriculum: unknown key(s) {unknown}; known: {sorted(known)}")
        stages = []
        for i, raw in enumerate(data.get("stages") or ()):
            raw = dict(raw)
            bad = sorted(set(raw) - {"name", "dataset", "until", "promote_at"})
            if bad or "dataset" not in raw:
                raise CurriculumError(
                    f"curriculum.stages[{i}]: needs 'dataset' (and optionally name, until, "
                    f"promote_at); unknown key(s) {bad}"
                )
            stages.append(
                Stage(
                    str(raw.get("name") or Path(str(raw["dataset"])).name),
                    str(raw["dataset"]),
                    raw.get("until"),
                    raw.get("promote_at"),
                )
            )
        data["stages"] = tuple(stages)
        return cls(CurriculumConfig(**data))

    # -- the schedule -------------------------------------------------------------------------
    @property
    def stage(self) -> Stage:
        """The stage new samples come from (reward mode), or that of the next index."""
        return self._stage_of(self._next_index)

    def _stage_index(self, index: int) -> tuple[int, int]:
        """(stage number, the sample index it began at) for sample ``index``."""
        stages = self.config.stages
        if self.config.mode == "index":
            start = 0
            for k, stage in enumerate(stages):
                if stage.until is None or index < stage.until:
                    return k, start
                start = stage.until
            return len(stages) - 1, start
        k = 0
        while k + 1 < len(self._starts) and self._starts[k + 1] <= index:
            k += 1
        return k, self._starts[k]

    def _stage_of(self, index: int) -> Stage:
        return self.config.stages[self._stage_index(index)[0]]

    def sample(self, index: int) -> EpisodeRef:
        """The episode of training sample ``index`` (deterministic; see the module docstring).

        Args:
            index: The sample's index in the run, from 0.

        Raises:
            CurriculumError: A negative index.
        """
        if index < 0:
            raise CurriculumError(f"sample index must be >= 0, got {index}")
        k, start = self._stage_index(index)
        seed = self.config.seed
        if k > 0 and self.config.replay > 0:
            draw = np.random.default_rng([seed, 1, index])
            if draw.random() < self.config.replay:
                earlier = int(draw.integers(k))
                ids = self._episodes[self.config.stages[earlier].name]
                return self._ref(earlier, ids[int(draw.integers(len(ids)))])
        ids = self._episodes[self.config.stages[k].name]
        epoch, position = divmod(index - start, len(ids))
        order = np.random.default_rng([seed, 0, k, epoch]).permutation(len(ids))
        return self._ref(k, ids[int(order[position])])

    def _ref(self, k: int, episode: str) -> EpisodeRef:
        stage = self.config.stages[k]
        return EpisodeRef(stage.dataset, episode, stage.name)

    def batch(self, start: int, size: int) -> list[EpisodeRef]:
        """Samples ``start .. start + size - 1`` (a GRPO step repeats each for its group).

        Args:
            start: The first sample index.
            size: How many samples.
        """
        refs = [self.sample(i) for i in range(start, start + size)]
        self._next_index = max(self._next_index, start + size)
        return refs

    def report(self, rewards: Sequence[float]) -> bool:
        """Record rewards of the samples served so far; in reward mode, start the next stage
        (at the next unserved index) when the mean of the last ``window`` rewards reaches the
        current stage's ``promote_at``. Returns whether a new stage started.

        Args:
            rewards: The rewards of samples served so far (finite numbers).

        Raises:
            CurriculumError: A reward is not finite.
        """
        values = [float(r) for r in rewards]
        if any(not np.isfinite(v) for v in values):
            raise CurriculumError(f"curriculum.report: rewards must be finite, got {values}")
        self._rewards.extend(values)
        if self.config.mode != "reward":
            return False
        k = len(self._starts) - 1
        stage = self.config.stages[k]
        full = len(self._rewards) == self._rewards.maxlen
        if (
            k + 1 < len(self.config.stages)
            and stage.promote_at is not None
            and full
            and float(np.mean(self._rewards)) >= stage.promote_at
        ):
            self._starts.append(self._next_index)
            self._rewards.clear()
            return True
        return False

    # -- checkpoints --------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """What a checkpoint must keep to resume the same schedule."""
        return {
            "starts": list(self._starts),
            "rewards": list(self._rewards),
            "next_index": self._next_index,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Resume from what :meth:`state_dict` returned.

        Args:
            state: A :meth:`state_dict` of a curriculum with the same config.

        Raises:
            CurriculumError: The stage starts do not fit this config.
        """
        starts = [int(s) for s in state["starts"]]
        if not starts or starts[0] != 0 or len(starts) > len(self.config.stages):
            raise CurriculumError(f"curriculum state: bad stage starts {starts}")
        self._starts = starts
        self._rewards = deque((float(r) for r in state["rewards"]), maxlen=self.config.window)
        self._next_index = int(state["next_index"])


def _episode_ids(dataset: str) -> list[str]:

    try:
        return DatasetSource(dataset).episode_ids
    except CausalTraceError as exc:
        raise CurriculumError(f"curriculum: {exc}") from None
