"""Issue 28, item 2: estimands as expressions, evaluated, checked against the do-operator.

Every identified answer's ``expression`` (the back-door and front-door formulas, ID's and
IDC's expressions) is evaluated on the observational joint of random discrete Bayesian
networks with hidden nodes marginalized, and compared with the interventional distribution
pgmpy computes on the full model with its do-operator (``model.do(x)``, then variable
elimination conditioned on ``x``: the mutilated model). Graphs are given to ``identify`` as
pgmpy networks with ``latents``, so the graph-only entry point is what is tested.
"""

from __future__ import annotations

import itertools
import warnings

import networkx as nx
import numpy as np
import pandas as pd
import pytest

from causaltrace.errors import CausalTraceError, GraphError
from causaltrace.structure.admg import latent_projection
from causaltrace.structure.estimands import (
    Distribution,
    Fraction,
    Probability,
    Product,
    Sum,
    free_variables,
)
from causaltrace.structure.evaluation import JointDistribution, evaluate, table
from causaltrace.structure.id_algorithm import id_expression, idc_expression
from causaltrace.structure.identification import NotIdentifiable, identify, identify_effect

# Every probability below is a sum of products of CPT entries, each in [0.1, 1] (rows are
# 0.2 + Dirichlet, normalized: an entry is at least 0.2 / 1.6 with three states), so ratios
# divide by marginals far from 0, and the few hundred float64 operations per value leave an
# error of order 1e-15; 1e-12 is the bound with room.
TOLERANCE = 1e-12

NAPKIN_EDGES = [("W1", "W2"), ("W2", "X"), ("X", "Y")]
NAPKIN_LATENT = [("W1", "X"), ("W1", "Y")]
NAPKIN = "[sum_{W1} [[P(W1) P(X | W1,W2) P(Y | W1,W2,X)]]](Y | X)"


def _pgmpy():
    with warnings.catch_warnings():  # pgmpy 1.x warns about its own deprecations
        warnings.simplefilter("ignore")
        from pgmpy.factors.discrete import TabularCPD
        from pgmpy.inference import VariableElimination
        from pgmpy.models import DiscreteBayesianNetwork
    return TabularCPD, VariableElimination, DiscreteBayesianNetwork


def random_network(seed: int, edges=None, latents=None):
    """A discrete Bayesian network: 4-6 observed nodes (2-3 states), random edges forward in
    a random order, 1-2 hidden binary nodes each a parent of two observed ones; CPT rows are
    0.2 + Dirichlet(1), normalized (positive, so every conditional is defined)."""
    TabularCPD, _, Network = _pgmpy()
    rng = np.random.default_rng(seed)
    if edges is None:
        n = int(rng.integers(4, 7))
        names = [f"V{i}" for i in range(n)]
        edges = [(names[i], names[j]) for i, j in itertools.combinations(range(n), 2)]
        edges = [e for e in edges if rng.random() < 0.45]
        latents = []
        for k in range(int(rng.integers(1, 3))):
            a, b = rng.choice(n, 2, replace=False)
            latents.append(f"U{k}")
            edges += [(f"U{k}", names[a]), (f"U{k}", names[b])]
        nodes = names + latents
    else:
        nodes = sorted({v for e in edges for v in e})
    model = Network(edges, latents=set(latents))
    model.add_nodes_from(nodes)
    cards = {v: 2 if v in latents else int(rng.integers(2, 4)) for v in nodes}
    cpds = []
    for v in nodes:
        parents = sorted(model.get_parents(v))
        columns = int(np.prod([cards[p] for p in parents])) if parents else 1
        rows = 0.2 + rng.dirichlet(np.ones(cards[v]), size=columns).T
        cpds.append(
            TabularCPD(
                v,
                cards[v],
                rows / rows.sum(axis=0),
                evidence=parents or None,
                evidence_card=[cards[p] for p in parents] or None,
            )
        )
    model.add_cpds(*cpds)
    assert model.check_model()
    return model, cards


def observational(model) -> JointDistribution:
    """P(V) over the observed nodes: the hidden ones marginalized by variable elimination."""
    _, VariableElimination, _ = _pgmpy()
    observed = [v for v in model.nodes if v not in model.latents]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        joint = VariableElimination(model).query(observed, joint=True, show_progress=False)
    return JointDistribution.from_factor(joint)


def interventional(model, cards, ts, os, zs, variables) -> np.ndarray:
    """P(os | do(ts), zs) from pgmpy's do-operator on the full model, as an array over
    ``variables`` (constant along any variable that is not a treatment, outcome or given)."""
    _, VariableElimination, _ = _pgmpy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        infer = VariableElimination(model.do(list(ts)))
        out = np.empty([cards[v] for v in variables])
        for xs in itertools.product(*(range(cards[t]) for t in ts)):
            f = infer.query([*os, *zs], evidence=dict(zip(ts, xs)), joint=True, show_progress=False)
            values = f.values
            if zs:  # condition on zs: P(os, zs | do) / P(zs | do)
                axes = tuple(f.variables.index(o) for o in os)
                values = values / values.sum(axis=axes, keepdims=True)
            rest = [v for v in variables if v not in ts]
            present = [v for v in rest if v in f.variables]
            values = np.transpose(values, [f.variables.index(v) for v in present])
            values = values.reshape([cards[v] if v in present else 1 for v in rest])
            at = tuple(xs[ts.index(v)] if v in ts else slice(None) for v in variables)
            out[at] = np.broadcast_to(values, out[at].shape)
    return out


def check_against_do(model, cards, joint, expression, ts, os, zs=()) -> None:
    """The estimand's table equals pgmpy's P(os | do(ts), zs) at every value of every free
    variable (a line-3 variable included: the answer must not depend on it)."""
    est = table(expression, joint)
    assert set(est.variables) == set(free_variables(expression))
    assert set(est.variables) <= set(ts) | set(os) | set(zs) | set(joint.variables)
    variables = tuple(dict.fromkeys((*ts, *os, *zs, *est.variables)))
    truth = interventional(model, cards, list(ts), list(os), list(zs), variables)
    present = [v for v in variables if v in est.variables]
    values = np.transpose(est.values, [est.variables.index(v) for v in present])
    values = values.reshape([cards[v] if v in present else 1 for v in variables])
    np.testing.assert_allclose(np.broadcast_to(values, truth.shape), truth, rtol=0, atol=TOLERANCE)


def _queries(model, rng):
    observed = sorted(v for v in model.nodes if v not in model.latents)
    for _ in range(6):
        t = str(rng.choice(observed))
        later = sorted(nx.descendants(model, t) & set(observed))
        if not later:
            continue
        o = str(rng.choice(later))
        rest = [v for v in observed if v not in (t, o)]
        yield (t,), (o,), ()
        if rest:
            yield (t,), (o,), (str(rng.choice(rest)),)  # a conditional effect: IDC
        if len(rest) >= 2:
            second = str(rng.choice(rest))
            others = [v for v in rest if v != second]
            yield (t, second), (o, str(rng.choice(others))), ()  # several nodes each


def test_identified_estimands_equal_the_do_operator():
    """30 random networks, up to 18 queries each: every identified answer's expression, of
    every kind, equals the true interventional distribution to 1e-12."""
    rng = np.random.default_rng(2028)
    kinds: dict[str, int] = {}
    hedges = 0
    for seed in range(30):
        model, cards = random_network(seed)
        joint = observational(model)
        for ts, os, zs in _queries(model, rng):
            try:
                answer = identify(model, list(ts), list(os), given=list(zs))
            except NotIdentifiable:
                hedges += 1
                continue
            kind = answer.kind + ("+idc" if zs else "") + ("+sets" if len(ts) > 1 else "")
            kinds[kind] = kinds.get(kind, 0) + 1
            check_against_do(model, cards, joint, answer.expression, ts, os, zs)
            if answer.kind in ("backdoor", "frontdoor"):  # ID's own answer, checked too
                projection = latent_projection(model, joint.variables)
                check_against_do(model, cards, joint, id_expression(projection, ts, os), ts, os, zs)
                kinds["id-of-criteria"] = kinds.get("id-of-criteria", 0) + 1
    # The sample is not vacuous: each path was taken (counts fixed by the seeds).
    for kind in ("backdoor", "frontdoor", "id+idc", "id+sets", "id-of-criteria"):
        assert kinds.get(kind, 0) >= 3, kinds
    assert hedges >= 3, hedges


def test_napkin_in_two_lines():
    g = nx.DiGraph(NAPKIN_EDGES)
    answer = identify(g, "X", "Y", latent_edges=NAPKIN_LATENT)
    assert answer.kind == "id" and answer.estimand == NAPKIN == str(answer.expression)
    # Free variables: the outcome, the treatment, and W2, which ID's line 3 fixed.
    assert set(answer.expression.free_variables) == {"X", "Y", "W2"}
    # A pgmpy DAG with latents gives the same.
    _, _, Network = _pgmpy()
    dag = Network([*NAPKIN_EDGES, ("U", "W1"), ("U", "X"), ("V", "W1"), ("V", "Y")])
    dag.latents = {"U", "V"}
    assert identify(dag, "X", "Y").estimand == NAPKIN


def test_napkin_value_equals_the_do_operator_at_every_w2():
    edges = [*NAPKIN_EDGES, ("U1", "W1"), ("U1", "X"), ("U2", "W1"), ("U2", "Y")]
    model, cards = random_network(7, edges=edges, latents=["U1", "U2"])
    joint = observational(model)
    expression = identify(model, "X", "Y").expression
    check_against_do(model, cards, joint, expression, ("X",), ("Y",))
    # The napkin's W2 is free: the value at W2 = 0 and W2 = 1 agree (and with the truth).
    values = [evaluate(expression, joint, {"X": 1, "Y": 0, "W2": w}) for w in (0, 1)]
    assert values[0] == pytest.approx(values[1], abs=TOLERANCE)


def test_bow_is_not_identifiable():
    with pytest.raises(NotIdentifiable, match="hedge"):
        identify(nx.DiGraph([("X", "Y")]), "X", "Y", latent_edges=[("X", "Y")])
    # identify_effect reports it instead of raising (to survey many pairs).
    answer = identify_effect(nx.DiGraph([("X", "Y")]), "X", "Y", latent_edges=[("X", "Y")])
    assert answer.kind == "unidentified" and answer.expression is None


def test_idc_moves_a_conditioning_node_to_the_treatment():
    # Front-door graph: (Y _|_ M | X) once the edges into X and out of M are cut, so
    # P(y | do(x), m) = P(y | do(x, m)) (rule 2): the front-door's inner sum, no fraction.
    g = nx.DiGraph([("X", "M"), ("M", "Y")])
    answer = identify(g, "X", "Y", given="M", latent_edges=[("X", "Y")])
    assert answer.kind == "id" and answer.given == ("M",)
    assert str(answer.expression) == "[sum_{X} [[P(X) P(Y | X,M)]]]"
    # A child of the outcome cannot become a treatment: P(y, c | do(x)) / sum_y of it.
    answer = identify(nx.DiGraph([("X", "Y"), ("Y", "C")]), "X", "Y", given="C")
    assert isinstance(answer.expression, Fraction)
    joint = "([sum_{C} [P(X,Y,C)]](Y | X)) (P(C | X,Y))"
    assert str(answer.expression) == f"({joint}) / (sum_{{Y}} [{joint}])"


def test_rendering_and_free_variables():
    p = Probability(("Y",), ("X", "Z"))
    assert str(p) == "P(Y | X,Z)" and str(Probability(("Z",))) == "P(Z)"
    adjust = Sum(("Z",), Product((p, Probability(("Z",)))))
    assert str(adjust) == "sum_{Z} [P(Y | X,Z) P(Z)]"
    assert adjust.free_variables == ("Y", "X")
    derived = Distribution(
        Product((Probability(("A",)), Probability(("B",), ("A", "F")))), ("A", "B")
    )
    cond = Probability(("B",), ("A",), derived)
    assert str(cond) == "[P(A) P(B | A,F)](B | A)"
    assert set(cond.free_variables) == {"A", "B", "F"}  # F is fixed, not summed
    assert str(Product((p, p), grouped=True)) == "(P(Y | X,Z)) (P(Y | X,Z))"
    assert str(Fraction(p, Sum(("Y",), p))) == "(P(Y | X,Z)) / (sum_{Y} [P(Y | X,Z)])"


def test_evaluation_on_a_data_frame():
    """Empirical frequencies of a frame: the back-door formula by hand equals evaluate()."""
    rng = np.random.default_rng(0)
    z = rng.integers(0, 2, 4000)
    x = (rng.random(4000) < 0.2 + 0.6 * z).astype(int)
    y = (rng.random(4000) < 0.1 + 0.3 * x + 0.4 * z).astype(int)
    frame = pd.DataFrame({"Z": z, "X": x, "Y": y})
    joint = JointDistribution.from_frame(frame)
    answer = identify(nx.DiGraph([("Z", "X"), ("Z", "Y"), ("X", "Y")]), "X", "Y")
    assert answer.adjustment_set == {"Z"}
    stratum = [frame["Z"].to_numpy() == k for k in (0, 1)]
    treated = frame["X"].to_numpy() == 1
    by_hand = sum(frame["Y"][s & treated].mean() * s.mean() for s in stratum)
    got = evaluate(answer.expression, joint, {"X": 1, "Y": 1})
    assert got == pytest.approx(by_hand, abs=1e-12)  # the same sums, in another order
    with pytest.raises(CausalTraceError, match="free variable"):
        evaluate(answer.expression, joint, {"X": 1})
    with pytest.raises(CausalTraceError, match="not a state"):
        evaluate(answer.expression, joint, {"X": 2, "Y": 1})
    with pytest.raises(CausalTraceError, match="not in the joint"):
        evaluate(answer.expression, joint, {"X": 1, "Y": 1, "Q": 0})


def test_graph_input_errors():
    with pytest.raises(GraphError, match="cycle"):
        identify(nx.DiGraph([("X", "Y"), ("Y", "X")]), "X", "Y")
    with pytest.raises(GraphError, match="'Q'"):
        identify(nx.DiGraph([("X", "Y")]), "X", "Q")
    with pytest.raises(GraphError, match="share"):
        identify(nx.DiGraph([("X", "Y"), ("Y", "Z")]), "X", "Y", given=["Y"])
    with pytest.raises(GraphError, match="with_panel"):
        identify_effect(nx.DiGraph([("X", "Y")]), "X", "Y", with_panel=True)


def test_idc_expression_on_a_projection():
    # The same query through the projection-level function, for callers with an ADMG.
    g = nx.DiGraph([("X", "Y"), ("Y", "C"), ("H", "X"), ("H", "C")])
    projection = latent_projection(g, ["X", "Y", "C"])
    expression = idc_expression(projection, ["X"], ["Y"], ["C"])
    assert set(free_variables(expression)) == {"X", "Y", "C"}
