"""Ads accounts and their backgrounds, built once per test session (shared by the background
and twin tests, which sample many backgrounds of the same two presets)."""

from __future__ import annotations

import functools

import numpy as np

from causaltrace import load_domain

PRESETS = {"default": {}, "small": {"preset": "small"}}


@functools.cache
def domain_of(preset: str):
    return load_domain("ads", PRESETS[preset])


@functools.cache
def background_of(preset: str, seed: int):
    return domain_of(preset).background(np.random.default_rng(seed))
