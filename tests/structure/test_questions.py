"""The research-question API (causaltrace.structure.questions): the cause -> node mapping read
off the domain's own intervention builders, and identification of each cause's effect, on the
example domain as shipped (every cause acts on a latent node: unidentified, saying so) and on a
copy where one cause's node is observed (then identified, with the panel coordinate that
confounds it in the adjustment)."""

from __future__ import annotations

import dataclasses

import pytest

from causaltrace import SCM
from causaltrace.episodes.domain import load_domain
from causaltrace.errors import CausalTraceError
from causaltrace.structure.questions import cause_nodes, identify_causes, main


@pytest.fixture(scope="module")
def scm():
    return load_domain("example").scm


def test_each_cause_maps_to_the_node_its_builder_scales(scm):
    # domains/example/domain.py: scale_down("demand"), ("checkout_rate"), ("tag_fire_rate")
    assert cause_nodes(scm) == {
        "TRAFFIC_DROP": ("demand",),
        "CHECKOUT_BUG": ("checkout_rate",),
        "TRACKING_LOSS": ("tag_fire_rate",),
    }


def test_a_cause_on_a_latent_node_is_unidentified_and_says_why(scm):
    answers = identify_causes(scm, "tracked_orders")
    assert [a.cause for a in answers] == ["TRAFFIC_DROP", "CHECKOUT_BUG", "TRACKING_LOSS"]
    for answer in answers:
        assert not answer.identified and answer.latent == answer.nodes
        assert "latent" in answer.identification.reason
        assert answer.row()["identified"] == "unidentified"


def test_observing_the_node_makes_the_cause_identifiable(scm):
    nodes = [
        dataclasses.replace(n, observed=True) if n.name == "checkout_rate" else n
        for n in scm.nodes.values()
    ]
    seen = SCM(nodes, scm.panel, list(scm.intervention_points.values()), name="example-observed")
    by_cause = {a.cause: a for a in identify_causes(seen, "tracked_orders")}
    bug = by_cause["CHECKOUT_BUG"]
    assert bug.identified and bug.latent == ()
    assert bug.identification.kind == "backdoor"
    # the checkout rate and the visits both vary by channel: the coordinate confounds
    assert "channel" in bug.identification.adjustment_set
    assert not by_cause["TRACKING_LOSS"].identified  # its node is still latent


@pytest.mark.parametrize(
    ("outcome", "says"),
    [("revenue", "is not a node of"), ("checkout_rate", "is latent")],
)
def test_a_bad_outcome_names_what_is_wrong(scm, outcome, says):
    with pytest.raises(CausalTraceError, match=says):
        identify_causes(scm, outcome)


def test_the_command_prints_the_table_and_the_count(capsys):
    main(["--domain", "example", "--outcome", "orders"])
    printed = capsys.readouterr().out
    assert "| CHECKOUT_BUG | checkout_rate | checkout_rate | unidentified |" in printed
    assert printed.rstrip().endswith("0 of 3 causes identifiable on orders.")
