"""What the acceptance filter does to the distribution a dataset was configured with.

Every attempt of an episode draws its cause's parameters (slice, strength, onset) from the
cause's prior, from its own seeded stream; the verifier then keeps the first attempt it accepts.
The accepted draws are therefore the prior *conditioned on acceptance*: causes and slice orders
are exactly the composition's (each episode is retried until accepted), but within a cause the
filter favours whatever makes an effect readable (strong effects, big slices, onsets with room
before and after). Since every attempt's draw can be made again from the seeds without
simulating anything, the rejected draws are known exactly, and the filter's effect can be
measured on any generated split: accepted against rejected draws, cause by cause.

The two-sample tests compare accepted with rejected draws (disjoint sets of independent draws
from the same prior): under "acceptance does not depend on the parameter" both are samples of
the prior, so the Kolmogorov-Smirnov and chi-square p-values are valid as stated.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import stats

from causaltrace.core.seeds import episode_streams
from causaltrace.datasets.reading import dataset_domain
from causaltrace.model.intervention_points import InterventionDraw


@dataclass(frozen=True)
class AttemptDraw:
    """One attempt's draw of an episode's (first) cause, and whether it was the accepted one;
    ``slice_order`` is the one the composition assigned (None: the cause's prior chose it)."""

    episode_id: str
    attempt: int
    accepted: bool
    slice_order: int | None
    draw: InterventionDraw
    cell_share: float  # the share of the panel's cells in the draw's slice


@dataclass(frozen=True)
class CauseShift:
    """One cause's accepted draws against its rejected ones, within one assigned slice order
    (the composition fixes the order; the filter acts on which slice, how strong, when)."""

    cause: str
    slice_order: int | None
    attempted: int
    accepted: int
    strength_rejected_mean: float
    strength_accepted_mean: float
    strength_ks: float  # two-sample KS statistic, accepted vs rejected
    strength_p: float
    onset_rejected_mean: float
    onset_accepted_mean: float
    onset_ks: float
    onset_p: float
    cells_rejected_mean: float  # the share of the panel's cells in the slice
    cells_accepted_mean: float
    cells_ks: float
    cells_p: float
    slice_dims_rejected: dict[str, float]  # slice dimensions ("" for none) -> share
    slice_dims_accepted: dict[str, float]
    slice_dims_p: float  # chi-square test of the dimension shares (1.0: a single kind)

    @property
    def acceptance(self) -> float:
        return self.accepted / self.attempted if self.attempted else float("nan")


def attempt_draws(dataset_dir: str | Path) -> Iterator[AttemptDraw]:
    """Every attempt's draw of every episode of a generated split, remade from the seeds (no
    simulation: a draw costs about a millisecond).

    Args:
        dataset_dir: The generated split's directory.
    """
    domain = dataset_domain(dataset_dir)
    scm = domain.scm
    n_cells = scm.panel.n_cells
    for path in sorted((Path(dataset_dir) / "private" / "specs").glob("shard-*.jsonl")):
        for line in path.read_text().splitlines():
            spec = json.loads(line)
            point = scm.point(spec["cause"])
            for attempt in range(int(spec["attempt"]) + 1):
                streams = episode_streams(
                    spec["dataset_seed"], spec["split"], spec["index"], attempt
                )
                draw = point.sample(streams.draw, scm.panel, spec["slice_order"])
                share = float(draw.slice.mask(scm.panel).sum()) / n_cells
                yield AttemptDraw(
                    spec["episode_id"],
                    attempt,
                    attempt == spec["attempt"],
                    spec["slice_order"],
                    draw,
                    share,
                )


def _dims(draw: InterventionDraw) -> str:
    return "&".join(draw.slice.dims)


def _shares(counts: Counter, total: int) -> dict[str, float]:
    return {k: counts[k] / total for k in sorted(counts)} if total else {}


def _two_sample(a: Sequence[float], b: Sequence[float]) -> tuple[float, float]:
    if len(a) < 1 or len(b) < 1:
        return float("nan"), float("nan")
    result = stats.ks_2samp(a, b)
    return float(result.statistic), float(result.pvalue)


def _chi_square(accepted: Counter, rejected: Counter) -> float:
    kinds = sorted(set(accepted) | set(rejected))
    if len(kinds) < 2 or not accepted or not rejected:
        return 1.0
    table = np.array([[accepted[k] for k in kinds], [rejected[k] for k in kinds]])
    return float(stats.chi2_contingency(table)[1])


def acceptance_shift(dataset_dir: str | Path) -> list[CauseShift]:
    """Per cause and assigned slice order: how the accepted draws differ from the rejected ones
    (strength, onset, the slice's size and dimensions), with two-sample tests; causes in the
    domain's order.

    Args:
        dataset_dir: The generated split's directory.
    """
    groups: dict[tuple[str, int | None], list[AttemptDraw]] = defaultdict(list)
    for item in attempt_draws(dataset_dir):
        groups[item.draw.point, item.slice_order].append(item)
    order = list(dataset_domain(dataset_dir).scm.intervention_points)
    out = []
    for cause, slice_order in sorted(groups, key=lambda k: (order.index(k[0]), k[1] or 0)):
        items = groups[cause, slice_order]
        acc = [i.draw for i in items if i.accepted]
        rej = [i.draw for i in items if not i.accepted]
        c_acc = [i.cell_share for i in items if i.accepted]
        c_rej = [i.cell_share for i in items if not i.accepted]
        s_acc, s_rej = [d.strength for d in acc], [d.strength for d in rej]
        o_acc, o_rej = [d.window.onset for d in acc], [d.window.onset for d in rej]
        d_acc, d_rej = Counter(map(_dims, acc)), Counter(map(_dims, rej))
        strength_ks, strength_p = _two_sample(s_acc, s_rej)
        onset_ks, onset_p = _two_sample(o_acc, o_rej)
        cells_ks, cells_p = _two_sample(c_acc, c_rej)
        out.append(
            CauseShift(
                cause=cause,
                slice_order=slice_order,
                attempted=len(items),
                accepted=len(acc),
                strength_rejected_mean=float(np.mean(s_rej)) if s_rej else float("nan"),
                strength_accepted_mean=float(np.mean(s_acc)),
                strength_ks=strength_ks,
                strength_p=strength_p,
                onset_rejected_mean=float(np.mean(o_rej)) if o_rej else float("nan"),
                onset_accepted_mean=float(np.mean(o_acc)),
                onset_ks=onset_ks,
                onset_p=onset_p,
                cells_rejected_mean=float(np.mean(c_rej)) if c_rej else float("nan"),
                cells_accepted_mean=float(np.mean(c_acc)),
                cells_ks=cells_ks,
                cells_p=cells_p,
                slice_dims_rejected=_shares(d_rej, len(rej)),
                slice_dims_accepted=_shares(d_acc, len(acc)),
                slice_dims_p=_chi_square(d_acc, d_rej),
            )
        )
    return out


def shift_table(shifts: Sequence[CauseShift]) -> str:
    """A Markdown table of :func:`acceptance_shift` (means of rejected / accepted draws, and
    the two-sample p-value).

    Args:
        shifts: What :func:`acceptance_shift` returns.
    """
    rows = [
        "| cause | slice order | attempts | accepted | strength (KS p) | onset (KS p) "
        "| slice's share of cells (KS p) |",
        "| --- | ---: | ---: | ---: | --- | --- | --- |",
    ]
    for s in shifts:
        order = "prior" if s.slice_order is None else str(s.slice_order)
        rows.append(
            f"| {s.cause} | {order} | {s.attempted} | {s.accepted} ({s.acceptance:.0%}) "
            f"| {s.strength_rejected_mean:.3g} / {s.strength_accepted_mean:.3g} "
            f"({s.strength_p:.2g}) | {s.onset_rejected_mean:.1f} / {s.onset_accepted_mean:.1f} "
            f"({s.onset_p:.2g}) | {s.cells_rejected_mean:.3f} / {s.cells_accepted_mean:.3f} "
            f"({s.cells_p:.2g}) |"
        )
    return "\n".join(rows)


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m causaltrace.audit.acceptance DATASET_DIR``: print the table.

    Args:
        argv: The command-line arguments; ``sys.argv[1:]`` by default.
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset_dir")
    args = parser.parse_args(argv)
    print(shift_table(acceptance_shift(args.dataset_dir)))


if __name__ == "__main__":
    main()
