"""Mechanisms of the example web shop: pure, vectorized functions over the whole panel.

Each declares how its noise is recovered from an observation (for counterfactuals from data and
the DoWhy export) by its base class: :class:`~causaltrace.InvertibleMechanism` for a noise that
is a function of the value, :class:`~causaltrace.IntervalInvertibleMechanism` for a count."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import special

from causaltrace import IntervalInvertibleMechanism, InvertibleMechanism, Panel
from causaltrace.model.distributions import (
    binomial_cdf,
    binomial_icdf,
    count_interval,
    normal_icdf,
    poisson_cdf,
    poisson_icdf,
)


@dataclass(frozen=True)
class Demand(InvertibleMechanism):
    """Expected visits: a per-channel base, a weekly cycle and a daily log-normal shock."""

    base_by_channel: tuple[float, ...]
    weekly_amplitude: float = 0.2
    shock_sd: float = 0.1

    def __call__(self, parents, noise, panel: Panel) -> np.ndarray:
        return self._expected(panel) * np.exp(self.shock_sd * normal_icdf(noise))

    def _expected(self, panel: Panel) -> np.ndarray:
        base = np.asarray(self.base_by_channel)[panel.codes("channel")][:, None]
        weekday = (panel.time.values.astype("datetime64[D]").astype(np.int64) + 3) % 7
        return base * (1.0 + self.weekly_amplitude * np.cos(2 * np.pi * weekday / 7.0)[None, :])

    def invert(self, parents, value, panel: Panel) -> np.ndarray:
        """The uniform behind ``value`` (multiplicative log-normal shock), for abduction."""
        return special.ndtr(np.log(value / self._expected(panel)) / self.shock_sd)


@dataclass(frozen=True)
class ChannelRate(InvertibleMechanism):
    """A per-channel rate with small multiplicative noise (e.g. checkout conversion)."""

    rate_by_channel: tuple[float, ...]
    noise_sd: float = 0.05

    def __call__(self, parents, noise, panel: Panel) -> np.ndarray:
        rate = np.asarray(self.rate_by_channel)[panel.codes("channel")][:, None]
        return np.clip(rate * np.exp(self.noise_sd * normal_icdf(noise)), 0.0, 1.0)

    def invert(self, parents, value, panel: Panel) -> np.ndarray:
        """The uniform behind ``value`` (invertible below the clip at 1), for abduction."""
        rate = np.asarray(self.rate_by_channel)[panel.codes("channel")][:, None]
        return special.ndtr(np.log(value / rate) / self.noise_sd)


@dataclass(frozen=True)
class PoissonCount(IntervalInvertibleMechanism):
    """Counts with mean given by the ``mean`` parent."""

    mean: str

    def __call__(self, parents, noise, panel: Panel) -> np.ndarray:
        return poisson_icdf(parents[self.mean], noise)

    def noise_interval(self, parents, value, panel: Panel):
        """The uniforms ``(F(x-1), F(x)]`` that give the count ``x``, for abduction."""
        return count_interval(lambda k: poisson_cdf(k, parents[self.mean]), value)


@dataclass(frozen=True)
class BinomialThin(IntervalInvertibleMechanism):
    """``trials`` thinned with probability ``rate`` (e.g. visits that order)."""

    trials: str
    rate: str

    def __call__(self, parents, noise, panel: Panel) -> np.ndarray:
        return binomial_icdf(parents[self.trials], parents[self.rate], noise)

    def noise_interval(self, parents, value, panel: Panel):
        """The uniforms ``(F(x-1), F(x)]`` that give the count ``x``, for abduction."""
        n, p = parents[self.trials], parents[self.rate]
        return count_interval(lambda k: binomial_cdf(k, n, p), value)
