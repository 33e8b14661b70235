import numpy as np
import pytest

from causaltrace import Domain, DomainError, available_domains, load_domain
from causaltrace.cli import main


def test_example_domain_is_registered():
    assert available_domains()["example"] == "domains.example:ExampleDomain"
    domain = load_domain("example", {"days": 28})
    assert isinstance(domain, Domain)
    assert domain.scm.panel.n_time == 28
    assert set(domain.scm.intervention_points) == {"TRAFFIC_DROP", "CHECKOUT_BUG", "TRACKING_LOSS"}


def test_load_by_path_and_errors():
    assert load_domain("domains.example:ExampleDomain").name == "example"
    with pytest.raises(DomainError, match="unknown domain 'nope'.*example"):
        load_domain("nope")
    with pytest.raises(DomainError, match="cannot load domain"):
        load_domain("domains.example:Missing")
    with pytest.raises(DomainError, match="not a Domain subclass"):
        load_domain("numpy:ndarray")


def test_example_tracking_loss_leaves_real_orders(rng):
    scm = load_domain("example").scm
    draw = scm.point("TRACKING_LOSS").sample(rng, scm.panel)
    worlds = scm.simulate(scm.interventions_for(draw), seed=3)
    assert np.array_equal(worlds.factual["orders"], worlds.counterfactual["orders"])
    lost = worlds.effect("tracked_orders")
    assert lost.sum() < 0
    assert np.all(lost[~draw.slice.mask(scm.panel)] == 0)


def test_cli_simulate_prints_summary(capsys):
    assert main(["simulate", "--domain", "example", "--seed", "1", "--cause", "TRAFFIC_DROP"]) == 0
    out = capsys.readouterr().out
    assert "drawn cause: {'point': 'TRAFFIC_DROP'" in out
    visits = next(line for line in out.splitlines() if line.startswith("visits"))
    factual, counterfactual = (float(v) for v in visits.split()[1:3])
    assert factual < counterfactual
