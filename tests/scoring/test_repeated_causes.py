"""Answers that can hold what happened (issue 39): a cause named on several slices is valid, the
same entry twice is not, and set rewards match answered entries to true causes one to one by
the assignment of most credit. Old answers (no kind repeated) score what the old dict-keyed
rule gave, on the committed splits' labels."""

from __future__ import annotations

import math
from functools import lru_cache
from pathlib import Path

import pytest

from causaltrace import load_domain
from causaltrace.datasets.reading import DatasetSource
from causaltrace.episodes.answers import AnswerSpace
from causaltrace.episodes.labels import ConcurrentCause, OracleLabel
from causaltrace.scoring import CompositeReward, parse_answer
from causaltrace.scoring.metrics import EpisodeOutcome
from causaltrace.scoring.rewards import get_reward

ROOT = Path(__file__).resolve().parents[2]
BID = "BID_MODIFIER_CHANGE"
MOBILE, US_WEST = "device=mobile", "geo=us_west"
TERMS = ("cause_accuracy", "full_attribution", "slice_jaccard", "graded_attribution")


@lru_cache(maxsize=1)
def ads_space() -> AnswerSpace:
    return AnswerSpace.from_scm(load_domain("ads").scm)


def label(*pairs: tuple[str, str | None]) -> OracleLabel:
    (cause, sl), *rest = pairs
    also = tuple(ConcurrentCause(c, "delivery", s, 30, None, 0.4, "step") for c, s in rest)
    return OracleLabel("ads-1", cause, "delivery", sl, 28, None, 0.6, "step", also=also)


def causes(*pairs: tuple[str, str | None]) -> dict:
    return {"causes": [{"root_cause": c, "slice": s} for c, s in pairs]}


def terms(obj, lab, space=None, **params) -> dict[str, float]:
    parsed = parse_answer(obj, space or ads_space())
    assert parsed.ok, parsed.error
    out = {t: get_reward(t).fn(parsed, lab) for t in TERMS}
    out["graded_0.25"] = get_reward("graded_attribution").fn(parsed, lab, extra_penalty=0.25)
    out["set_exact"] = EpisodeOutcome.from_parsed(parsed, lab).set_exact
    return out


TWO_BIDS = label((BID, MOBILE), (BID, US_WEST))


# -- parsing -----------------------------------------------------------------------------------
def test_one_cause_on_two_slices_is_a_valid_answer():
    parsed = parse_answer(causes((BID, US_WEST), (BID, MOBILE)), ads_space())
    assert parsed.ok, parsed.error
    assert [(c.root_cause, c.slice) for c in parsed.answer.causes] == [
        (BID, US_WEST),
        (BID, MOBILE),
    ]
    assert parse_answer(parsed.answer.to_dict(), ads_space()).answer == parsed.answer


@pytest.mark.parametrize(
    "obj, error",
    [
        (
            causes((BID, MOBILE), ("BUDGET_CAP", None), (BID, "device = mobile")),
            f"causes[2] names {BID} again (first at causes[0]) with the same slice 'device=mobile'",
        ),
        (  # the same slice as an object and as text: the same canonical slice
            {
                "causes": [
                    {"root_cause": BID, "slice": {"device": "mobile", "geo": "us_west"}},
                    {"root_cause": BID, "slice": "geo=us_west&device=mobile"},
                ]
            },
            "causes[1] names BID_MODIFIER_CHANGE again (first at causes[0]) with the same slice",
        ),
        (
            causes((BID, None), (BID, "*")),
            "causes[1] names BID_MODIFIER_CHANGE again (first at causes[0]) with the same no "
            "slice (the whole panel)",
        ),
        (
            causes(("NO_ANOMALY", None), ("BUDGET_CAP", None), ("NO_ANOMALY", None)),
            "causes[2] names NO_ANOMALY again (first at causes[0]); NO_ANOMALY takes no slice",
        ),
    ],
)
def test_the_same_entry_twice_is_a_format_error_naming_both_positions(obj, error):
    parsed = parse_answer(obj, ads_space())
    assert not parsed.ok
    assert error in parsed.error, parsed.error


def test_one_of_two_truths_named_twice_is_a_format_error_and_scores_0():
    parsed = parse_answer(causes((BID, MOBILE), (BID, MOBILE)), ads_space())
    assert not parsed.ok and "with the same slice 'device=mobile'" in parsed.error
    assert CompositeReward()(parsed, TWO_BIDS).score == 0.0


# -- scoring -----------------------------------------------------------------------------------
@pytest.mark.parametrize("order", [(MOBILE, US_WEST), (US_WEST, MOBILE)])
def test_two_labelled_causes_of_one_kind_answered_in_either_order_score_1(order):
    got = terms(causes(*((BID, s) for s in order)), TWO_BIDS)
    assert got == {t: 1.0 for t in [*TERMS, "graded_0.25"]} | {"set_exact": True}
    assert (
        CompositeReward()
        .score_output(causes(*((BID, s) for s in order)), TWO_BIDS, ads_space())
        .score
        == 1.0
    )


def test_one_right_and_one_wrong_slice_earn_the_assignments_credit():
    space = ads_space()
    wrong = "geo=germany"  # disjoint from us_west; it overlaps mobile a little
    assert space.jaccard(wrong, US_WEST) == 0 and 0 < space.jaccard(wrong, MOBILE) < 0.5
    for answered in [((BID, wrong), (BID, MOBILE)), ((BID, MOBILE), (BID, wrong))]:
        got = terms(causes(*answered), TWO_BIDS)
        # MOBILE is exact for its truth; the wrong slice goes to US_WEST, the one left.
        credit = (1.0 + 0.5 + 0.5 * space.jaccard(wrong, US_WEST)) / 2
        assert got["graded_attribution"] == pytest.approx(credit)
        assert got["slice_jaccard"] == pytest.approx((1.0 + space.jaccard(wrong, US_WEST)) / 2)
        assert got["full_attribution"] == 0.0 and got["set_exact"] is False
        assert got["cause_accuracy"] == 1.0  # the kind, named as often as it is at work


def test_an_extra_third_entry_costs_the_extra_penalty():
    for third in [(BID, "geo=germany"), ("BUDGET_CAP", None)]:
        got = terms(causes((BID, US_WEST), third, (BID, MOBILE)), TWO_BIDS)
        assert got["graded_attribution"] == pytest.approx(1.0 - 0.5)
        assert got["graded_0.25"] == pytest.approx(1.0 - 0.25)
        assert got["full_attribution"] == 0.0 and got["cause_accuracy"] == 0.0
        assert got["slice_jaccard"] == 1.0 and got["set_exact"] is False
    # One kind named on two slices against a single-cause label: the second is an extra.
    single = label((BID, MOBILE))
    hedge = terms(causes((BID, US_WEST), (BID, MOBILE)), single)
    assert hedge["graded_attribution"] == pytest.approx(0.5)
    assert hedge["full_attribution"] == 0.0 and hedge["cause_accuracy"] == 0.0


def test_a_missing_truth_of_the_kind_earns_nothing():
    got = terms(causes((BID, US_WEST)), TWO_BIDS)
    assert got["graded_attribution"] == pytest.approx(0.5)
    assert got["slice_jaccard"] == pytest.approx(0.5)
    assert got["full_attribution"] == 0.0 and got["cause_accuracy"] == 0.0


def _greedy_in_order(space, truths, answered) -> float:
    """Each entry in the answer's order takes the free true cause of its kind it earns most on."""
    free, total = list(truths), 0.0
    for cause, sl in answered:
        options = [t for t in free if t[0] == cause]
        if options:
            best = max(options, key=lambda t: space.jaccard(sl, t[1]))
            free.remove(best)
            total += 0.5 + 0.5 * space.jaccard(sl, best[1])
    return total / len(truths)


def test_the_assignment_beats_greedy_matching_in_answer_order():
    """The first entry (mobile users in us_west) overlaps both truths, us_west more (in
    Jaccard); greedy gives it us_west and leaves mobile to the exact us_west entry."""
    space = ads_space()
    both = "device=mobile&geo=us_west"
    assert space.jaccard(both, US_WEST) > space.jaccard(both, MOBILE) > 0
    answered = [(BID, both), (BID, US_WEST)]
    truths = [(BID, MOBILE), (BID, US_WEST)]
    best = (1.0 + 0.5 + 0.5 * space.jaccard(both, MOBILE)) / 2
    greedy = _greedy_in_order(space, truths, answered)
    assert greedy < best - 0.05
    assert terms(causes(*answered), TWO_BIDS)["graded_attribution"] == pytest.approx(best)


# -- old answers keep their scores --------------------------------------------------------------
def old_rule(space: AnswerSpace, lab: OracleLabel, answer) -> dict[str, float | bool | None]:
    """The dict-keyed rule before issue 39 (a kind at most once per answer and per label)."""
    truths = {c: space.canonical_slice(s) if s else None for c, s in lab.causes}
    answered = {c.root_cause: c.slice for c in answer.causes}
    assert len(answered) == len(answer.causes) and len(truths) == len(lab.causes)

    def credit(c, a, t):
        return 1.0 if not space.takes_slice(c) else 0.5 + 0.5 * space.jaccard(a, t)

    exact = set(answered) == set(truths) and all(
        not space.takes_slice(c) or answered[c] == s for c, s in truths.items()
    )
    if lab.also or answer.also:
        mean = math.fsum(credit(c, answered[c], s) for c, s in truths.items() if c in answered)
        extras = sum(c not in truths for c in answered)
        jac = math.fsum(space.jaccard(answered[c], s) for c, s in truths.items() if c in answered)
        return {
            "cause_accuracy": float(set(answered) == set(truths)),
            "full_attribution": float(exact),
            "slice_jaccard": jac / len(truths),
            "graded_attribution": max(0.0, mean / len(truths) - 0.5 * extras),
            "graded_0.25": max(0.0, mean / len(truths) - 0.25 * extras),
            "set_exact": exact,
        }
    right = answer.root_cause == lab.cause
    true = truths[lab.cause]
    graded = credit(lab.cause, answer.slice, true) if right else 0.0
    return {
        "cause_accuracy": float(right),
        "full_attribution": float(
            right and (not space.takes_slice(lab.cause) or answer.slice == true)
        ),
        "slice_jaccard": space.jaccard(answer.slice, true),
        "graded_attribution": graded,
        "graded_0.25": graded,
        "set_exact": None,
    }


def _slices(space, cause, true):
    """The true slice, none, the candidate overlapping it most (not exactly) and one disjoint."""
    if not space.takes_slice(cause):
        return [None]
    cands = [s for s in space.candidate_slices(cause) if s is not None]
    partial = sorted((-space.jaccard(s, true), s) for s in cands if 0 < space.jaccard(s, true) < 1)
    wrong = [s for s in cands if space.jaccard(s, true) == 0]
    return list(dict.fromkeys([true, None, *(p[1] for p in partial[:1]), *wrong[:1]]))


def old_answers(space, lab) -> list[dict]:
    """Single and list answers naming each kind at most once: right, partial, wrong and no
    slices; wrong causes; the truth in and out of order; extras; missing causes."""
    truths = [(c, space.canonical_slice(s) if s else None) for c, s in lab.causes]
    named = {c for c, _ in truths}
    wrong = [c for c in space.causes if c not in named][:2]
    (c1, s1), rest = truths[0], truths[1:]
    out = []
    for sl in _slices(space, c1, s1):
        out += [{"root_cause": c1, "slice": sl}, causes((c1, sl)), causes(*rest, (c1, sl))]
        out += [causes((c1, sl), *rest), causes((c1, sl), *rest, (wrong[0], None))]
    for w in wrong:
        out += [{"root_cause": w, "slice": s1}, {"root_cause": w, "slice": None}]
        out += [causes((w, None)), causes(*truths, (w, None)), causes((w, None), *truths[::-1])]
    for c2, s2 in rest:
        for sl in _slices(space, c2, s2):
            out += [{"root_cause": c2, "slice": sl}, causes((c1, s1), (c2, sl)), causes((c2, sl))]
    out.append(causes(*((w, None) for w in wrong)))
    return out


@pytest.mark.parametrize(
    "split, every",
    [("ads_hard", 1), ("ads_expert", 1), ("ads_test", 5), ("services_test", 4)],
)
def test_old_answers_score_what_the_old_rule_gave(split, every):
    source = DatasetSource(ROOT / "data" / split)
    space = source.answer_space
    checked = concurrent = 0
    for eid in source.episode_ids[::every]:
        lab = source.label(eid)
        concurrent += lab.concurrent
        for obj in old_answers(space, lab):
            parsed = parse_answer(obj, space)
            assert parsed.ok, (obj, parsed.error)
            got = terms(obj, lab, space)
            want = old_rule(space, lab, parsed.answer)
            assert got == pytest.approx(want, abs=1e-12), (eid, obj, got, want)
            checked += 1
    assert checked > 300
    assert concurrent > 0 or split in ("ads_test", "services_test")
