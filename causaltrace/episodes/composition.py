"""Split composition: which cause (and slice order) each episode index gets.

Two kinds, both domain-free and deterministic in (dataset seed, split name):

- ``prior``: every episode draws its cause independently from a prior over causes (balanced by
  default); the slice order is left to the cause's own prior.
- ``quotas``: exact counts, as in a frozen test split: ``total`` episodes, of which ``sliced``
  need a slice and ``two_d`` of those a 2D slice. Counts are spread as evenly as possible over the
  causes that can take them; the resulting list is shuffled so causes do not come in runs.

Either kind may ask for **concurrent** episodes, with two simultaneous root causes:
``concurrent: 0.3`` (a share of the split, for ``prior``) or ``concurrent: 12`` (a count, for
``quotas``; a value below 1 is a share, a whole number >= 1 a count, for either kind). That many episodes whose first
cause is a signal cause are picked, and each gets a second cause: a signal cause other than the
first whose interventions target none of the SCM nodes the first one's do (a different
mechanism). Both picks come from :func:`~causaltrace.core.seeds.concurrent_schedule_rng`, a stream
of their own, so the first causes (and every single-cause episode) are the same as without
``concurrent``. The second cause's slice order is left to its prior.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from causaltrace.core.seeds import concurrent_schedule_rng, schedule_rng
from causaltrace.errors import CausalTraceError


@dataclass(frozen=True)
class Assignment:
    cause: str
    slice_order: int | None  # None: the cause's prior decides
    also: tuple[str, ...] = ()  # the further causes of a concurrent episode (their prior decides)


def concurrent_share(config: Mapping[str, Any]) -> float | int:
    """The composition's ``concurrent`` value (0 without one), checked.

    Args:
        config: The split's composition config.

    Raises:
        CausalTraceError: ``concurrent`` is not a non-negative number.
    """
    value = config.get("concurrent", 0) or 0
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise CausalTraceError(
            f"composition.concurrent must be a share in [0, 1) or a count >= 0, got {value!r}"
        )
    return value


def allows_concurrent(config: Mapping[str, Any] | None) -> bool:
    """Whether a composition asks for concurrent episodes (then every prompt of the split says
    that one or more causes may be at work).

    Args:
        config: The split's composition config, or ``None``.
    """
    return bool(config) and concurrent_share(config) > 0


# The SCM nodes each intervention point targets, per SCM (weakly keyed).
_TARGETS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def target_nodes(scm, cause: str) -> frozenset[str]:
    """The SCM nodes ``cause``'s interventions target (read off a few fixed draws of its prior,
    so a builder whose node depends on the draw is covered).

    Args:
        scm (SCM): The model.
        cause: The intervention point.
    """
    by_cause = _TARGETS.setdefault(scm, {})
    if cause not in by_cause:
        point = scm.point(cause)
        nodes: set[str] = set()
        for seed in range(4):
            draw = point.sample(np.random.default_rng(seed), scm.panel)
            nodes |= {iv.node for iv in point.interventions(draw)}
        by_cause[cause] = frozenset(nodes)
    return by_cause[cause]


def second_causes(scm, cause: str) -> list[str]:
    """The causes that may act together with ``cause`` in a concurrent episode: signal causes
    (not no-signal, with at least one intervention) other than ``cause`` whose target nodes are
    disjoint from its own, in the SCM's order.

    Args:
        scm (SCM): The model.
        cause: The first cause.
    """
    mine = target_nodes(scm, cause)
    out = []
    for name, point in scm.intervention_points.items():
        if name == cause or point.info.no_signal:
            continue
        nodes = target_nodes(scm, name)
        if nodes and not nodes & mine:
            out.append(name)
    return out


def _with_concurrent(
    scm, plan: list[Assignment], config: Mapping[str, Any], *, split: str, dataset_seed: int
) -> list[Assignment]:
    """``plan`` with a second cause on the share or count of episodes ``config`` asks for."""
    value = concurrent_share(config)
    if not value:
        return plan
    if value >= 1 and value != int(value):
        raise CausalTraceError(
            f"composition.concurrent is a share below 1 or a whole count, got {value!r}"
        )
    n = len(plan)
    count = round(value * n) if value < 1 else int(value)
    points = scm.intervention_points
    eligible = [
        i
        for i, a in enumerate(plan)
        if not points[a.cause].info.no_signal and second_causes(scm, a.cause)
    ]
    if count > len(eligible):
        raise CausalTraceError(
            f"composition.concurrent asks for {count} concurrent episodes, but only "
            f"{len(eligible)} of the {n} have a signal cause that another cause can join"
        )
    rng = concurrent_schedule_rng(dataset_seed, split)
    chosen = sorted(int(i) for i in rng.choice(eligible, size=count, replace=False))
    out = list(plan)
    for i in chosen:
        options = second_causes(scm, plan[i].cause)
        out[i] = replace(plan[i], also=(options[int(rng.integers(len(options)))],))
    return out


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
    """The cause (and slice order, and any concurrent second cause) of each episode index.

    Args:
        scm (SCM): The domain's model (its intervention points and their priors).
        config: The split's composition config (``kind`` and its counts or shares,
            ``concurrent``).
        split: The split's name (seeds the schedule).
        dataset_seed: The dataset's seed.
        n_episodes: The number of episodes.

    Returns:
        One assignment per episode index, in order.
    """
    plan = _assignments(scm, config, split=split, dataset_seed=dataset_seed, n_episodes=n_episodes)
    return _with_concurrent(scm, plan, config, split=split, dataset_seed=dataset_seed)


def _assignments(
    scm, config: Mapping[str, Any], *, split: str, dataset_seed: int, n_episodes: int
) -> list[Assignment]:
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
