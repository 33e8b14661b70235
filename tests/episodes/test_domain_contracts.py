"""Every domain keeps the engine's contracts: ``check_domain`` passes on every registered domain
(entry points ``causaltrace.domains``, at their default config) and on the tutorial's, and fails
on a broken domain with the domain and the failed check named.

The broken domains are the tutorial's bakeries with one thing wrong each: a partial monitor, a
confuser that is no cause, an ``invert`` that is not declared, a table whose columns depend on
the cause, an undescribed column. (Per-domain behaviour stays in each domain's own tests.)
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import ClassVar

import pytest

from causaltrace import (
    CauseInfo,
    Constant,
    DomainContractError,
    InterventionError,
    InterventionPoint,
    Monitor,
    available_domains,
    load_domain,
)
from causaltrace.episodes.check import CHECKS, check_domain

TUTORIAL = Path(__file__).resolve().parents[2] / "docs" / "tutorial"
if str(TUTORIAL) not in sys.path:  # the tutorial's domain is ``shop_domain:ShopDomain``
    sys.path.insert(0, str(TUTORIAL))

from shop_domain import ShopDomain  # noqa: E402


@pytest.mark.slow
@pytest.mark.parametrize("name", [*sorted(available_domains()), "shop_domain:ShopDomain"])
def test_every_domain_passes_check_domain(name):
    domain = load_domain(name)
    result = check_domain(domain)
    assert result.domain == domain.name
    assert result.causes == tuple(domain.scm.intervention_points)
    expected = [c for c in CHECKS if c != "monitor-tables" or domain.monitor is not None]
    assert list(result.checks) == expected
    assert 1 <= result.accepted <= result.episodes
    assert str(result).startswith(f"domain {domain.name!r} passes {len(expected)} checks")


def test_the_registered_domains_are_the_shipped_ones():
    assert {"ads", "services", "example"} <= set(available_domains())


def test_check_domain_loads_a_name_with_its_config():
    assert check_domain("example", {"days": 35}).domain == "example"
    with pytest.raises(TypeError, match="config only with a domain name"):
        check_domain(ShopDomain(), {"days": 35})


def failure(domain) -> DomainContractError:
    with pytest.raises(DomainContractError) as caught:
        check_domain(domain)
    error = caught.value
    assert error.domain == "shop" and str(error).startswith(
        f"domain 'shop' fails check {error.check!r}"
    )
    return error


# -- monitors ------------------------------------------------------------------------------
class ShopWithReadings(ShopDomain):
    """Overrides one monitor method (the issue's case: this used to silently drop the gate)."""

    def alert_readings(self, tables):
        return []


class ShopWithHalfMonitor(ShopWithReadings):
    def monitor_tables(self, world):
        return {}


def test_a_partial_monitor_fails_with_the_missing_methods_named():
    error = failure(ShopWithReadings())
    assert error.check == "monitor"
    assert "['alert_readings']" in error.reason
    assert "['monitor_tables', 'alert_kpi', 'kpi_daily']" in error.reason
    error = failure(ShopWithHalfMonitor())
    assert error.check == "monitor" and "not ['alert_kpi', 'kpi_daily']" in error.reason
    assert not isinstance(ShopWithHalfMonitor(), Monitor)  # the protocol needs all four


# -- causes ----------------------------------------------------------------------------------
class ShopWithRetypedCauses(ShopDomain):
    """The tutorial's SCM with each cause's info replaced by ``infos[name]``."""

    infos: ClassVar[dict] = {}

    def build_scm(self):
        scm = super().build_scm()
        points = [
            InterventionPoint(p.name, p.build, p.prior, p.description, self.infos.get(n, p.info))
            for n, p in scm.intervention_points.items()
        ]
        return type(scm)(list(scm.nodes.values()), scm.panel, points, name=scm.name)


class ShopWithUnknownConfuser(ShopWithRetypedCauses):
    infos: ClassVar[dict] = {"FOOTFALL_DROP": CauseInfo("demand", confusers=("CHECKOUT_BUG",))}


class ShopWithoutGroups(ShopWithRetypedCauses):
    infos: ClassVar[dict] = {
        "CHECKOUT_OUTAGE": {"confusers": ("FOOTFALL_DROP",)}
    }  # a mapping still converts


class ShopWithSilentSignal(ShopWithRetypedCauses):
    infos: ClassVar[dict] = {"CHECKOUT_OUTAGE": CauseInfo("conversion", no_signal=True)}


def test_cause_info_is_checked():
    error = failure(ShopWithUnknownConfuser())
    assert error.check == "causes" and "unknown confusers ['CHECKOUT_BUG']" in error.reason
    error = failure(ShopWithoutGroups())
    assert error.check == "causes" and "'CHECKOUT_OUTAGE' declares no group" in error.reason
    error = failure(ShopWithSilentSignal())
    assert error.check == "causes" and "no-signal cause 'CHECKOUT_OUTAGE' builds" in error.reason


def test_cause_info_converts_once_and_rejects_malformed_values():
    info = CauseInfo.of({"group": "g", "confusers": ["A"], "typical_snr": 3, "change": "deploy"})
    assert info == CauseInfo("g", confusers=("A",), typical_snr=3.0, extra={"change": "deploy"})
    assert CauseInfo.of(info) is info and CauseInfo.of(None) == CauseInfo()
    with pytest.raises(InterventionError, match="confusers must be a sequence of names"):
        CauseInfo(confusers="FOOTFALL_DROP")
    with pytest.raises(InterventionError, match="typical_snr must be a positive number"):
        CauseInfo(typical_snr=0.0)
    with pytest.raises(InterventionError, match=r"point 'X': cause info: extra repeats"):
        InterventionPoint("X", lambda d: [], info={"extra": {"group": "g"}})


# -- mechanisms ------------------------------------------------------------------------------
class UndeclaredConstant(Constant):
    """A mechanism with an ``invert`` it does not declare (no InvertibleMechanism base)."""

    def invert(self, parents, value, panel):
        return value


class ShopWithUndeclaredInverse(ShopDomain):
    def build_scm(self):
        scm = super().build_scm()
        nodes = [
            replace(n, mechanism=UndeclaredConstant(0.3)) if n.name == "conversion" else n
            for n in scm.nodes.values()
        ]
        return type(scm)(nodes, scm.panel, list(scm.intervention_points.values()), name=scm.name)


def test_an_undeclared_inverse_is_named():
    error = failure(ShopWithUndeclaredInverse())
    assert error.check == "mechanisms"
    assert "defines invert() but does not subclass InvertibleMechanism" in error.reason


# -- what the agent sees ----------------------------------------------------------------------
class ShopWithCauseColumns(ShopDomain):
    """Adds a column only when the footfall dropped: the schema names the cause."""

    def render(self, world, draw, background, rng):
        tables = super().render(world, draw, background, rng)
        if draw.point == "FOOTFALL_DROP":
            tables["stores"] = tables["stores"].assign(note="")
        return tables


class ShopWithUndescribedColumn(ShopDomain):
    def render(self, world, draw, background, rng):
        tables = super().render(world, draw, background, rng)
        tables["stores"] = tables["stores"].assign(manager="")
        return tables


def test_tables_are_checked_against_the_cause_and_the_dictionary():
    error = failure(ShopWithCauseColumns())
    assert error.check == "render" and "differ in ['stores']" in error.reason
    error = failure(ShopWithUndescribedColumn())
    assert error.check == "dictionary" and "table 'stores' misses ['manager']" in error.reason
