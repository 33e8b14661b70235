"""Onset profiles and time windows: how an intervention's weight evolves after its onset.

A profile maps steps since onset (0, 1, 2, ...) to a weight in [0, 1]; the intervened value is
``x + weight * (target - x)``, so weight 0 is the untouched world and weight 1 the full effect.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from causaltrace.errors import InterventionError


@dataclass(frozen=True)
class Step:
    """Full effect from the onset on."""

    def weights(self, since_onset: np.ndarray) -> np.ndarray:
        return np.ones_like(since_onset, dtype=np.float64)


@dataclass(frozen=True)
class Ramp:
    """Linear ramp reaching full effect after ``steps`` steps (a gradual roll-out).

    Args:
        steps: Steps to full effect (at least 1); 3 by default.

    Raises:
        InterventionError: ``steps`` < 1.
    """

    steps: int = 3

    def __post_init__(self) -> None:
        if self.steps < 1:
            raise InterventionError(f"Ramp needs steps >= 1, got {self.steps}")

    def weights(self, since_onset: np.ndarray) -> np.ndarray:
        return np.minimum((since_onset + 1.0) / self.steps, 1.0)


@dataclass(frozen=True)
class Pulse:
    """Full effect for ``length`` steps, then none (an outage that was fixed).

    Args:
        length: Steps at full effect (at least 1); 1 by default.

    Raises:
        InterventionError: ``length`` < 1.
    """

    length: int = 1

    def __post_init__(self) -> None:
        if self.length < 1:
            raise InterventionError(f"Pulse needs length >= 1, got {self.length}")

    def weights(self, since_onset: np.ndarray) -> np.ndarray:
        return (since_onset < self.length).astype(np.float64)


@dataclass(frozen=True)
class Decay:
    """Full effect at onset, decaying exponentially with the given half-life in steps.

    Args:
        half_life: Steps for the weight to halve (positive); 3.0 by default.

    Raises:
        InterventionError: ``half_life`` <= 0.
    """

    half_life: float = 3.0

    def __post_init__(self) -> None:
        if self.half_life <= 0:
            raise InterventionError(f"Decay needs half_life > 0, got {self.half_life}")

    def weights(self, since_onset: np.ndarray) -> np.ndarray:
        return np.power(0.5, since_onset / self.half_life)


Profile = Step | Ramp | Pulse | Decay

PROFILES: dict[str, type] = {"step": Step, "ramp": Ramp, "pulse": Pulse, "decay": Decay}


def profile_name(profile: Profile) -> str:
    return type(profile).__name__.lower()


@dataclass(frozen=True)
class Window:
    """When an intervention acts: from step ``onset`` up to (excluding) ``end``, shaped by
    ``profile``. ``onset`` and ``end`` are indices into the panel's time axis; ``end=None`` runs
    to the end of the panel.

    An intervention may begin part-way through its onset step (an edit made at 16:00 on a
    daily panel): ``start`` says where, as a fraction of the step, and ``onset_weight`` scales
    the onset step's weight to the share of the step's activity that falls after ``start``
    (the caller knows how activity spreads within a step; for activity spread evenly it is
    ``1 - start``). The onset step then holds the partial step, and a report that splits steps
    (hours of a day) can rebuild its part before ``start`` from
    :meth:`causaltrace.model.simulate.World.at_step_start`.

    Args:
        onset: The first time step (index) the intervention acts on; 0 by default.
        end: The first time step it no longer acts on; ``None`` (default) runs to the end.
        profile: The weight after onset; :class:`Step` (full effect) by default.
        start: Where in the onset step it begins, in [0, 1); 0 (the step's start) by default.
        onset_weight: The onset step's weight as a share of the profile's, in [0, 1]; 1 by
            default.

    Raises:
        InterventionError: A negative ``onset``, ``end`` not after ``onset``, or ``start`` or
            ``onset_weight`` out of range.
    """

    onset: int = 0
    end: int | None = None
    profile: Profile = Step()
    start: float = 0.0
    onset_weight: float = 1.0

    def __post_init__(self) -> None:
        if self.onset < 0:
            raise InterventionError(f"window onset must be >= 0, got {self.onset}")
        if self.end is not None and self.end <= self.onset:
            raise InterventionError(f"window end {self.end} must be after onset {self.onset}")
        if not 0.0 <= self.start < 1.0:
            raise InterventionError(f"window start must be in [0, 1), got {self.start}")
        if not 0.0 <= self.onset_weight <= 1.0:
            raise InterventionError(
                f"window onset_weight must be in [0, 1], got {self.onset_weight}"
            )

    @property
    def partial_onset(self) -> bool:
        """Whether the intervention begins part-way through its onset step."""
        return self.start > 0.0 or self.onset_weight < 1.0

    def weights(self, n_time: int) -> np.ndarray:
        """Weight per time step, shape ``(n_time,)``.

        Args:
            n_time: The number of time steps of the panel.
        """
        t = np.arange(n_time, dtype=np.float64)
        since = t - self.onset
        w = np.where(since >= 0, self.profile.weights(np.maximum(since, 0.0)), 0.0)
        if self.onset_weight < 1.0 and self.onset < n_time:
            w[self.onset] *= self.onset_weight
        if self.end is not None:
            w[self.end :] = 0.0
        return w
