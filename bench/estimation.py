"""Issue 28: effect estimators scored against the exact truth of shared-noise worlds.

For each case (a domain, a query that ``identify_effect`` answers, a contrast of two
interventions on the treatment) and each data regime, every seed gives a data set through the
export's own code path (``world_seeds`` and ``regime_frame``: the rows ``causaltrace
export-structure`` writes) and the true effect of the contrast on exactly those worlds
(``true_effect`` with the same seeds: the sample average effect, what ``export_truth`` writes
next to the data). Each estimator's estimate is compared with it: bias (mean of estimate minus
truth), the estimates' standard deviation against the mean reported standard error, and the
coverage of the 95% interval (share of seeds whose interval holds their truth; its binomial
standard error is sqrt(0.95 x 0.05 / seeds), 2.2 points at 100 seeds).

Cases:

* ``example``: visits -> tracked_orders, do(visits=1000) against do(visits=0); back-door
  {channel} on pooled rows. Regimes: observational, and ``scale:demand=1.5`` (more visits;
  the identification is the same on the intervened model).
* ``ads``: the small preset, real_conversions -> backend_revenue, do(1) against do(0);
  back-door {audience, geo}. Regimes: observational, and ``scale:cvr=2``.
* ``binary`` (synthetic, tests/structure/_effects_support.py): dose -> y where y reads
  1{dose > 0}, effect 2 + z; back-door {z}; the binarized treatment, so IPW and AIPW apply.
* ``frontdoor`` (synthetic): u (hidden) -> x -> m -> y <- u, effect 1.2; front-door {m}.

Estimators: ``ols`` (interacted back-door regression: the back-door formula's average slope),
``ols-additive`` (fixed effects; the value DoWhy's backdoor.linear_regression returns, checked
here on every seed), ``ols-unadjusted`` (the unit graph's empty set), ``ipw``, ``aipw``,
``frontdoor``, ``dowhy`` (the bridge; with its classical standard error).

    PYTHONPATH=. python bench/estimation.py                     # every case, 100 seeds
    PYTHONPATH=. python bench/estimation.py --cases example --seeds 20
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable, Sequence  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from causaltrace import Dimension, Panel, TimeAxis, load_domain  # noqa: E402
from causaltrace.model.scm import SCM  # noqa: E402
from causaltrace.structure.estimation import (  # noqa: E402
    Estimate,
    aipw,
    backdoor_regression,
    frontdoor_linear,
    ipw,
)
from causaltrace.structure.export import parse_regime, regime_frame, world_seeds  # noqa: E402
from causaltrace.structure.identification import Identification, identify_effect  # noqa: E402
from causaltrace.structure.truth import true_effect  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "structure"))
from _effects_support import binary_treatment_scm, frontdoor_scm  # noqa: E402

try:  # optional: the dowhy extra
    from causaltrace.structure.dowhy_estimation import dowhy_estimate
except ImportError:  # pragma: no cover
    dowhy_estimate = None

Estimator = Callable[[object, Identification], Estimate]


@dataclass(frozen=True)
class Case:
    name: str
    build: Callable[[], SCM]
    treatment: str
    outcome: str
    treat: str  # the contrast's arms, as regime text
    control: str
    worlds: int  # worlds per data set
    regimes: tuple[str, ...]  # "" is observational
    estimators: dict[str, Estimator]


def _small_panel() -> Panel:
    return Panel.cross(
        [Dimension("device", ("mobile", "desktop", "tablet")), Dimension("geo", ("us", "eu"))],
        TimeAxis("2026-01-01", 20, "D"),
    )


def _backdoor(a: float, b: float, dowhy: bool) -> dict[str, Estimator]:
    out: dict[str, Estimator] = {
        "ols": lambda f, r: backdoor_regression(f, r, treat=a, control=b),
        "ols-additive": lambda f, r: backdoor_regression(
            f, r, treat=a, control=b, interacted=False
        ),
        "ols-unadjusted": lambda f, r: backdoor_regression(f, r, treat=a, control=b, adjustment=()),
    }
    if dowhy and dowhy_estimate is not None:
        out["dowhy"] = lambda f, r: dowhy_estimate(f, r, treat=a, control=b).estimate
    return out


def cases(dowhy: bool) -> list[Case]:
    return [
        Case(
            "example",
            lambda: load_domain("example").scm,
            "visits",
            "tracked_orders",
            "do:visits=1000",
            "do:visits=0",
            2,
            ("", "scale:demand=1.5"),
            _backdoor(1000, 0, dowhy),
        ),
        Case(
            "ads",
            lambda: load_domain("ads", {"preset": "small"}).scm,
            "real_conversions",
            "backend_revenue",
            "do:real_conversions=1",
            "do:real_conversions=0",
            1,
            ("", "scale:cvr=2"),
            _backdoor(1, 0, dowhy),
        ),
        Case(
            "binary",
            lambda: binary_treatment_scm(_small_panel()),
            "dose",
            "y",
            "do:dose=1",
            "do:dose=-1",
            10,
            ("",),
            {
                "ols": lambda f, r: backdoor_regression(f, r, threshold=0.0),
                "ipw": lambda f, r: ipw(f, r, threshold=0.0),
                "aipw": lambda f, r: aipw(f, r, threshold=0.0),
            },
        ),
        Case(
            "frontdoor",
            lambda: frontdoor_scm(_small_panel()),
            "x",
            "y",
            "do:x=1",
            "do:x=0",
            10,
            ("",),
            {"frontdoor": lambda f, r: frontdoor_linear(f, r)},
        ),
    ]


@dataclass(frozen=True)
class Row:
    case: str
    regime: str
    estimator: str
    kind: str
    adjustment: str
    truth: float
    bias: float
    sd: float
    mean_se: float
    coverage: float
    seeds: int


def run_case(case: Case, n_seeds: int) -> list[Row]:
    base = case.build()
    rows: list[Row] = []
    for k, spec in enumerate(case.regimes):
        regime = parse_regime(spec, base) if spec else None
        scm = base.intervene(*[iv.intervention for iv in regime.interventions]) if regime else base
        answer = identify_effect(scm, case.treatment, case.outcome)
        truths = np.empty(n_seeds)
        found: dict[str, list[Estimate]] = {name: [] for name in case.estimators}
        for seed in range(n_seeds):
            seeds = world_seeds(seed, k, case.worlds)
            frame = regime_frame(base, base.observed, seeds, regime)
            truths[seed] = true_effect(
                scm, case.outcome, case.treat, case.control, seeds=seeds, by=()
            ).ate
            for name, estimator in case.estimators.items():
                found[name].append(estimator(frame, answer))
            if "dowhy" in found:  # the bridge's value is our additive OLS's
                gap = abs(found["dowhy"][-1].value - found["ols-additive"][-1].value)
                assert gap < 1e-8, (case.name, seed, gap)
        for name, estimates in found.items():
            values = np.array([e.value for e in estimates])
            rows.append(
                Row(
                    case.name,
                    spec or "observational",
                    name,
                    answer.kind,
                    "{" + ", ".join(estimates[0].adjustment) + "}",
                    float(truths.mean()),
                    float((values - truths).mean()),
                    float(values.std(ddof=1)),
                    float(np.mean([e.se for e in estimates])),
                    float(np.mean([e.covers(t) for e, t in zip(estimates, truths)])),
                    n_seeds,
                )
            )
    return rows


def table(rows: Sequence[Row]) -> str:
    lines = [
        "| case | regime | estimator | set | true ATE | bias | bias / truth | sd | mean SE "
        "| coverage |",
        "| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        lines.append(
            f"| {r.case} | {r.regime} | {r.estimator} | {r.adjustment} | {r.truth:.4g} | "
            f"{r.bias:+.3g} | {r.bias / r.truth:+.1%} | {r.sd:.3g} | {r.mean_se:.3g} | "
            f"{r.coverage:.0%} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=100, help="data sets per case and regime")
    parser.add_argument(
        "--cases", nargs="*", default=None, help="example, ads, binary, frontdoor (all)"
    )
    parser.add_argument("--no-dowhy", action="store_true", help="skip the DoWhy bridge")
    args = parser.parse_args(argv)
    chosen = [c for c in cases(not args.no_dowhy) if not args.cases or c.name in args.cases]
    rows: list[Row] = []
    for case in chosen:
        start = time.perf_counter()
        rows += run_case(case, args.seeds)
        print(f"{case.name}: {time.perf_counter() - start:.1f} s", flush=True)
    print()
    print(table(rows))


if __name__ == "__main__":
    main()
