"""Helpers of the audit tests: the example shop with a no-signal cause, and episodes built
from explicit draws (so a test fixes the cause, slice and strength)."""

from __future__ import annotations

from causaltrace import SCM, InterventionDraw, InterventionPoint, InterventionPrior, Slice, Window
from causaltrace.episodes.sampling import EpisodeSpec, build_episode
from causaltrace_domains.example import ExampleDomain


class NoSignalExample(ExampleDomain):
    """The example shop plus NO_ANOMALY, a cause that injects nothing."""

    def build_scm(self) -> SCM:
        base = super().build_scm()
        quiet = InterventionPoint(
            "NO_ANOMALY",
            lambda draw: [],
            InterventionPrior(onset=(-7, -7)),
            "nothing changed",
            {"group": "none", "no_signal": True},
        )
        points = [*base.intervention_points.values(), quiet]
        return SCM(list(base.nodes.values()), base.panel, points, name=base.name)


def episode(domain, cause: str, seed: int, strength: float = 0.0, sl: str = "", back: int = 10):
    """Episode ``seed`` of ``cause`` on slice ``sl`` with a step at ``back`` days from the end."""
    onset = domain.scm.panel.n_time - back
    draw = InterventionDraw(
        cause,
        Slice.of(dict(p.split("=") for p in sl.split("&") if p)),
        strength,
        Window(onset=onset),
    )
    spec = EpisodeSpec(f"t-{seed}", "audit-test", seed, 11, cause, None)
    return build_episode(domain, spec, draw=draw)
