"""The account's own state, drawn per episode: what a practitioner knows of an account only by
looking at its numbers.

How close each campaign runs to its budget, which segments carry its traffic, and which ads its
rotation favours differ from account to account. They decide whether an edit can matter: a
budget cut binds only where the campaign spends near its budget; a bid adjustment moves the
account only where the segment has volume; a disapproved ad is missed only if it carried its ad
group. Each episode draws them from the background stream (so the background's twins of the
change-type causes can be placed where they do not move the alert,
:mod:`causaltrace_domains.ads.twins`) and applies them to both worlds from the first day, as
per-cell factors on the SCM's ``budget_headroom``, ``volume_trait`` and ``rotation_weight``.
None of them is in a table the agent reads: only spend against budget, the segment's rows and
the ad's rows show them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from causaltrace import Intervention, Panel, Scale, Window
from causaltrace_domains.ads.config import AdsConfig

MIX_DIMS = ("device", "geo", "audience")  # the segment mix that differs between accounts


@dataclass(frozen=True)
class StatePrior:
    """How much accounts differ: the log-sd of each campaign's segment weights and of the ads'
    rotation weights, and the range of the account's size (the budget headroom's range is
    each campaign's own)."""

    mix_sd: float = 0.3
    rotation_sd: float = 0.6
    # The account's size: every segment's volume (and with it spend and the budgets, which
    # are set against the account's own spend) times a log-uniform factor in this range.
    # Accounts differ by orders of magnitude; without it a campaign's spend varied by a
    # log-sd of 0.34-0.44 between episodes, and the audit's rule probe named BUDGET_CAP from
    # the budgets' levels alone (precision 0.90 at recall 0.50: a model that memorized a
    # campaign's spend knows whether a new budget binds without reading this account's spend;
    # 0.83 at 0.28 with sizes in (0.5, 2)).
    size_range: tuple[float, float] = (0.4, 2.5)


@dataclass(frozen=True, eq=False)
class AccountState:
    """One account's budget headroom per campaign (and the typical one it departs from, the
    SCM's own), segment weights per cell and rotation weight per cell (its creative's)."""

    headroom: Mapping[str, float]
    nominal: Mapping[str, float]
    volume: np.ndarray  # (n_cells, 1)
    rotation: np.ndarray  # (n_cells, 1)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, AccountState):
            return NotImplemented
        return (
            dict(self.headroom) == dict(other.headroom)
            and dict(self.nominal) == dict(other.nominal)
            and np.array_equal(self.volume, other.volume)
            and np.array_equal(self.rotation, other.rotation)
        )

    __hash__ = None  # a mutable-looking value (arrays): not hashable

    def with_headroom(self, raised: Mapping[str, float]) -> AccountState:
        """The same account with these campaigns' headroom (the room a twin budget cut needs:
        :mod:`causaltrace_domains.ads.twins`)."""
        return AccountState({**self.headroom, **raised}, self.nominal, self.volume, self.rotation)

    def interventions(self, panel: Panel) -> tuple[Intervention, ...]:
        """The state as interventions on both worlds from the first day."""
        campaigns = panel.labels("campaign")
        headroom = np.array([self.headroom[c] / self.nominal[c] for c in campaigns])[:, None]
        start = Window(0)
        return (
            Scale("budget_headroom", window=start, factor=headroom),
            Scale("volume_trait", window=start, factor=self.volume),
            Scale("rotation_weight", window=start, factor=self.rotation),
        )

    def rotation_share(self, panel: Panel, creative: str) -> float:
        """The creative's share of its ad groups' rotation (its first ad group's)."""
        labels = panel.labels("creative")
        cell = int(np.flatnonzero(labels == creative)[0])
        campaign = panel.labels("campaign")[cell]
        siblings = np.unique(labels[panel.labels("campaign") == campaign])
        weights = {c: float(self.rotation[np.flatnonzero(labels == c)[0], 0]) for c in siblings}
        return weights[creative] / sum(weights.values())


def sample_state(
    panel: Panel, config: AdsConfig, rng: np.random.Generator, prior: StatePrior = StatePrior()
) -> AccountState:
    """Draw the state of one account (every draw from ``rng``, in a fixed order)."""
    headroom, nominal = {}, {}
    for spec in config.campaigns:
        lo, hi = spec.budget_headroom
        headroom[spec.name] = float(np.exp(rng.uniform(np.log(lo), np.log(hi))))
        nominal[spec.name] = float(np.sqrt(lo * hi))
    volume = np.ones(panel.n_cells)
    campaign_codes = panel.codes("campaign")
    n_campaigns = len(panel.dimension("campaign").levels)
    for dim in MIX_DIMS:
        n_levels = len(panel.dimension(dim).levels)
        weights = np.exp(
            prior.mix_sd * rng.standard_normal((n_campaigns, n_levels)) - 0.5 * prior.mix_sd**2
        )
        volume *= weights[campaign_codes, panel.codes(dim)]
    creative_weight = np.exp(
        prior.rotation_sd * rng.standard_normal(len(panel.dimension("creative").levels))
    )
    rotation = creative_weight[panel.codes("creative")]
    low, high = prior.size_range
    volume *= float(np.exp(rng.uniform(np.log(low), np.log(high))))
    return AccountState(headroom, nominal, volume[:, None], rotation[:, None])
