"""Split composition: which cause (and slice order) each episode index gets.

Two kinds, both domain-free and deterministic in (dataset seed, split name):

- ``prior``: every episode draws its cause independently from a prior over causes (balanced by
  default); the slice order is left to the cause's own prior.
- ``quotas``: exact counts, as in a frozen test split: ``total`` episodes, of which ``sliced``
  need a slice and ``two_d`` of those a 2D slice. Counts are spread as evenly as possible over the
  causes that can take them; the resulting list is shuffled so causes do not come in runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from causaltrace.errors import CausalTraceError
from causaltrace.seeds import schedule_rng


@dataclass(frozen=True)
class Assignment:
    cause: str
    slice_order: int | None  # None: the cause's prior decides


def _even(count: int, names: Sequence[str]) -> dict[str, int]:
    """Split ``count`` over ``names`` as evenly as possible (the first ones get the remainder)."""
    if not names:
        if count:
            raise CausalTraceError(f"cannot place {count} episodes: no cause can take them")
        return {}
    base, extra = divmod(count, len(names))
    return {n: base + (i < extra) for i, n in enumerate(names)}


def assignments(
    scm, config: Mapping[str, Any], *, split: str, dataset_seed: int, n_episodes: int
) -> list[Assignment]:
    """The cause (and slice order) of each episode index of a split."""
    kind = config.get("kind", "prior")
    points = scm.intervention_points
    rng = schedule_rng(dataset_seed, split)
    if kind == "prior":
        weights = dict(config.get("weights") or {})
        unknown = sorted(set(weights) - set(points))
        if unknown:
            raise CausalTraceError(
                f"composition.weights names unknown causes {unknown}; known: {sorted(points)}"
            )
        names = list(points)
        probs = [float(weights.get(n, 1.0)) for n in names]
        if min(probs) < 0 or sum(probs) <= 0:
            raise CausalTraceError("composition.weights must be non-negative with a positive sum")
        total = sum(probs)
        picks = rng.choice(len(names), size=n_episodes, p=[p / total for p in probs])
        return [Assignment(names[i], None) for i in picks]
    if kind != "quotas":
        raise CausalTraceError(f"composition.kind must be 'prior' or 'quotas', got {kind!r}")
    total = int(config.get("total", n_episodes))
    sliced, two_d = int(config["sliced"]), int(config.get("two_d", 0))
    if total != n_episodes:
        raise CausalTraceError(
            f"composition.total={total} but the split has n_episodes={n_episodes}"
        )
    if not 0 <= two_d <= sliced <= total:
        raise CausalTraceError(
            f"composition needs 0 <= two_d ({two_d}) <= sliced ({sliced}) <= total ({total})"
        )
    slice_free = [n for n, p in points.items() if p.slice_orders() == (0,)]
    with_slice = [n for n, p in points.items() if any(o >= 1 for o in p.slice_orders())]
    can_2d = [n for n in with_slice if 2 in points[n].slice_orders()]
    plan: list[Assignment] = []
    for name, count in _even(total - sliced, slice_free).items():
        plan += [Assignment(name, 0)] * count
    per_cause = _even(sliced, with_slice)
    two_d_plan = _even(two_d, can_2d)
    for name in with_slice:
        k2 = min(two_d_plan.get(name, 0), per_cause[name])
        if k2 < two_d_plan.get(name, 0):
            raise CausalTraceError(
                f"composition: cause {name!r} gets {per_cause[name]} sliced "
                f"episodes, fewer than its {two_d_plan[name]} 2D ones"
            )
        plan += [Assignment(name, 2)] * k2 + [Assignment(name, 1)] * (per_cause[name] - k2)
        if per_cause[name] - k2 and 1 not in points[name].slice_orders():
            raise CausalTraceError(f"composition: cause {name!r} cannot take 1D slices")
    order = rng.permutation(len(plan))
    return [plan[i] for i in order]
