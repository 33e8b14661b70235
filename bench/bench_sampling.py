"""Issue 2: sampling speed of causaltrace against DoWhy ``gcm``, pgmpy and a plain numpy loop.

One additive-noise linear-Gaussian SCM (a random DAG drawn with a fixed seed) is built four times:

* **numpy**: the reference, a plain loop over the topological order with one
  ``np.random.default_rng``: draw the node's noise, add the intercept and the weighted parents;
* **causaltrace**: ``Node``/``Linear``/``Normal``/``Exogenous`` in an ``SCM`` over a panel with
  one dimension and one time step (a unit is a cell);
* **DoWhy gcm**: an ``InvertibleStructuralCausalModel`` with an ``AdditiveNoiseModel`` per node,
  whose prediction model is ``create_linear_regressor_with_given_parameters`` (coefficients set
  directly: nothing is fitted, let alone timed) and whose noise is a ``ScipyDistribution(norm)``;
* **pgmpy**: a ``LinearGaussianBayesianNetwork`` of ``LinearGaussianCPD``s, sampled with
  ``simulate()``.

Three queries are timed at each size:

* ``observational``: one joint sample per unit;
* ``interventional``: do(X := c) on a mid-graph node X (causaltrace: ``sample`` of the model
  ``scm.intervene(Do(...))``; gcm ``interventional_samples``; pgmpy ``simulate(do=...)``);
* ``counterfactual``: the factual world and the world where X is shifted by delta, sharing every
  exogenous draw (causaltrace ``scm.simulate([Shift(...)])``; gcm ``draw_samples`` then
  ``counterfactual_samples`` on them, which recovers the noise by abduction; pgmpy has no
  counterfactual query for this model: ``simulate`` draws the joint Gaussian with
  ``multivariate_normal`` and never exposes the exogenous noise, so it is marked n/a). The
  numpy reference draws the noise once and recomputes only the descendants of X.

Model construction is not timed (for causaltrace: the panel, the SCM, and the intervention
objects, built once per size like the other libraries' models). Per-call work of each API is
timed: gcm's graph validation, pgmpy's model copy and joint-Gaussian computation. The row
``causaltrace*`` builds a new intervention object on every call, so it also pays
``scm.intervene`` (a new SCM: graph and topological sort) each time; the ``causaltrace`` row
samples a model intervened once, and passes the same ``Shift`` object to ``simulate``, which
reuses the intervened model it built on the first call.

A timed sample repeats a call back to back (different seeds) for about ``--sample-seconds``, so
small sizes measure warm throughput; samples of all implementations are interleaved and the
median per call is reported. A sanity check compares the mean and variance of a sink node, and
the counterfactual effect on it in every unit, with the closed form of the linear SCM.

    python bench/bench_sampling.py                # sizes 1e3, 1e5, 1e6
    python bench/bench_sampling.py --sizes 1000 --reps 50
"""

from __future__ import annotations

import os

# Every implementation runs on one core (pgmpy's multivariate_normal would otherwise use a
# multi-threaded BLAS): the comparison is per core. Override from the environment if wanted.
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import gc  # noqa: E402
import platform  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from collections.abc import Callable  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from importlib.metadata import PackageNotFoundError, version  # noqa: E402

import numpy as np  # noqa: E402

N_NODES = 30
GRAPH_SEED = 20260101
DO_VALUE = 2.0
SHIFT = 1.5
QUERIES = ("observational", "interventional", "counterfactual")


# ---------------------------------------------------------------------------------------------
# The model: a random DAG with linear mechanisms and Gaussian noise.


@dataclass(frozen=True)
class LinearGaussianDAG:
    names: tuple[str, ...]  # topological order
    parents: dict[str, tuple[str, ...]]
    weights: dict[str, tuple[float, ...]]
    intercepts: dict[str, float]
    scales: dict[str, float]
    target: str  # the mid-graph node that is intervened on
    sink: str  # the node whose distribution is checked

    def descendants(self, node: str) -> set[str]:
        out: set[str] = set()
        for name in self.names:
            if any(p == node or p in out for p in self.parents[name]):
                out.add(name)
        return out

    def moments(self, do: dict[str, float] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Closed-form mean vector and covariance matrix (optionally under hard do's)."""
        do = do or {}
        n = len(self.names)
        idx = {name: i for i, name in enumerate(self.names)}
        b = np.zeros((n, n))  # x = b @ x + c + e
        c = np.zeros(n)
        s = np.zeros(n)
        for name in self.names:
            i = idx[name]
            if name in do:
                c[i] = do[name]
                continue
            c[i] = self.intercepts[name]
            s[i] = self.scales[name]
            for p, w in zip(self.parents[name], self.weights[name]):
                b[i, idx[p]] = w
        a = np.linalg.inv(np.eye(n) - b)
        return a @ c, a @ np.diag(s**2) @ a.T

    def total_effect(self, cause: str, effect: str) -> float:
        """d effect / d cause along all directed paths (what a shift of the cause moves)."""
        n = len(self.names)
        idx = {name: i for i, name in enumerate(self.names)}
        b = np.zeros((n, n))
        for name in self.names:
            for p, w in zip(self.parents[name], self.weights[name]):
                b[idx[name], idx[p]] = w
        return float(np.linalg.inv(np.eye(n) - b)[idx[effect], idx[cause]])


def random_dag(n_nodes: int = N_NODES, seed: int = GRAPH_SEED) -> LinearGaussianDAG:
    """Node i draws 1 to 3 parents (2 on average) among the nodes before it; 2 roots."""
    rng = np.random.default_rng(seed)
    names = tuple(f"x{i:02d}" for i in range(n_nodes))
    parents: dict[str, tuple[str, ...]] = {}
    weights: dict[str, tuple[float, ...]] = {}
    intercepts: dict[str, float] = {}
    scales: dict[str, float] = {}
    for i, name in enumerate(names):
        k = 0 if i < 2 else min(i, int(rng.integers(1, 4)))
        chosen = sorted(rng.choice(i, size=k, replace=False)) if k else []
        parents[name] = tuple(names[j] for j in chosen)
        # |weight| in [0.4, 0.8] / sqrt(k) keeps the variances of deep nodes moderate.
        w = rng.uniform(0.4, 0.8, size=k) * rng.choice([-1.0, 1.0], size=k) / np.sqrt(max(k, 1))
        weights[name] = tuple(float(v) for v in w)
        intercepts[name] = float(np.round(rng.uniform(-1.0, 1.0), 3))
        scales[name] = float(np.round(rng.uniform(0.5, 1.5), 3))
    dag = LinearGaussianDAG(names, parents, weights, intercepts, scales, "", "")
    # The intervened node: in the middle third of the order, with parents, and the most
    # descendants (ties: the earliest). The checked node: the sink (a node without children)
    # that the intervened node moves most.
    middle = [m for m in names[n_nodes // 3 : 2 * n_nodes // 3] if parents[m]]
    target = max(middle, key=lambda m: (len(dag.descendants(m)), -names.index(m)))
    sinks = [m for m in dag.descendants(target) if not dag.descendants(m)]
    sink = max(sinks, key=lambda m: abs(dag.total_effect(target, m)))
    return LinearGaussianDAG(names, parents, weights, intercepts, scales, target, sink)


# ---------------------------------------------------------------------------------------------
# numpy reference


class NumpyReference:
    name = "numpy"

    def __init__(self, dag: LinearGaussianDAG):
        self.dag = dag
        self.steps = [
            (n, dag.parents[n], dag.weights[n], dag.intercepts[n], dag.scales[n]) for n in dag.names
        ]
        self.affected = dag.descendants(dag.target) | {dag.target}

    def prepare(self, n: int) -> None:
        pass

    def observational(self, n: int, seed: int) -> dict[str, np.ndarray]:
        rng = np.random.default_rng(seed)
        values: dict[str, np.ndarray] = {}
        for name, parents, weights, intercept, scale in self.steps:
            x = rng.standard_normal(n)
            x *= scale
            x += intercept
            for p, w in zip(parents, weights):
                x += w * values[p]
            values[name] = x
        return values

    def interventional(self, n: int, seed: int) -> dict[str, np.ndarray]:
        rng = np.random.default_rng(seed)
        values: dict[str, np.ndarray] = {}
        target = self.dag.target
        for name, parents, weights, intercept, scale in self.steps:
            if name == target:
                values[name] = np.full(n, DO_VALUE)
                continue
            x = rng.standard_normal(n)
            x *= scale
            x += intercept
            for p, w in zip(parents, weights):
                x += w * values[p]
            values[name] = x
        return values

    def counterfactual(self, n: int, seed: int) -> tuple[dict, dict]:
        """Both worlds share the noise; only the target's descendants are computed twice."""
        rng = np.random.default_rng(seed)
        factual: dict[str, np.ndarray] = {}
        shifted: dict[str, np.ndarray] = {}
        target, affected = self.dag.target, self.affected
        for name, parents, weights, intercept, scale in self.steps:
            e = rng.standard_normal(n)
            e *= scale
            x = e + intercept
            for p, w in zip(parents, weights):
                x += w * factual[p]
            factual[name] = x
            if name in affected:
                y = e + intercept
                for p, w in zip(parents, weights):
                    y += w * shifted[p]
                if name == target:
                    y += SHIFT
                shifted[name] = y
            else:
                shifted[name] = x
        return factual, shifted


# ---------------------------------------------------------------------------------------------
# causaltrace


class CausalTrace:
    """The intervention objects are built once per size, as the models are.

    ``interventional`` samples ``scm.intervene(Do(...))`` built in :meth:`prepare` (an
    intervention is a model transformation: transform once, sample many seeds);
    ``counterfactual`` passes the same ``Shift`` object to ``scm.simulate`` on every call, which
    then reuses the intervened model it built the first time. :class:`CausalTraceCold` pays
    both on every call.
    """

    name = "causaltrace"

    def __init__(self, dag: LinearGaussianDAG):
        from causaltrace import Exogenous, Linear, Node, Normal

        self.dag = dag
        self.nodes = []
        for name in dag.names:
            if dag.parents[name]:
                mech = Linear(
                    tuple(zip(dag.parents[name], dag.weights[name])), dag.intercepts[name]
                )
            elif dag.intercepts[name]:
                mech = Linear((), dag.intercepts[name])
            else:
                mech = Exogenous()
            self.nodes.append(
                Node(name, mech, parents=dag.parents[name], noise=Normal(dag.scales[name]))
            )
        self.size = 0

    def prepare(self, n: int) -> None:
        from causaltrace import SCM, Dimension, Do, Panel, Shift, TimeAxis

        if n != self.size:
            self.scm = self.do_scm = None  # one size at a time: the 1e6 panel is not small
            levels = tuple(f"u{i}" for i in range(n))
            panel = Panel.cross([Dimension("unit", levels)], TimeAxis("2026-01-01", 1))
            self.scm = SCM(self.nodes, panel, name="bench")
            self.do_scm = self.scm.intervene(Do(self.dag.target, value=DO_VALUE))
            self.shift = Shift(self.dag.target, delta=SHIFT)
            self.size = n

    def observational(self, n: int, seed: int):
        return self.scm.sample(seed)

    def interventional(self, n: int, seed: int):
        return self.do_scm.sample(seed)

    def counterfactual(self, n: int, seed: int):
        worlds = self.scm.simulate([self.shift], seed=seed)
        return worlds.counterfactual, worlds.factual  # (no shift, shifted)


class CausalTraceCold(CausalTrace):
    """A new intervention object on every call: ``intervene`` (a new SCM) runs every time."""

    name = "causaltrace*"

    def __init__(self, dag: LinearGaussianDAG, shared: CausalTrace):
        self.dag = dag
        self.shared = shared  # the same SCM as ``causaltrace``: not built twice

    def prepare(self, n: int) -> None:
        self.shared.prepare(n)

    observational = None  # identical to causaltrace's

    def interventional(self, n: int, seed: int):
        from causaltrace import Do

        return self.shared.scm.intervene(Do(self.dag.target, value=DO_VALUE)).sample(seed)

    def counterfactual(self, n: int, seed: int):
        from causaltrace import Shift

        worlds = self.shared.scm.simulate([Shift(self.dag.target, delta=SHIFT)], seed=seed)
        return worlds.counterfactual, worlds.factual


# ---------------------------------------------------------------------------------------------
# DoWhy gcm


class DoWhyGCM:
    name = "dowhy.gcm"

    def __init__(self, dag: LinearGaussianDAG):
        import networkx as nx
        from dowhy import gcm
        from dowhy.gcm.causal_models import PARENTS_DURING_FIT
        from dowhy.gcm.ml.regression import create_linear_regressor_with_given_parameters
        from scipy import stats

        try:
            from dowhy.graph import get_ordered_predecessors
        except ImportError:  # dowhy < 0.11 kept the graph helpers in gcm
            from dowhy.gcm.graph import get_ordered_predecessors

        self.gcm = gcm
        self.dag = dag
        graph = nx.DiGraph()
        graph.add_nodes_from(dag.names)
        graph.add_edges_from((p, n) for n in dag.names for p in dag.parents[n])
        scm = gcm.InvertibleStructuralCausalModel(graph)
        for name in dag.names:
            noise = gcm.ScipyDistribution(stats.norm, loc=0.0, scale=dag.scales[name])
            if not dag.parents[name]:
                root = gcm.ScipyDistribution(
                    stats.norm, loc=dag.intercepts[name], scale=dag.scales[name]
                )
                scm.set_causal_mechanism(name, root)
                continue
            # gcm feeds the parent columns in get_ordered_predecessors order (sorted names).
            order = get_ordered_predecessors(graph, name)
            by_parent = dict(zip(dag.parents[name], dag.weights[name]))
            model = create_linear_regressor_with_given_parameters(
                [by_parent[p] for p in order], dag.intercepts[name]
            )
            scm.set_causal_mechanism(name, gcm.AdditiveNoiseModel(model, noise_model=noise))
        for name in dag.names:
            # What gcm.fit would record; the mechanisms are set, not fitted (as gcm's error
            # message suggests for mechanisms built by hand).
            scm.graph.nodes[name][PARENTS_DURING_FIT] = get_ordered_predecessors(graph, name)
        self.scm = scm

    def prepare(self, n: int) -> None:
        pass

    def observational(self, n: int, seed: int):
        np.random.seed(seed)  # gcm draws from numpy's global random state
        return self.gcm.draw_samples(self.scm, n)

    def interventional(self, n: int, seed: int):
        np.random.seed(seed)
        return self.gcm.interventional_samples(
            self.scm, {self.dag.target: lambda x: DO_VALUE}, num_samples_to_draw=n
        )

    def counterfactual(self, n: int, seed: int):
        np.random.seed(seed)
        factual = self.gcm.draw_samples(self.scm, n)
        shifted = self.gcm.counterfactual_samples(
            self.scm, {self.dag.target: lambda x: x + SHIFT}, observed_data=factual
        )
        return factual, shifted


# ---------------------------------------------------------------------------------------------
# pgmpy


class Pgmpy:
    name = "pgmpy"

    def __init__(self, dag: LinearGaussianDAG):
        from pgmpy.factors.continuous import LinearGaussianCPD
        from pgmpy.models import LinearGaussianBayesianNetwork

        self.dag = dag
        edges = [(p, n) for n in dag.names for p in dag.parents[n]]
        model = LinearGaussianBayesianNetwork(edges)
        model.add_nodes_from(dag.names)
        for name in dag.names:
            beta = [dag.intercepts[name], *dag.weights[name]]
            model.add_cpds(LinearGaussianCPD(name, beta, dag.scales[name], list(dag.parents[name])))
        model.check_model()
        self.model = model

    def prepare(self, n: int) -> None:
        pass

    def observational(self, n: int, seed: int):
        return self.model.simulate(n, seed=seed)

    def interventional(self, n: int, seed: int):
        return self.model.simulate(n, do={self.dag.target: DO_VALUE}, seed=seed)

    counterfactual = None  # no counterfactual query for a LinearGaussianBayesianNetwork


# ---------------------------------------------------------------------------------------------
# Timing and checks


def column(result, name: str) -> np.ndarray:
    return np.asarray(result[name], dtype=np.float64).reshape(-1)


def time_calls(fn: Callable, n: int, seeds: range) -> float:
    """Seconds per call, over back-to-back calls with the given seeds (GC paused)."""
    gc.collect()
    gc.disable()
    try:
        t0 = time.perf_counter()
        for seed in seeds:
            out = fn(n, seed)
            del out
        elapsed = time.perf_counter() - t0
    finally:
        gc.enable()
    return elapsed / len(seeds)


def calls_per_sample(fn: Callable, n: int, target: float) -> int:
    """How many back-to-back calls make one timed sample of about ``target`` seconds."""
    t = time_calls(fn, n, range(1, 3))
    return max(1, min(1000, int(target / max(t, 1e-9))))


def sanity(impls, dag: LinearGaussianDAG, n: int) -> list[str]:
    """Sink mean/variance per implementation against the closed form, as z-scores.

    ``ok`` means every |z| < 4 and the counterfactual effect on the sink equals the closed form
    (shift times the total effect) in every unit, to 1e-9.
    """
    lines = []
    sink, target = dag.sink, dag.target
    mu, cov = dag.moments()
    mu_do, cov_do = dag.moments({target: DO_VALUE})
    k = dag.names.index(sink)
    effect = SHIFT * dag.total_effect(target, sink)
    lines.append(
        f"sanity at n={n}: node {sink} (a sink), intervened node {target} "
        f"(do := {DO_VALUE}; shift by {SHIFT}). Closed form: "
        f"obs mean {mu[k]:+.4f} var {cov[k, k]:.4f} | do mean {mu_do[k]:+.4f} "
        f"var {cov_do[k, k]:.4f} | counterfactual effect {effect:+.6f} in every unit"
    )
    lines.append("")
    lines.append(
        "| implementation | obs mean (z) | obs var (z) | do mean (z) | do var (z) "
        "| cf effect min .. max | check |"
    )
    lines.append("|---|---:|---:|---:|---:|---:|---|")

    def stat(x: np.ndarray, m: float, v: float) -> tuple[str, str, float]:
        zm = (x.mean() - m) / np.sqrt(v / x.size)
        zv = (x.var() - v) / (v * np.sqrt(2.0 / x.size))
        return f"{x.mean():+.4f} ({zm:+.1f})", f"{x.var():.4f} ({zv:+.1f})", max(abs(zm), abs(zv))

    for impl in impls:
        impl.prepare(n)
        worst, good = 0.0, True
        if impl.observational is not None:
            om, ov, z = stat(column(impl.observational(n, 1), sink), mu[k], cov[k, k])
            worst = max(worst, z)
        else:
            om = ov = "(as causaltrace)"
        dm, dv, z = stat(column(impl.interventional(n, 2), sink), mu_do[k], cov_do[k, k])
        worst = max(worst, z)
        if impl.counterfactual is not None:
            base, shifted = impl.counterfactual(n, 3)
            diff = column(shifted, sink) - column(base, sink)
            cf = f"{diff.min():+.6f} .. {diff.max():+.6f}"
            good = bool(np.allclose(diff, effect, rtol=0.0, atol=1e-9))
        else:
            cf = "n/a"
        verdict = "ok" if good and worst < 4.0 else "MISMATCH"
        lines.append(f"| {impl.name} | {om} | {ov} | {dm} | {dv} | {cf} | {verdict} |")
    return lines


def versions() -> str:
    out = [f"python {platform.python_version()}"]
    for pkg in ("causaltrace", "numpy", "scipy", "pandas", "networkx", "dowhy", "pgmpy"):
        try:
            out.append(f"{pkg} {version(pkg)}")
        except PackageNotFoundError:
            out.append(f"{pkg} (not installed)")
    return ", ".join(out)


def machine() -> str:
    cpu = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{os.cpu_count()} logical CPUs, {cpu}, {platform.system()} {platform.machine()}"


def load() -> str:
    """The 1/5/15-minute load averages: other processes on a shared machine skew timings."""
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "unknown"


def default_reps(n: int) -> int:
    return 41 if n <= 10_000 else (15 if n <= 200_000 else 7)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 100_000, 1_000_000])
    parser.add_argument("--reps", type=int, default=None, help="repetitions per size (median)")
    parser.add_argument("--only", nargs="+", default=None, help="implementations to run")
    parser.add_argument("--sanity-size", type=int, default=200_000)
    parser.add_argument(
        "--sample-seconds",
        type=float,
        default=0.02,
        help="a timed sample repeats the call back to back for about this long",
    )
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore")

    dag = random_dag()
    n_edges = sum(len(p) for p in dag.parents.values())
    ct = CausalTrace(dag)
    impls = [NumpyReference(dag), ct, CausalTraceCold(dag, ct), DoWhyGCM(dag), Pgmpy(dag)]
    if args.only:
        impls = [i for i in impls if i.name.rstrip("*") in args.only or i.name == "numpy"]
    print(f"machine: {machine()}")
    print(f"versions: {versions()}")
    print(f"load average at start (1/5/15 min): {load()}")
    print(
        f"model: {len(dag.names)} nodes, {n_edges} edges, seed {GRAPH_SEED}; "
        f"intervened node {dag.target} ({len(dag.descendants(dag.target))} descendants)"
    )

    rows = []
    for n in args.sizes:
        reps = args.reps or default_reps(n)
        for impl in impls:
            impl.prepare(n)
        times: dict[tuple[str, str], list[float]] = {}
        # Warm-up (untimed), then the number of calls per timed sample: small sizes repeat the
        # call back to back, so that a sample measures warm throughput, not one cold call.
        inner: dict[tuple[str, str], int] = {}
        for q in QUERIES:
            for impl in impls:
                fn = getattr(impl, q)
                if fn is not None:
                    fn(n, 0)
                    inner[(impl.name, q)] = calls_per_sample(fn, n, args.sample_seconds)
        for r in range(reps):
            for q in QUERIES:
                for impl in impls[r % len(impls) :] + impls[: r % len(impls)]:
                    fn = getattr(impl, q)
                    if fn is not None:
                        k = inner[(impl.name, q)]
                        seeds = range(1000 + r * k, 1000 + (r + 1) * k)
                        times.setdefault((impl.name, q), []).append(time_calls(fn, n, seeds))
        for q in QUERIES:
            med = {name: float(np.median(t)) for (name, qq), t in times.items() if qq == q}
            for impl in impls:
                rows.append((n, q, impl.name, med.get(impl.name), med["numpy"], med))
        print(f"  done n={n} ({reps} reps), load average {load()}", flush=True)

    print()
    print(
        "| units | query | implementation | time per call | units/s | time / numpy "
        "| time / causaltrace |"
    )
    print("|---:|---|---|---:|---:|---:|---:|")
    goals: dict[int, list[str]] = {}
    for n, q, name, t, ref, med in rows:
        t_ct = med.get("causaltrace")
        if t is None:
            print(f"| {fmt_units(n)} | {q} | {name} | n/a | n/a | n/a | n/a |")
            continue
        vs_ct = f"{t / t_ct:.2f}x" if t_ct else "n/a"
        print(
            f"| {fmt_units(n)} | {q} | {name} | {fmt_time(t)} | {n / t:.3g} | {t / ref:.2f}x "
            f"| {vs_ct} |"
        )
        if name == "causaltrace":
            ok = t / ref <= 1.3
            goals.setdefault(n, []).append(f"{q} {t / ref:.2f}x {'ok' if ok else 'MISSED'}")
    print()
    print("goal: causaltrace within 1.3x of the numpy reference (the causaltrace row):")
    for n, items in goals.items():
        print(f"  {fmt_units(n)} units: " + "; ".join(items))
    print()
    for line in sanity(impls, dag, args.sanity_size):
        print(line)
    return 0


def fmt_units(n: int) -> str:
    exponent = len(str(n)) - 1
    return f"10^{exponent}" if n == 10**exponent else str(n)


def fmt_time(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:.0f} us"
    if seconds < 1.0:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds:.2f} s"


if __name__ == "__main__":
    raise SystemExit(main())
