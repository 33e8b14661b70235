"""The domain-free teacher (causaltrace.agents.investigator): its spec's errors, its notebook's
arithmetic against an independent computation, its declared slice shapes against the domains'
priors, and its diagnoses on generated episodes of the example domain (default config, three
seeds), every number it writes printed by a cell above it."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from omegaconf import OmegaConf

from causaltrace.agents import make_agent
from causaltrace.agents.investigator import investigation_spec
from causaltrace.agents.investigator.agent import alerted_kpi
from causaltrace.agents.investigator.notebook import HELPER, read_shift, shift_cell
from causaltrace.errors import CausalTraceError

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_TEACHER = ROOT / "domains" / "example" / "conf" / "agent" / "example_teacher.yaml"
SHOP_TEACHER = ROOT / "docs" / "tutorial" / "conf" / "agent" / "shop_teacher.yaml"
SERVICES_TEACHER = ROOT / "domains" / "services" / "conf" / "agent" / "services_investigator.yaml"


def _spec_config(path: Path) -> dict:
    return OmegaConf.to_container(OmegaConf.load(path))["spec"]


@pytest.mark.parametrize(
    ("edit", "named"),
    [
        (lambda c: c.pop("table"), "table: missing"),
        (lambda c: c.update(window=1), "window"),
        (lambda c: c.update(baseline=3), "baseline"),  # less than one period of 7
        (lambda c: c["causes"]["CHECKOUT_BUG"].update(direction=0), "CHECKOUT_BUG.direction"),
        (lambda c: c["causes"]["TRACKING_LOSS"].update(moves=["revenue"]), "TRACKING_LOSS.moves"),
        (lambda c: c["causes"]["CHECKOUT_BUG"].update(slices=[["a", "b", "c"]]), "slices[0]"),
        (lambda c: c["causes"]["CHECKOUT_BUG"].update(numerator="orders; drop"), "numerator"),
        (lambda c: c["causes"]["CHECKOUT_BUG"].update(colour=1), "unknown keys"),
        (lambda c: c.update(no_signal="CHECKOUT_BUG"), "no_signal"),
        (lambda c: c.update(prefer="loudest"), "prefer"),
        (lambda c: c.update(colour=1), "unknown keys"),
        (lambda c: c.update(views={"v": {"from": ["a", "b"]}}), "views.v.keys"),
        (lambda c: c.update(views={"v": {"from": "a", "on": ["x"]}}), "views.v: unknown keys"),
        (lambda c: c["causes"]["CHECKOUT_BUG"].update(min_change=-1), "min_change"),
        (lambda c: c["causes"]["CHECKOUT_BUG"].update(levels={"channel": "email"}), "levels"),
    ],
)
def test_a_malformed_spec_is_refused_naming_the_key(edit, named):
    config = _spec_config(EXAMPLE_TEACHER)
    edit(config)
    with pytest.raises(CausalTraceError, match="investigation spec") as error:
        investigation_spec(config)
    assert named in str(error.value)


def test_the_agent_without_a_spec_says_what_it_needs():
    with pytest.raises(CausalTraceError, match="needs a 'spec'"):
        make_agent("investigator", {})


@pytest.mark.parametrize(
    ("path", "domain"),
    [(EXAMPLE_TEACHER, "example"), (SHOP_TEACHER, "shop"), (SERVICES_TEACHER, "services")],
)
def test_declared_slice_shapes_are_the_domains_priors(path, domain):
    """The spec is model knowledge; it must not drift from the domain's intervention priors."""
    if domain == "shop":
        sys.path.insert(0, str(ROOT / "docs" / "tutorial"))
        from shop_domain import ShopDomain

        made = ShopDomain()
    else:
        from causaltrace.episodes.domain import load_domain

        made = load_domain(domain)
    spec = investigation_spec(_spec_config(path))
    points = made.scm.intervention_points
    no_signal = {spec.no_signal} - {None}
    assert {s.cause for s in spec.signatures} | no_signal == set(points)
    for sig in spec.signatures:
        assert set(sig.slices) == set(points[sig.cause].prior.slice_dims), sig.cause
        for dim, levels in sig.levels:  # a misspelt level would silently drop its rows
            assert set(levels) <= set(made.scm.panel.dimension(dim).levels), (sig.cause, dim)


def test_the_alerted_kpi_is_read_longest_words_first():
    spec = investigation_spec(_spec_config(EXAMPLE_TEACHER))
    page = "Monitor rule text about orders.\nALERT: tracked orders (channel=email) down 20%.\n"
    assert alerted_kpi(page, spec) == "tracked_orders"
    assert alerted_kpi(page.replace("tracked orders", "orders"), spec) == "orders"
    assert alerted_kpi("ALERT: visits down", spec) is None


def _independent_z(frame, level_mask, num, den, window, gap, baseline, period):
    """The z of the level's daily log rate against the rest's, each day less the baseline's
    mean at its weekday: the median move after over its standard error under no change (the
    baseline's residual variance with one mean per weekday fitted; pi/2 for a median; the
    weekday means' own error), written with loops instead of pandas' groupby."""
    days = np.sort(frame["date"].unique())[-window - gap - baseline :]

    def log_rate(mask):
        sub = frame[mask]
        top = np.array([sub.loc[sub["date"] == d, num].sum() for d in days], float)
        bottom = np.array([sub.loc[sub["date"] == d, den].sum() for d in days], float)
        return np.log(top + 0.5) - np.log(bottom + 0.5)

    daily = log_rate(level_mask) - log_rate(~level_mask)
    phase = np.arange(len(days)) % period
    base = np.array([daily[:baseline][phase[:baseline] == p].mean() for p in range(period)])
    resid = daily - base[phase]
    a, b = resid[-window:], resid[:baseline]
    s2 = (b**2).sum() / (baseline - period)
    per_phase = baseline // period  # baseline values behind each weekday's mean
    phase_error = sum(1 / per_phase for _ in range(window)) / window**2  # one day per weekday
    return np.median(a) / np.sqrt(np.pi / 2 * s2 / window + s2 * phase_error)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_shift_prints_the_z_an_independent_computation_gives(seed):
    """A planted 50% fall of orders per visit in one channel over the last week: the cell
    names that channel first, and its printed z (one decimal) is the independent one rounded."""
    rng = np.random.default_rng(seed)
    days = pd.date_range("2026-01-05", periods=56, freq="D")
    channels, regions = ["search", "social", "email"], ["north", "south"]
    grid = pd.MultiIndex.from_product(
        [days, channels, regions], names=["date", "channel", "region"]
    )
    frame = grid.to_frame(index=False)
    weekday = 1 + 0.3 * np.sin(2 * np.pi * frame["date"].dt.day_of_week / 7)
    frame["visits"] = rng.poisson(400 * weekday)
    rate = np.where((frame["channel"] == "social") & (frame["date"] >= days[-7]), 0.025, 0.05)
    frame["orders"] = rng.binomial(frame["visits"], rate)
    spec = investigation_spec(_spec_config(EXAMPLE_TEACHER))
    namespace = {"shop_daily": frame}
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(shift_cell(spec, [spec.signature("CHECKOUT_BUG")], "channel", define=True), namespace)
    readings = read_shift(printed.getvalue(), "channel")
    assert readings and readings[0].level == "social"
    expected = _independent_z(
        frame, (frame["channel"] == "social").to_numpy(), "orders", "visits", 7, 14, 28, 7
    )
    assert float(readings[0].z) == pytest.approx(expected, abs=0.05 + 1e-9)  # printed at 0.1
    # ~40 orders a day in the channel falling to ~20: a log move of 0.69 over a daily spread
    # near 0.27 (Poisson), so z near -0.69 / (0.27 * sqrt(pi/2/7 + 1/28)) = -4.7; -3 leaves
    # room for the spread's estimate from 21 degrees of freedom and the median's scatter.
    assert expected < -3


def test_the_helper_defines_only_shift():
    namespace: dict = {}
    exec(HELPER, namespace)
    assert {k for k in namespace if not k.startswith("__")} == {"np", "pd", "shift"}


def _generate(tmp: Path, domain: str, dataset: str, seed: int, n: int) -> Path:
    from causaltrace.apps.configs import compose_config
    from causaltrace.datasets.generation import Job, run

    out = tmp / f"{domain}-{seed}"
    overrides = [
        f"domain={domain}",
        f"dataset={dataset}",
        f"dataset.seed={seed}",
        f"dataset.n_episodes={n}",
        f"dataset.shard_size={n}",
        "++dataset.materialize=false",
        f"out_dir={out}",
    ]
    run(Job.from_config(compose_config("generate", overrides)), show_progress=False)
    return out


def _diagnose(tmp: Path, config: Path, domain: str, dataset: str, seeds, n: int):
    """The teacher on generated splits: (episodes named exactly, their exported SFT rows)."""
    from causaltrace.env import DatasetSource
    from causaltrace.eval import evaluate
    from causaltrace.training.export import export_sft

    agent = make_agent("investigator", {"spec": _spec_config(config)})
    exact, rows = 0, []
    for seed in seeds:
        data = _generate(tmp, domain, dataset, seed, n)
        run_dir = tmp / f"run-{domain}-{seed}"
        summary = asyncio.run(
            evaluate(agent, DatasetSource(data), run_dir, progress=False, n_boot=50)
        )
        assert len(summary.records) == n and not summary.failed
        exact += sum(bool(r["full_attribution"]) for r in summary.records)
        out = tmp / f"sft-{domain}-{seed}.jsonl"
        export_sft([run_dir], out)
        rows += [json.loads(line) for line in out.read_text().splitlines()]
    return exact, rows


def _assert_rows_compute_what_they_cite(rows):
    from causaltrace.training.grounding import grounding_report

    report = grounding_report(rows)
    assert report["numbers_cited"] > 10 * len(rows) and report["rows_with_ungrounded"] == 0
    for row in rows:
        calls = [c for m in row["messages"] for c in m.get("tool_calls") or ()]
        assert all(c["function"]["name"] in ("python", "submit") for c in calls)
        assert sum(c["function"]["name"] == "python" for c in calls) >= 1


@pytest.mark.sandbox
@pytest.mark.slow
def test_the_teacher_diagnoses_example_episodes_citing_only_printed_numbers(tmp_path):
    """Default example domain, three seeds, 12 episodes each. Over a 60-episode run the
    teacher named cause and slice on every episode (docs/teacher.md); the bar, 32 of 36,
    allows four misses: with a true miss rate of 3%, four or more in 36 has probability under
    0.03 (binomial), so the test fails only if the teacher got worse. Every number its words
    cite is one a tool printed above it (the grounding checker: no exception)."""
    exact, rows = _diagnose(tmp_path, EXAMPLE_TEACHER, "example", "example_small", (3, 4, 5), 12)
    assert exact >= 32
    _assert_rows_compute_what_they_cite(rows)


@pytest.mark.sandbox
@pytest.mark.slow
def test_the_teacher_diagnoses_services_episodes_from_declared_signatures(tmp_path):
    """The services domain's default config, two seeds, 9 episodes each (its nine causes by
    the prior composition). On services_test (198 episodes) the teacher named 187 exactly
    (a miss rate near 6%); 14 of 18 allows four misses, which at that rate has probability
    near 0.03 (binomial), so the test fails only if the teacher got worse."""
    exact, rows = _diagnose(tmp_path, SERVICES_TEACHER, "services", "services_smoke", (201, 202), 9)
    assert exact >= 14
    _assert_rows_compute_what_they_cite(rows)
