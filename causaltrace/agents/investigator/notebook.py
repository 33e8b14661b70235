"""The code the teacher types into the python tool, and reading back what it printed.

Every statistic the teacher's words cite is computed here, inside the row, by code the row
shows: a model imitating the row learns to compute the numbers, not to recite them. One helper,
``shift``, is defined in the first cell and called by the rest. It compares each signature's
daily log value over the last ``window`` buckets with the ``baseline`` buckets before them (the
monitor's comparison, leaving out the ``gap`` buckets between them where an earlier onset
would already move the baseline), over the whole table or per level of a dimension against the rest of the
table (so that what moves everywhere cancels), each bucket less the baseline's mean at its
phase of ``period`` (a weekday pattern of daily data), and gives the z of the median move
after (robust to a blip) over its standard error under no change: the baseline's residual spread (one mean fitted per
phase), with the phase means' own error. ``change`` is that move (against the rest, for a
level); ``before`` and ``after`` are the scope's own values over the baseline's buckets of the
same phases and over the window. It prints
the few strongest levels per signature, one row a line with ` | ` between the values (not
commas, which read as thousands separators), so that outputs stay short whatever the
number of levels.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from causaltrace.agents.investigator.spec import InvestigationSpec, Signature

TOP = 3  # levels printed per signature and dimension

HELPER = '''\
import numpy as np
import pandas as pd


def shift(frame, by, signatures, time, window, baseline, gap=0, period=1, top=3, wide=False):
    """Each signature's move over the last `window` buckets against the `baseline` buckets
    that end `gap` buckets before them, per level of `by` against the rest (by=None: the
    whole table). Each bucket's log value is taken less the baseline's mean at its phase of
    `period`; `change` is the median move after (a cause persists, a blip of a bucket or two
    does not move the median), `z` that move over its standard error from the baseline's own
    spread (what no change would give; a median's variance is pi/2 times a mean's), or with
    `wide` from the window's spread where that is larger (inside a level a cause hit, counts
    and so noise change)."""
    times = np.sort(frame[time].unique())[-window - gap - baseline:]
    after, before = times[-window:], times[:baseline]
    frame = frame[frame[time].isin(times)]
    columns = sorted({c for num, den, _ in signatures.values() for c in (num, den) if c})
    whole = frame.groupby(time)[columns].sum().reindex(times, fill_value=0)
    phase = np.arange(len(times)) % period
    is_after, is_before = np.isin(times, after), np.isin(times, before)
    same_phase = is_before & np.isin(phase, phase[is_after])  # the baseline's matching buckets
    rows = []
    for level in [None] if by is None else sorted(frame[by].dropna().unique()):
        if level is None:
            part, rest = whole, None
        else:
            part = frame[frame[by] == level].groupby(time)[columns].sum()
            part = part.reindex(times, fill_value=0)
            rest = whole - part
        for name, (num, den, sign) in signatures.items():
            def log_value(t):
                return np.log(t[num] + 0.5) - (np.log(t[den] + 0.5) if den else 0.0)

            daily = (log_value(part) - (0.0 if rest is None else log_value(rest))).to_numpy()
            by_phase = pd.Series(daily[is_before]).groupby(phase[is_before])
            base, k = by_phase.mean(), by_phase.size()
            resid = daily - base.reindex(phase).to_numpy()
            a, b = resid[is_after], resid[is_before]
            s2 = (b**2).sum() / max(len(b) - len(base), 1)  # one mean fitted per phase
            count = pd.Series(phase[is_after]).value_counts()
            s2_after = max(a.var(ddof=1), s2) if wide and len(a) > 1 else s2
            phase_error = (count**2 / k.reindex(count.index)).sum() / len(a) ** 2
            var = np.pi / 2 * s2_after / len(a) + s2 * phase_error
            move = np.median(a)
            z = move / max(np.sqrt(var), 1e-9)

            def value(mask):
                top_sum = part[num].to_numpy()[mask].sum()
                bottom = part[den].to_numpy()[mask].sum() if den else mask.sum()
                return top_sum / bottom if bottom else float("nan")

            rows.append({
                "signature": name, by or "scope": "all" if level is None else level,
                "before": f"{value(same_phase):.4g}", "after": f"{value(is_after):.4g}",
                "change": f"{np.exp(move) - 1:+.1%}", "z": f"{z:+.1f}",
                "toward_cause": sign * z,
            })
    out = pd.DataFrame(rows).sort_values("toward_cause", ascending=False, kind="stable")
    out = out.groupby("signature", sort=False).head(top).drop(columns="toward_cause")
    for row in [list(out.columns), *out.astype(str).to_numpy().tolist()]:
        print(" | ".join(row))
'''


@dataclass(frozen=True)
class Reading:
    """One printed row: a signature's move over one scope (``level`` ``all``: the table)."""

    signature: str
    dim: str | None
    level: str
    before: str
    after: str
    change: str
    z: str

    @property
    def z_value(self) -> float:
        try:
            return float(self.z)
        except ValueError:
            return 0.0

    @property
    def move(self) -> float:
        """``change`` as a fraction (``-12.5%``: -0.125; unreadable: 0)."""
        try:
            return float(self.change.rstrip("%")) / 100
        except ValueError:
            return 0.0


def signature_literal(signatures: Sequence[Signature]) -> str:
    """The ``signatures`` argument as the cell spells it: label -> (numerator, denominator,
    direction)."""
    items = ", ".join(
        f"{s.label!r}: ({s.numerator!r}, {s.denominator!r}, {s.direction})" for s in signatures
    )
    return "{" + items + "}"


def frame_of(sig: Signature, within: tuple[str, str] | None = None) -> str:
    """The frame a signature is read from, as the cell spells it: its table, its columns
    renamed to the slice dimensions, kept to the levels it can act on (and to ``within``)."""
    frame = sig.table
    if sig.columns:
        renames = {column: dim for dim, column in sig.columns}
        frame += f".rename(columns={renames!r})"
    keep = [f"f[{dim!r}].isin({list(levels)!r})" for dim, levels in sig.levels]
    if within is not None:
        keep.append(f"(f[{within[0]!r}] == {within[1]!r})")
    if keep:
        frame += f".pipe(lambda f: f[{' & '.join(keep)}])"
    return frame


def views_code(spec: InvestigationSpec) -> str:
    """The lines that make the spec's views (joined tables, derived columns)."""
    lines = []
    for view in spec.views:
        first, *rest = view.sources
        expr = first + "".join(f".merge({t}, on={list(view.on)!r})" for t in rest)
        lines.append(f"{view.name} = {expr}" if rest else f"{view.name} = {first}.copy()")
        lines += [f"{view.name}[{c!r}] = {view.name}.eval({e!r})" for c, e in view.derive]
    return "\n".join(lines)


def shift_cell(
    spec: InvestigationSpec,
    signatures: Sequence[Signature],
    by: str | None,
    *,
    within: tuple[str, str] | None = None,
    define: bool = False,
) -> str:
    """The python cell measuring ``signatures`` over their tables (``by`` None) or per level
    of ``by``, inside the ``within`` (dimension, level) if given: one ``shift`` call per frame
    the signatures are read from. ``define`` prefixes the helper and the views."""
    frames: dict[str, list[Signature]] = {}
    for sig in signatures:
        frames.setdefault(frame_of(sig, within), []).append(sig)
    wide = ", wide=True" if within is not None else ""
    calls = "\n".join(
        f"shift({frame}, {by!r}, {signature_literal(sigs)}, {spec.time!r}, "
        f"window={spec.window}, baseline={spec.baseline}, gap={spec.gap}, "
        f"period={spec.period}, top={TOP}{wide})"
        for frame, sigs in frames.items()
    )
    if not define:
        return calls + "\n"
    views = views_code(spec)
    return f"{HELPER}\n\n" + (f"{views}\n\n" if views else "") + f"{calls}\n"


def read_shift(text: str, by: str | None) -> list[Reading]:
    """The rows the ``shift`` calls of a cell printed ([] for an error or no rows)."""
    header = ["signature", by or "scope", "before", "after", "change", "z"]
    lines = [line.split(" | ") for line in text.strip().splitlines() if " | " in line]
    if not lines or lines[0] != header:
        return []
    return [Reading(r[0], by, *r[1:]) for r in lines if r != header and len(r) == 6]
