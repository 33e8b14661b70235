"""The code the teacher types into the python tool, and reading back what it printed.

Every statistic the teacher's words cite is computed here, inside the row, by code the row
shows: a model imitating the row learns to compute the numbers, not to recite them. One helper,
``shift``, is defined in the first cell and called by the rest. It compares each signature's
daily log value over the last ``window`` buckets with the ``baseline`` buckets before them (the
monitor's comparison, leaving out the ``gap`` buckets between them where an earlier onset
would already move the baseline), over the whole table or per level of a dimension against the rest of the
table (so that what moves everywhere cancels), each bucket less the baseline's mean at its
phase of ``period`` (a weekday pattern of daily data), and gives the z of that move over the
buckets' own spread (Welch's standard error of the two means). It prints
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


def shift(frame, by, signatures, time, window, baseline, gap=0, period=1, top=3):
    """Each signature's move over the last `window` buckets against the `baseline` buckets
    that end `gap` buckets before them: per level of `by` against the rest (by=None: the
    whole table), each bucket less the baseline's mean at its phase of `period`; z over the
    buckets' spread."""
    times = np.sort(frame[time].unique())[-window - gap - baseline:]
    after, before = times[-window:], times[:baseline]
    frame = frame[frame[time].isin(times)]
    columns = sorted({c for num, den, _ in signatures.values() for c in (num, den) if c})
    whole = frame.groupby(time)[columns].sum()
    rows = []
    for level in [None] if by is None else sorted(frame[by].dropna().unique()):
        if level is None:
            part, rest = whole, None
        else:
            part = frame[frame[by] == level].groupby(time)[columns].sum()
            part = part.reindex(whole.index, fill_value=0)
            rest = whole - part
        for name, (num, den, sign) in signatures.items():
            def log_value(t):
                return np.log(t[num] + 0.5) - (np.log(t[den] + 0.5) if den else 0.0)

            daily = log_value(part) - (0.0 if rest is None else log_value(rest))
            phase = np.arange(len(daily)) % period
            base = daily[daily.index.isin(before)].groupby(phase[: len(before)]).mean()
            daily = daily - base.reindex(phase).to_numpy()
            a, b = daily[daily.index.isin(after)], daily[daily.index.isin(before)]
            se = np.sqrt(a.var(ddof=1) / len(a) + b.var(ddof=1) / len(b))
            z = (a.mean() - b.mean()) / max(se, 1e-9)

            def value(days):
                top_sum = part.loc[part.index.isin(days), num].sum()
                bottom = part.loc[part.index.isin(days), den].sum() if den else len(days)
                return top_sum / bottom if bottom else float("nan")

            then, now = value(before), value(after)
            rows.append({
                "signature": name, by or "scope": "all" if level is None else level,
                "before": f"{then:.4g}", "after": f"{now:.4g}",
                "change": f"{now / then - 1:+.1%}" if then else "n/a",
                "z": f"{z:+.1f}", "toward_cause": sign * z,
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


def signature_literal(signatures: Sequence[Signature]) -> str:
    """The ``signatures`` argument as the cell spells it: label -> (numerator, denominator,
    direction)."""
    items = ", ".join(
        f"{s.label!r}: ({s.numerator!r}, {s.denominator!r}, {s.direction})" for s in signatures
    )
    return "{" + items + "}"


def shift_cell(
    spec: InvestigationSpec,
    signatures: Sequence[Signature],
    by: str | None,
    *,
    within: tuple[str, str] | None = None,
    define: bool = False,
) -> str:
    """The python cell measuring ``signatures`` over the table (``by`` None) or per level of
    ``by``, inside the ``within`` (dimension, level) if given; ``define`` prefixes the helper."""
    frame = spec.table
    if within is not None:
        frame = f"{spec.table}[{spec.table}[{within[0]!r}] == {within[1]!r}]"
    call = (
        f"shift({frame}, {by!r}, {signature_literal(signatures)}, {spec.time!r}, "
        f"window={spec.window}, baseline={spec.baseline}, gap={spec.gap}, "
        f"period={spec.period}, top={TOP})"
    )
    return f"{HELPER}\n\n{call}\n" if define else call + "\n"


def read_shift(text: str, by: str | None) -> list[Reading]:
    """The rows a ``shift`` cell printed ([] for an error or no rows)."""
    lines = [line.split(" | ") for line in text.strip().splitlines() if " | " in line]
    key = by or "scope"
    if not lines or lines[0] != ["signature", key, "before", "after", "change", "z"]:
        return []
    return [Reading(r[0], by, *r[1:]) for r in lines[1:] if len(r) == 6]
