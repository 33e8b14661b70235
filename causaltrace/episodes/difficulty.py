"""Difficulty: knobs on a domain's priors and on the verifier's acceptance, declared once.

An episode's difficulty is what its prior draws and what the verifier lets through. A
:class:`Difficulty` dials both, without the domain's code knowing about it:

* **signal strength as SNR**: ``snr = [low, high)`` is the band of the accepted episode's
  measured signal-to-noise ratio on the *visible tables* (the verifier's detection statistic:
  effect over the episode's own day-to-day noise), in units of the cause's typical SNR
  (``CauseInfo.typical_snr`` of its intervention point, 1 if the domain declares none):
  signature statistics of different causes live on different scales (a disapproved ad's serving
  share moves by hundreds of its daily noise, a demand dip by a few), so one absolute band would
  make some causes impossible and others trivial. ``strength = [q0, q1]`` narrows each cause's
  strength prior to those quantiles of its range, so that the band is reached without thousands
  of rejected attempts (the band is the knob; the quantiles are only how it is reached cheaply);
* **slice order**: ``two_d_share`` is the prior share of 2D slices among sliced draws of every
  cause that has both 1D and 2D slices (a split's quota composition still wins where it fixes
  the order);
* **onset profile**: ``profile`` = ``prior`` (each cause's own), ``step``, or ``ramp`` (a linear
  ramp over ``ramp_steps`` steps: the change creeps in, with no day on which it jumps). The knob
  picks among the shapes a cause's prior allows and never invents one: a cause whose prior is
  step-only (an edit: a budget, a bid, an approval status is changed at one instant, and the
  change history logs one step) stays a step under ``ramp``, and a ramp-only cause stays a ramp
  under ``step``;
* **alert window position**: ``onset = [q0, q1]`` narrows each cause's onset range to those
  quantiles (0: the earliest onset the prior allows, the effect long established when the alert
  looks; 1: the latest, only the last days of the alert window show it);
* **domain knobs** (``domain``): values for the domain's own config keys that it declares as
  difficulty knobs in :attr:`Domain.difficulty_knobs` (decoys, confounders, noise
  overdispersion, ...), merged into the domain's config.

Like Pyro's ``poutine.do``, a difficulty is a transformation of the model (new intervention
points with narrowed priors, :func:`apply_difficulty`), not a flag inside it. It is part of the
domain's config (key ``difficulty``), so every rebuild of an episode from its spec sees the same
priors. Each label records it (``extra["difficulty"]``: the knobs, where the draw fell, and the
measured SNR).
"""

from __future__ import annotations

import glob
import json
import math
import statistics
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from causaltrace.core.config import typed_config
from causaltrace.core.files import plain_data
from causaltrace.errors import CausalTraceError
from causaltrace.model.intervention_points import InterventionDraw, InterventionPrior
from causaltrace.model.profiles import Ramp, Step, profile_name
from causaltrace.model.scm import SCM

if TYPE_CHECKING:  # pragma: no cover (verify imports scipy; importing causaltrace must not)
    from causaltrace.episodes.verify import VerifierConfig

PROFILES = ("prior", "step", "ramp")


class DifficultyError(CausalTraceError):
    """A difficulty config names an unknown knob or an impossible value."""


def _range(value: Any, key: str, unit: bool) -> tuple[float, float]:
    try:
        low, high = (float(v) for v in value)
    except (TypeError, ValueError):
        raise DifficultyError(f"difficulty.{key} must be [low, high], got {value!r}") from None
    if not low <= high or (unit and not 0.0 <= low <= high <= 1.0):
        bounds = "0 <= low <= high <= 1" if unit else "low <= high"
        raise DifficultyError(f"difficulty.{key} must satisfy {bounds}, got {value!r}")
    return low, high


@dataclass(frozen=True)
class Difficulty:
    """The knobs of one tier (a domain's ``conf/dataset/<domain>_<tier>.yaml``, key ``difficulty``).

    The defaults change nothing: a domain without a ``difficulty`` config draws from its own
    priors and the verifier accepts any SNR above its threshold.
    """

    tier: str | None = None
    snr: tuple[float, float | None] | None = None
    strength: tuple[float, float] = (0.0, 1.0)
    onset: tuple[float, float] = (0.0, 1.0)
    two_d_share: float | None = None
    profile: str = "prior"
    ramp_steps: int = 3
    domain: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "strength", _range(self.strength, "strength", unit=True))
        object.__setattr__(self, "onset", _range(self.onset, "onset", unit=True))
        if self.snr is not None:
            try:
                low, high = self.snr
                low = float(low)
                high = None if high is None else float(high)
            except (TypeError, ValueError):
                raise DifficultyError(
                    f"difficulty.snr must be [low, high] (high may be null), got {self.snr!r}"
                ) from None
            if low < 0 or (high is not None and not high > low):
                raise DifficultyError(f"difficulty.snr needs 0 <= low < high, got {self.snr!r}")
            object.__setattr__(self, "snr", (low, high))
        if self.two_d_share is not None and not 0.0 <= float(self.two_d_share) <= 1.0:
            raise DifficultyError(
                f"difficulty.two_d_share must be in [0, 1], got {self.two_d_share!r}"
            )
        if self.profile not in PROFILES:
            raise DifficultyError(
                f"difficulty.profile must be one of {PROFILES}, got {self.profile!r}"
            )
        if not (isinstance(self.ramp_steps, int) and self.ramp_steps >= 1):
            raise DifficultyError(f"difficulty.ramp_steps must be >= 1, got {self.ramp_steps!r}")
        object.__setattr__(self, "domain", dict(self.domain or {}))

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any] | None) -> Difficulty:
        """Build from a plain or OmegaConf mapping, naming any unknown key.

        Args:
            data: The knobs by name; a :class:`Difficulty` is returned as is, and ``None`` gives
                the defaults.

        Raises:
            DifficultyError: ``data`` is not a mapping, has an unknown key or a bad value.
        """
        return typed_config(cls, data, "difficulty", DifficultyError)

    @property
    def is_default(self) -> bool:
        return self == Difficulty(tier=self.tier)

    def verifier(self, config: VerifierConfig, typical_snr: float = 1.0) -> VerifierConfig:
        """The verifier with this tier's SNR band for a cause whose typical SNR is
        ``typical_snr`` (the band comes on top of the verifier's own detection threshold: an
        undetectable episode stays rejected whatever the band).

        Args:
            config: The verifier's own config.
            typical_snr: The cause's typical detection SNR, which scales the tier's band; 1 by
                default.

        Returns:
            ``config`` itself when the tier has no SNR band.
        """
        if self.snr is None:
            return config
        low, high = self.snr
        band = (low * typical_snr, None if high is None else high * typical_snr)
        return replace(config, snr_band=band)

    def knobs(self) -> dict[str, Any]:
        """The knobs as plain data (what a label records)."""
        return plain_data(asdict(self))


def _sub_range(low: float, high: float, q: tuple[float, float], log: bool) -> tuple[float, float]:
    """The ``q`` quantiles of a uniform (or log-uniform) range."""
    if log:
        a, b = math.log(low), math.log(high)
        return math.exp(a + q[0] * (b - a)), math.exp(a + q[1] * (b - a))
    return low + q[0] * (high - low), low + q[1] * (high - low)


def _slice_weights(prior: InterventionPrior, share: float) -> tuple[float, ...] | None:
    """Slice-dimension weights with ``share`` of the weight on 2D dims (1 - share on 1D); other
    orders keep theirs. Unchanged for a prior without both 1D and 2D dims."""
    orders = [len(d) for d in prior.slice_dims]
    if 1 not in orders or 2 not in orders:
        return prior.slice_dim_weights
    base = list(prior.slice_dim_weights or [1.0] * len(orders))
    sliced = sum(w for w, o in zip(base, orders, strict=True) if o in (1, 2))
    total = {o: sum(w for w, oo in zip(base, orders, strict=True) if oo == o) for o in (1, 2)}
    target = {1: (1.0 - share) * sliced, 2: share * sliced}
    return tuple(
        w * target[o] / total[o] if o in (1, 2) else w for w, o in zip(base, orders, strict=True)
    )


def transform_prior(prior: InterventionPrior, difficulty: Difficulty, n_time: int):
    """``prior`` narrowed by the difficulty's knobs (onsets resolved to absolute steps).

    Args:
        prior: The cause's prior.
        difficulty: The knobs.
        n_time: The panel's number of time steps (to resolve negative onsets).
    """
    low, high = prior.strength
    strength = _sub_range(low, high, difficulty.strength, prior.log_strength)
    first, last = prior.onset_range(n_time)
    onset = (
        first + round(difficulty.onset[0] * (last - first)),
        first + round(difficulty.onset[1] * (last - first)),
    )
    profiles, weights = prior.profiles, prior.profile_weights
    allowed = {type(p) for p in prior.profiles}
    if difficulty.profile == "step" and Step in allowed:
        profiles, weights = (Step(),), None
    elif difficulty.profile == "ramp" and Ramp in allowed:
        profiles, weights = (Ramp(difficulty.ramp_steps),), None
    slice_weights = prior.slice_dim_weights
    if difficulty.two_d_share is not None:
        slice_weights = _slice_weights(prior, float(difficulty.two_d_share))
    return replace(
        prior,
        strength=strength,
        onset=onset,
        profiles=profiles,
        profile_weights=weights,
        slice_dim_weights=slice_weights,
    )


def apply_difficulty(scm, difficulty: Difficulty, no_signal: frozenset[str] = frozenset()):
    """A new SCM whose signal causes' priors are narrowed by ``difficulty`` (no-signal causes
    keep theirs: there is nothing to dial). The SCM itself is returned when nothing changes.

    Args:
        scm (SCM): The model.
        difficulty: The knobs.
        no_signal: The causes without signal, whose priors are kept; none by default.
    """
    if difficulty.is_default:
        return scm

    points = []
    for name, point in scm.intervention_points.items():
        if name not in no_signal:
            point = replace(point, prior=transform_prior(point.prior, difficulty, scm.panel.n_time))
        points.append(point)
    return SCM(scm.nodes.values(), scm.panel, points, name=scm.name, validate_mechanisms=False)


def draw_record(draw: InterventionDraw, n_time: int) -> dict[str, Any]:
    """What an episode's draw says about its difficulty (recorded beside the knobs).

    Args:
        draw: The episode's draw.
        n_time: The panel's number of time steps.
    """
    return {
        "slice_order": len(draw.slice.conditions),
        "profile": profile_name(draw.window.profile),
        "onset_from_end": int(n_time - draw.window.onset),
        "strength": float(draw.strength),
    }


def typical_snrs(out_dir) -> dict[str, float]:
    """Each signal cause's median detection SNR over a generated dataset's accepted episodes
    (from its private verifier stats): the calibration a domain declares as
    ``CauseInfo.typical_snr``. Generate the dataset at the domain's default difficulty.

    Args:
        out_dir (str | Path): The generated dataset's directory.

    Raises:
        DifficultyError: The dataset has no verifier stats.
    """

    by_cause: dict[str, list[float]] = {}
    paths = sorted(glob.glob(str(Path(out_dir) / "private" / "stats" / "shard-*.json")))
    if not paths:
        raise DifficultyError(f"{out_dir}: no verifier stats (private/stats/shard-*.json)")
    for path in paths:
        with open(path, encoding="utf-8") as handle:
            for row in json.load(handle):
                snr = (row.get("accepted_stats") or {}).get("snr")
                if snr is not None:
                    by_cause.setdefault(row["cause"], []).append(float(snr))
    return {cause: round(statistics.median(v), 1) for cause, v in sorted(by_cause.items())}


if __name__ == "__main__":  # python -m causaltrace.episodes.difficulty DATASET_DIR
    import json
    import sys

    if len(sys.argv) != 2:
        sys.exit("usage: python -m causaltrace.episodes.difficulty DATASET_DIR")
    try:
        print(json.dumps(typical_snrs(sys.argv[1]), indent=1))
    except DifficultyError as exc:
        sys.exit(f"causaltrace.episodes.difficulty: error: {exc}")
