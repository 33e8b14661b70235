"""Seed derivation for datasets: every random draw of an episode flows from one dataset seed.

An episode's seed sequence is ``SeedSequence(dataset_seed, spawn_key=(split_key, index,
attempt))``; ``split_key`` is hashed from the split's name, so splits never share a stream
(disjoint by construction), and a rejected attempt is followed by attempt + 1, so resampling is
deterministic. The episode's streams (cause draw, background, noise, report rendering) are the
sequence's children, in a fixed order. A concurrent episode's further causes draw from a fifth
child (:func:`concurrent_stream`): spawning it leaves the first four children as they were, so
a single-cause episode's streams, and its bytes, do not depend on whether the split has
concurrent episodes.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np


def split_key(split: str) -> int:
    """A 32-bit key for a split name (stable across Python versions and platforms).

    Args:
        split: The split's name.
    """
    return int.from_bytes(hashlib.blake2b(split.encode("utf-8"), digest_size=4).digest(), "little")


@dataclass(frozen=True)
class EpisodeStreams:
    """The independent random streams of one episode attempt."""

    draw: np.random.Generator
    background: np.random.Generator
    noise: np.random.SeedSequence
    render: np.random.Generator


def episode_seed_sequence(
    dataset_seed: int, split: str, index: int, attempt: int
) -> np.random.SeedSequence:
    return np.random.SeedSequence(
        int(dataset_seed), spawn_key=(split_key(split), int(index), int(attempt))
    )


def episode_streams(dataset_seed: int, split: str, index: int, attempt: int) -> EpisodeStreams:
    draw, background, noise, render = episode_seed_sequence(
        dataset_seed, split, index, attempt
    ).spawn(4)
    return EpisodeStreams(
        np.random.default_rng(draw),
        np.random.default_rng(background),
        noise,
        np.random.default_rng(render),
    )


def concurrent_stream(
    dataset_seed: int, split: str, index: int, attempt: int
) -> np.random.Generator:
    """The stream of a concurrent episode's further causes (their slices, strengths, onsets and
    profiles): the episode sequence's fifth child, independent of the four of
    :func:`episode_streams`.

    Args:
        dataset_seed: The dataset's seed.
        split: The split's name.
        index: The episode's index in the split.
        attempt: The generation attempt.
    """
    children = episode_seed_sequence(dataset_seed, split, index, attempt).spawn(5)
    return np.random.default_rng(children[4])


def schedule_rng(dataset_seed: int, split: str) -> np.random.Generator:
    """The stream that orders a split's cause schedule (independent of every episode stream).

    Args:
        dataset_seed: The dataset's seed.
        split: The split's name.
    """
    return np.random.default_rng(
        np.random.SeedSequence(int(dataset_seed), spawn_key=(split_key(split), 2**31))
    )


def concurrent_schedule_rng(dataset_seed: int, split: str) -> np.random.Generator:
    """The stream that picks a split's concurrent episodes and their second causes (a sibling
    of :func:`schedule_rng`, so the first causes' schedule is the same with or without
    concurrent episodes).

    Args:
        dataset_seed: The dataset's seed.
        split: The split's name.
    """
    return np.random.default_rng(
        np.random.SeedSequence(int(dataset_seed), spawn_key=(split_key(split), 2**31 + 1))
    )
