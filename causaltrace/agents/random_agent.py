"""The floor: a uniformly random cause and, where it takes one, a random slice."""

from __future__ import annotations

import numpy as np

from causaltrace.agents.base import Agent


class RandomAgent(Agent):
    """Submits a uniformly random cause and a slice drawn from that cause's candidate slices
    (uniform over its slice dimension sets, then over their levels), without any tool call."""

    name = "random"

    async def run(self, session, rng: np.random.Generator) -> None:
        space = session.source.answer_space
        cause = space.causes[int(rng.integers(len(space.causes)))]
        slice_text = ""
        if cause in space.sliced:
            options = space.slice_dims.get(cause) or ((space.dimensions[0][0],),)
            dims = options[int(rng.integers(len(options)))]
            levels = dict(space.dimensions)
            allowed = space.allowed_levels.get(cause, {})
            parts = []
            for dim in dims:
                choices = allowed.get(dim) or levels[dim]
                parts.append(f"{dim}={choices[int(rng.integers(len(choices)))]}")
            slice_text = "&".join(parts)
        await session.turn(
            [{"name": "submit", "arguments": {"root_cause": cause, "slice": slice_text}}]
        )
