"""The oracle's batched scan only chooses onsets; every number it reports is the scalar
statistic's. So the ranking with the batch is the ranking without it, bit for bit, and the
batched z agrees with the scalar z wherever the scalar statistic exists. Checked on accepted
episodes of the default ads account over several seeds."""

import math

import numpy as np
import pytest

from causaltrace import load_domain
from causaltrace.datasets.generation import Job
from causaltrace.episodes.acceptance import accept_episode
from causaltrace.episodes.composition import assignments
from causaltrace.episodes.oracle import OracleSolver
from causaltrace.episodes.sampling import EpisodeSpec
from causaltrace.episodes.verify import candidate_masks


@pytest.fixture(scope="module")
def domain():
    return load_domain("ads")


def _episode(domain, seed: int, index: int):
    job = Job.from_config(
        {
            "out_dir": "unused",
            "domain": {"name": "ads"},
            "dataset": {"name": "t", "split": "t", "seed": seed, "n_episodes": index + 1},
        }
    )
    plan = assignments(
        domain.scm, job.dataset.composition, split="t", dataset_seed=seed, n_episodes=index + 1
    )
    a = plan[index]
    spec = EpisodeSpec(f"t-{index}", "t", index, seed, a.cause, a.slice_order, also=a.also)
    return accept_episode(domain, spec, job.verifier, 400)[0]


class _ScalarOnly:
    """The same evidence without its batched scan: the oracle reads every onset one by one."""

    def __init__(self, evidence):
        self._evidence = evidence

    def statistic(self, *args, **kwargs):
        return self._evidence.statistic(*args, **kwargs)

    def alert_share(self, *args, **kwargs):
        return self._evidence.alert_share(*args, **kwargs)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [3, 4, 5])
def test_ranking_with_the_batch_equals_the_scalar_scan(domain, seed):
    episode = _episode(domain, seed, seed)
    solver = OracleSolver(domain)
    evidence = domain.evidence(episode.tables)
    batched = solver._ranked(solver._refined_candidates(evidence))
    scalar = solver._ranked(
        solver._refined_candidates(_ScalarOnly(domain.evidence(episode.tables)))
    )
    assert [(h.cause, h.slice, h.onset) for h in batched] == [
        (h.cause, h.slice, h.onset) for h in scalar
    ]
    assert [h.score for h in batched] == [h.score for h in scalar]  # exact, not close
    assert [h.posterior for h in batched] == [h.posterior for h in scalar]


@pytest.mark.slow
@pytest.mark.parametrize("seed", [3, 6])
def test_batched_z_equals_the_scalar_z(domain, seed):
    """Wherever the scalar statistic exists the batch marks it valid, with the same z up to the
    rounding of sums taken in another order (relative 1e-9 covers sums of ~1,000 terms of
    float64, whose rounding is ~1e-13 relative, with room for the differences of two sums)."""
    episode = _episode(domain, seed, seed + 1)
    evidence = domain.evidence(episode.tables)
    solver = OracleSolver(domain)
    checked = 0
    for cause in solver.signal:
        candidates = candidate_masks(domain.scm, cause)
        batch = evidence.scan(cause, [m for _, m in candidates], solver.onsets)
        if batch is None:  # account-wide causes are read one by one
            assert all(m is None for _, m in candidates)
            continue
        z, valid = batch
        for i, (_, mask) in enumerate(candidates):
            for j, onset in enumerate(solver.onsets):
                stat = evidence.statistic(cause, mask, onset)
                if stat is None:
                    continue
                assert valid[i, j], (cause, i, onset)
                if math.isfinite(stat.z):
                    assert z[i, j] == pytest.approx(stat.z, rel=1e-9, abs=1e-9)
                    checked += 1
    assert checked > 500
    assert np.isfinite(z).any()
