"""Mechanisms of the example web shop: pure, vectorized functions over the whole panel."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from causaltrace import Panel
from causaltrace.distributions import binomial_icdf, normal_icdf, poisson_icdf


@dataclass(frozen=True)
class Demand:
    """Expected visits: a per-channel base, a weekly cycle and a daily log-normal shock."""

    base_by_channel: tuple[float, ...]
    weekly_amplitude: float = 0.2
    shock_sd: float = 0.1

    def __call__(self, parents, noise, panel: Panel) -> np.ndarray:
        base = np.asarray(self.base_by_channel)[panel.codes("channel")][:, None]
        weekday = (panel.time.values.astype("datetime64[D]").astype(np.int64) + 3) % 7
        weekly = 1.0 + self.weekly_amplitude * np.cos(2 * np.pi * weekday / 7.0)[None, :]
        return base * weekly * np.exp(self.shock_sd * normal_icdf(noise))


@dataclass(frozen=True)
class ChannelRate:
    """A per-channel rate with small multiplicative noise (e.g. checkout conversion)."""

    rate_by_channel: tuple[float, ...]
    noise_sd: float = 0.05

    def __call__(self, parents, noise, panel: Panel) -> np.ndarray:
        rate = np.asarray(self.rate_by_channel)[panel.codes("channel")][:, None]
        return np.clip(rate * np.exp(self.noise_sd * normal_icdf(noise)), 0.0, 1.0)


@dataclass(frozen=True)
class PoissonCount:
    """Counts with mean given by the ``mean`` parent."""

    mean: str

    def __call__(self, parents, noise, panel: Panel) -> np.ndarray:
        return poisson_icdf(parents[self.mean], noise)


@dataclass(frozen=True)
class BinomialThin:
    """``trials`` thinned with probability ``rate`` (e.g. visits that order)."""

    trials: str
    rate: str

    def __call__(self, parents, noise, panel: Panel) -> np.ndarray:
        return binomial_icdf(parents[self.trials], parents[self.rate], noise)
