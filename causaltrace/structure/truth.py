"""Ground truth for effect estimation: the exact effect of a contrast of interventions, unit by
unit, from worlds that share every exogenous draw.

For each seed, the outcome is simulated under the ``treat`` interventions and under the
``control`` ones from the same noise (noise streams are keyed by seed and node name, so two
simulations with one seed share every draw; counts are inverse CDFs of shared uniforms). Their
difference is each unit's (cell x time step) effect, with no estimation in it. Averaged over
the units of a slice it is that slice's conditional average effect (CATE), over every unit the
average effect (ATE); the spread of the per-world averages over seeds is their Monte Carlo
standard error.

The seeds of an export's worlds (:func:`causaltrace.structure.export.world_seeds`) give the
effect on exactly the units of the exported rows (the sample average effect): an estimator run
on ``observational.parquet`` is scored against :func:`export_truth`'s files. The SCM may carry
interventions (``scm.intervene(...)``: an interventional regime), which both arms then share.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from causaltrace.core.files import atomic_write_bytes, atomic_write_text, canonical_json
from causaltrace.datasets.storage import table_bytes
from causaltrace.errors import CausalTraceError
from causaltrace.model.interventions import Do, Intervention, Scale, Shift
from causaltrace.model.panel import Panel
from causaltrace.model.scm import SCM
from causaltrace.model.slices import Slice, parse_slice
from causaltrace.structure.export import parse_regime

__all__ = [
    "TRUTH_DIR",
    "SliceEffect",
    "TrueEffect",
    "export_truth",
    "true_effect",
]

TRUTH_DIR = "truth"
Arm = str | Intervention | Sequence[Intervention] | None
Seed = int | np.random.SeedSequence


@dataclass(frozen=True)
class SliceEffect:
    """The average effect over the units of one slice.

    Args:
        slice: The slice, ``dim=level&dim=level`` (``""`` for every unit of ``where``).
        n_units: Units (cells x time steps) per world.
        cate: The effect averaged over those units and over the worlds.
        se: Its Monte Carlo standard error (spread of the per-world averages over seeds).
    """

    slice: str
    n_units: int
    cate: float
    se: float


@dataclass(frozen=True, eq=False)
class TrueEffect:
    """The exact effect of ``treat`` against ``control`` on ``outcome``.

    Args:
        scm: The model's name.
        outcome: The outcome node.
        treat: The first arm's interventions, as ``kind:node=value[@slice]`` text.
        control: The second arm's (``()``: no intervention).
        where: The slice the ATE averages over (``""``: every cell).
        panel: The panel (for the per-unit table's coordinates).
        seeds: The seeds of the worlds, in order.
        treated: ``(worlds, cells, time)`` outcome under ``treat``.
        controlled: The same under ``control``.
        ate: The average of ``treated - controlled`` over the units of ``where`` and the
            worlds.
        ate_se: Its Monte Carlo standard error over worlds (``nan`` for one world).
        ate_by_world: Each world's average.
        by_slice: The ATE (slice ``""``), then the CATE of every slice of ``by`` (each level of
            each dimension by default), restricted to ``where``.
    """

    scm: str
    outcome: str
    treat: tuple[str, ...]
    control: tuple[str, ...]
    where: str
    panel: Panel = field(repr=False)
    seeds: tuple[Seed, ...] = field(repr=False)
    treated: np.ndarray = field(repr=False)
    controlled: np.ndarray = field(repr=False)
    ate: float
    ate_se: float
    ate_by_world: np.ndarray = field(repr=False)
    by_slice: tuple[SliceEffect, ...] = field(repr=False)

    @property
    def per_unit(self) -> np.ndarray:
        """``(worlds, cells, time)``: each unit's effect, ``treated - controlled``."""
        return self.treated - self.controlled

    def cate(self, slice_text: str) -> SliceEffect:
        """The row of ``by_slice`` for a slice (its canonical text)."""
        for row in self.by_slice:
            if row.slice == slice_text:
                return row
        raise CausalTraceError(
            f"no slice {slice_text!r} in this truth; slices: {[r.slice for r in self.by_slice]}"
        )

    def table(self):
        """``by_slice`` as a pandas DataFrame (slice, n_units, cate, se)."""
        # lazy: pandas takes ~0.5 s to import; `import causaltrace` must not pay it
        import pandas as pd

        return pd.DataFrame([vars(r) for r in self.by_slice])

    def frame(self):
        """One row per (world, cell, time step), in the export's order (``world``, the
        dimensions, ``time``), with ``treated``, ``control`` and ``effect``: the rows of
        ``regime_frame`` for the same seeds, unit for unit."""
        # lazy: pandas takes ~0.5 s to import; `import causaltrace` must not pay it
        import pandas as pd

        panel = self.panel
        n = len(self.seeds)
        columns: dict[str, object] = {"world": np.repeat(np.arange(n, dtype=np.int64), panel.size)}
        for dim in panel.dimensions:
            codes = np.tile(np.repeat(panel.codes(dim.name), panel.n_time), n)
            columns[dim.name] = pd.Categorical.from_codes(codes, dim.levels)
        columns["time"] = np.tile(panel.time.values, panel.n_cells * n)
        columns["treated"] = self.treated.ravel()
        columns["control"] = self.controlled.ravel()
        columns["effect"] = self.per_unit.ravel()
        return pd.DataFrame(columns)

    def summary(self) -> dict:
        """The JSON :func:`export_truth` writes (without the file names)."""
        return {
            "scm": self.scm,
            "outcome": self.outcome,
            "treat": list(self.treat),
            "control": list(self.control),
            "where": self.where,
            "estimand": (
                f"E[{self.outcome} | do(treat)] - E[{self.outcome} | do(control)], each unit's "
                "difference from worlds that share every draw, averaged over the units (cells x "
                f"time steps) of {self.where or 'every cell'} and over the worlds"
            ),
            "ate": self.ate,
            "ate_se": None if np.isnan(self.ate_se) else self.ate_se,
            "n_worlds": len(self.seeds),
            "units_per_world": int(self.by_slice[0].n_units),
            "ate_by_world": [float(v) for v in self.ate_by_world],
            "seeds": [_seed_json(s) for s in self.seeds],
            "by_slice": [vars(r) for r in self.by_slice],
        }


def true_effect(
    scm: SCM,
    outcome: str,
    treat: Arm,
    control: Arm = None,
    *,
    seeds: int | Sequence[Seed] = 20,
    where: Slice | str | None = None,
    by: Sequence[str | Sequence[str]] | None = None,
) -> TrueEffect:
    """The exact effect of ``treat`` against ``control`` on ``outcome``, unit by unit.

    Args:
        scm: The model (intervened for an interventional regime: both arms share it).
        outcome: The outcome node.
        treat: The first arm: ``"do:visits=100"`` (the export's regime text, comma-separated
            for several nodes), an intervention, or a sequence of them.
        control: The second arm, likewise; ``None`` (default) for no intervention, so the
            effect is that of ``treat`` alone (a shift, say).
        seeds: How many worlds (seeds ``0 .. seeds - 1``), or the seeds themselves (ints or
            ``SeedSequence``; ``world_seeds(seed, 0, samples)`` for an export's worlds).
        where: The cells the ATE averages over (a slice or its text); every cell by default.
        by: Slices for the CATE table: dimension names or tuples of them (their level
            combinations); each dimension alone by default.

    Raises:
        CausalTraceError: An unknown outcome, slice or dimension, or a malformed arm.
    """
    if outcome not in scm.nodes:
        raise CausalTraceError(f"SCM {scm.name!r} has no node {outcome!r}")
    treat_ivs, treat_text = _arm(treat, scm)
    control_ivs, control_text = _arm(control, scm)
    if not treat_ivs and not control_ivs:
        raise CausalTraceError("treat and control are both empty: the effect is zero")
    seed_list: tuple[Seed, ...] = tuple(range(seeds)) if isinstance(seeds, int) else tuple(seeds)
    if not seed_list:
        raise CausalTraceError("true_effect needs at least one seed")
    panel = scm.panel
    region = parse_slice(where, panel) if where is not None else Slice.of()
    mask = region.mask(panel)
    if not mask.any():
        raise CausalTraceError(f"slice {region.canonical()!r} holds no cell")
    treated = np.empty((len(seed_list), *panel.shape))
    controlled = np.empty_like(treated)
    for i, seed in enumerate(seed_list):  # one pair of simulations per world
        if control_ivs:
            treated[i] = scm.simulate(treat_ivs, seed=seed, counterfactual=False).factual[outcome]
            controlled[i] = scm.simulate(control_ivs, seed=seed, counterfactual=False).factual[
                outcome
            ]
        else:  # one simulation gives both: non-descendants are computed once
            worlds = scm.simulate(treat_ivs, seed=seed)
            treated[i] = worlds.factual[outcome]
            controlled[i] = worlds.counterfactual[outcome]
    effect = treated - controlled
    groups = [()] + [
        (d,) if isinstance(d, str) else tuple(d) for d in (by or panel.dimension_names)
    ]
    rows: list[SliceEffect] = []
    by_world = None
    for dims in groups:
        for text, units, means in _group_means(effect, panel, mask, dims):
            if not dims:
                by_world = means
                text = region.canonical()
            rows.append(SliceEffect(text, units, float(means.mean()), _se(means)))
    return TrueEffect(
        scm.name,
        outcome,
        treat_text,
        control_text,
        region.canonical(),
        panel,
        seed_list,
        treated,
        controlled,
        rows[0].cate,
        rows[0].se,
        by_world,
        tuple(rows),
    )


def export_truth(effect: TrueEffect, out: str | Path, *, name: str = "effect") -> list[Path]:
    """Write a true effect next to exported data, under ``out/truth/``.

    - ``<name>.json``: the contrast, the ATE and its Monte Carlo standard error, each world's
      average, the CATE table and the seeds;
    - ``<name>_by_slice.csv``: the CATE table (slice, n_units, cate, se);
    - ``<name>_per_unit.parquet``: one row per (world, cell, time step) in the export's order,
      with both potential outcomes and the effect.

    Args:
        effect: What :func:`true_effect` returned.
        out: The export's directory.
        name: The files' stem (one per contrast).

    Returns:
        The files written.
    """
    root = Path(out) / TRUTH_DIR
    files = {
        "summary": root / f"{name}.json",
        "by_slice": root / f"{name}_by_slice.csv",
        "per_unit": root / f"{name}_per_unit.parquet",
    }
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["slice", "n_units", "cate", "se"])
    writer.writerows((r.slice, r.n_units, repr(r.cate), repr(r.se)) for r in effect.by_slice)
    atomic_write_bytes(files["per_unit"], table_bytes(effect.frame()))
    atomic_write_text(files["by_slice"], buffer.getvalue())
    summary = effect.summary() | {
        "files": {k: str(p.relative_to(Path(out))) for k, p in files.items()}
    }
    atomic_write_text(files["summary"], canonical_json(summary))
    return [files["summary"], files["by_slice"], files["per_unit"]]


def _arm(arm: Arm, scm: SCM) -> tuple[tuple[Intervention, ...], tuple[str, ...]]:
    """An arm's interventions and their text."""
    if arm is None or (isinstance(arm, str) and not arm.strip()):
        return (), ()
    if isinstance(arm, str):
        regime = parse_regime(arm, scm, flag="arm")
        return (
            tuple(iv.intervention for iv in regime.interventions),
            tuple(iv.spec() for iv in regime.interventions),
        )
    ivs = (arm,) if isinstance(arm, Intervention) else tuple(arm)
    for iv in ivs:
        if not isinstance(iv, Intervention):
            raise CausalTraceError(f"an arm holds {iv!r}, not an intervention")
    return ivs, tuple(_text(iv) for iv in ivs)


def _text(iv: Intervention) -> str:
    """``kind:node=value[@slice]`` for a whole-window Do/Shift/Scale with a scalar value, its
    description otherwise."""
    kinds = {Do: ("do", "value"), Shift: ("shift", "delta"), Scale: ("scale", "factor")}
    if type(iv) in kinds and iv.window.onset == 0:
        kind, attr = kinds[type(iv)]
        value = np.asarray(getattr(iv, attr))
        if value.ndim == 0:
            at = f"@{iv.where.canonical()}" if not iv.where.is_whole_panel else ""
            return f"{kind}:{iv.node}={float(value)!r}{at}"
    return iv.describe()


def _group_means(
    effect: np.ndarray, panel: Panel, mask: np.ndarray, dims: tuple[str, ...]
) -> list[tuple[str, int, np.ndarray]]:
    """Per group of ``dims`` (within ``mask``): its slice text, units per world, and each
    world's average effect there."""
    index, n_groups = panel.group_index(dims)
    index = index[mask]
    onehot = np.zeros((index.size, n_groups))
    onehot[np.arange(index.size), index] = 1.0
    cells = onehot.sum(axis=0)
    sums = effect[:, mask, :].sum(axis=2) @ onehot  # (worlds, groups)
    firsts = np.flatnonzero(mask)[np.argmax(onehot, axis=0)]  # a cell of each group
    out = []
    for g in np.flatnonzero(cells):
        cell = firsts[g]
        text = Slice.of({d: str(panel.labels(d)[cell]) for d in dims}).canonical()
        units = int(cells[g]) * panel.n_time
        out.append((text, units, sums[:, g] / units))
    return out


def _se(values: np.ndarray) -> float:
    return float(values.std(ddof=1) / np.sqrt(values.size)) if values.size > 1 else float("nan")


def _seed_json(seed: Seed):
    if isinstance(seed, np.random.SeedSequence):
        return {"entropy": seed.entropy, "spawn_key": list(seed.spawn_key)}
    return int(seed)
