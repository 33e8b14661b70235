"""Exogenous noise: what each node draws, and the per-node random streams it draws from.

Each node's noise comes from its own stream, derived from the simulation seed (through
``numpy.random.SeedSequence``) and the node's *name*: adding, removing or editing one node leaves
every other node's noise unchanged, and the draw order of nodes does not matter. Factual and
counterfactual worlds share these draws, which is what makes them a counterfactual pair.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class NoiseSpec(Protocol):
    """Draws a node's exogenous noise for a panel of the given shape (or returns None)."""

    def draw(self, rng: np.random.Generator, shape: tuple[int, int]) -> np.ndarray | None: ...


@dataclass(frozen=True)
class NoNoise:
    """A deterministic node."""

    def draw(self, rng: np.random.Generator, shape: tuple[int, int]) -> None:
        return None


@dataclass(frozen=True)
class Normal:
    """Gaussian noise with mean 0 and standard deviation ``scale``.

    Args:
        scale: The standard deviation; 1.0 by default.
    """

    scale: float = 1.0

    def draw(self, rng: np.random.Generator, shape: tuple[int, int]) -> np.ndarray:
        out = rng.standard_normal(shape)
        if self.scale != 1.0:
            out *= self.scale
        return out


@dataclass(frozen=True)
class Uniform:
    """Standard uniform noise on [0, 1); ``components > 1`` adds a leading axis.

    Uniforms are the noise of count variables: a mechanism turns them into counts by the inverse
    CDF (see :mod:`causaltrace.model.distributions`), so that the counterfactual world, which shares the
    uniforms, differs from the factual one only where the cause moved the count's parameters.

    Args:
        components: Independent uniforms per cell; 1 (no leading axis) by default.
    """

    components: int = 1

    def draw(self, rng: np.random.Generator, shape: tuple[int, int]) -> np.ndarray:
        if self.components == 1:
            return rng.random(shape)
        return rng.random((self.components, *shape))


class NoiseStreams:
    """One independent random stream per node name, all derived from one seed.

    The root words come from ``SeedSequence(seed)``; a node's stream is a PCG64 state and
    increment (which selects one of PCG64's 2**127 streams) hashed from the root words and the
    node's name with BLAKE2b. One bit generator is re-keyed per node instead of building a new
    ``SeedSequence`` and ``Generator`` each time: at 10**3 units that construction costs more than
    the draw itself.

    Args:
        seed: The root seed (an int or a ``SeedSequence``).
    """

    def __init__(self, seed: int | np.random.SeedSequence):
        ss = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(seed)
        self._root = ss.generate_state(4, dtype=np.uint64).tobytes()
        # BLAKE2b of root + name, with the root already absorbed: each node copies this hasher.
        self._hasher = hashlib.blake2b(self._root, digest_size=32)
        # Every stream is re-keyed before its first draw, so this initial state is never used;
        # seeding from ``ss`` only avoids building a second SeedSequence.
        self._bitgen = np.random.PCG64(ss)
        self._generator = np.random.Generator(self._bitgen)
        # The state dict handed to the bit generator, refilled per node (the setter copies it).
        self._key = {"state": 0, "inc": 1}
        self._state = {"bit_generator": "PCG64", "state": self._key, "has_uint32": 0, "uinteger": 0}

    def generator(self, name: str) -> np.random.Generator:
        """The generator positioned at the start of ``name``'s stream.

        The returned object is shared: draw from it before asking for another node's stream.

        Args:
            name: The node's name.
        """
        hasher = self._hasher.copy()
        hasher.update(name.encode("utf-8"))
        digest = hasher.digest()
        key = self._key
        key["state"] = int.from_bytes(digest[:16], "little")
        key["inc"] = int.from_bytes(digest[16:], "little") | 1
        self._bitgen.state = self._state
        return self._generator

    def draw(self, name: str, spec: NoiseSpec, shape: tuple[int, int]) -> np.ndarray | None:
        return spec.draw(self.generator(name), shape)
