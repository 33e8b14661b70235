"""The answer schema agents submit, and the space of valid answers of a domain.

An answer is a JSON object::

    {"root_cause": "CHECKOUT_BUG", "slice": "channel=search&region=north"}

``slice`` is the canonical slice text (conditions in any order, whitespace tolerated), an object
form ``{"channel": "search", "region": "north"}``, or ``null``/absent for causes without a slice
(``""`` and ``"*"`` also mean "no slice": the whole panel). Two optional keys are understood:

- ``ranking``: the agent's candidate causes, best first (cause names or ``{"root_cause", "slice"}``
  objects); its first entry must be the answer itself. Used by RCAEval-style AC@k only.
- ``impact``: the agent's estimate of what the cause did to a KPI after the onset, inside the
  slice: ``{"kpi": "orders", "effect": -1200}`` (factual minus counterfactual) or
  ``{"kpi": "orders", "lost": 1200}``; a bare number is an ``effect``.
- ``onset``: when the agent thinks the cause started (a date text or a time index). Kept on the
  answer for rewards that want it; no built-in reward scores it.

Any other key is a format error unless the parse policy allows extra keys.

Several causes (an episode may have more than one root cause at work) are given as a list in
place of ``root_cause`` and ``slice``::

    {"causes": [{"root_cause": "CHECKOUT_BUG", "slice": "channel=search"},
                {"root_cause": "TRAFFIC_DROP", "slice": null}]}

Each entry has the keys ``root_cause`` and ``slice`` only; the list holds one to
``MAX_CAUSES`` entries. A cause may be named more than once, on different slices (two bid
changes on two campaigns are two causes of one kind); the same cause on the same canonical
slice twice is a format error, and so is a cause that takes no slice named twice (its entries
are the same entry). The first entry is the answer's ``root_cause``/``slice`` (what
``ranking``, ``impact`` and ``onset`` refer to) and the others its ``also``. A one-entry list
is the same answer as the single form.

:class:`AnswerSpace` holds what a reward worker needs to check and score answers without the SCM:
the cause names, which causes take a slice, each cause's group, the panel's dimensions, levels
and leaf cells (slice Jaccard is computed over leaf cells). Build it with
:meth:`AnswerSpace.from_scm`; it round-trips through JSON (:meth:`to_json`/:meth:`from_json`).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from causaltrace.errors import CausalTraceError, SliceError
from causaltrace.model.slices import parse_slice

NO_SIGNAL_GROUP = "no-signal"
DEFAULT_GROUP = "default"
ANSWER_KEYS = ("root_cause", "slice", "ranking", "impact", "onset", "causes")
MAX_RANKING = 64
MAX_CAUSES = 64


class AnswerFormatError(CausalTraceError):
    """An agent's answer is malformed or names something the answer space does not have."""


@dataclass(frozen=True)
class Candidate:
    """One entry of a ranked answer: a cause and, optionally, its slice (canonical text)."""

    root_cause: str
    slice: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"root_cause": self.root_cause, "slice": self.slice}


@dataclass(frozen=True)
class Impact:
    """The agent's estimate of a cause's effect on a KPI: factual minus counterfactual."""

    effect: float
    kpi: str | None = None

    @property
    def lost(self) -> float:
        return -self.effect


@dataclass(frozen=True)
class Answer:
    """A validated answer. ``slice`` is canonical text or ``None`` (no slice / whole panel).

    ``also`` holds the further causes of an answer that names several (``{"causes": [...]}``);
    :attr:`causes` is every answered ``Candidate``, the first one first."""

    root_cause: str
    slice: str | None = None
    ranking: tuple[Candidate, ...] = ()
    impact: Impact | None = None
    onset: str | int | None = None
    also: tuple[Candidate, ...] = ()

    @property
    def causes(self) -> tuple[Candidate, ...]:
        """Every answered cause with its slice (one for a single-cause answer)."""
        return (Candidate(self.root_cause, self.slice), *self.also)

    @property
    def ranked(self) -> tuple[Candidate, ...]:
        """The ranked candidates; a single answer is a ranking of length one."""
        return self.ranking or (Candidate(self.root_cause, self.slice),)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"root_cause": self.root_cause, "slice": self.slice}
        if self.also:
            out = {"causes": [c.to_dict() for c in self.causes]}
        if self.ranking:
            out["ranking"] = [c.to_dict() for c in self.ranking]
        if self.impact is not None:
            out["impact"] = {"kpi": self.impact.kpi, "effect": self.impact.effect}
        if self.onset is not None:
            out["onset"] = self.onset
        return out


@dataclass(frozen=True, eq=False)
class AnswerSpace:
    """The valid answers of a domain: causes, their slices and groups, and the panel's cells.

    - ``causes``: cause names, in the domain's order.
    - ``sliced``: the causes that take a slice (their prior has a slice narrower than the panel).
    - ``groups``: cause name to group name (``"no-signal"`` marks a no-signal cause).
    - ``dimensions``: ``(name, levels)`` pairs of the panel's segment dimensions.
    - ``cells``: leaf cells as integer level codes, shape ``(n_cells, n_dims)``.
    - ``slice_dims``: per sliced cause, the dimension sets its slices may use.
    - ``allowed_levels``: per cause, optional restriction of levels per dimension.
    """

    causes: tuple[str, ...]
    sliced: frozenset[str]
    groups: Mapping[str, str]
    dimensions: tuple[tuple[str, tuple[str, ...]], ...]
    cells: np.ndarray = field(repr=False)
    slice_dims: Mapping[str, tuple[tuple[str, ...], ...]] = field(default_factory=dict)
    allowed_levels: Mapping[str, Mapping[str, tuple[str, ...]]] = field(default_factory=dict)
    name: str = ""

    def __post_init__(self) -> None:
        causes = tuple(str(c) for c in self.causes)
        if not causes:
            raise ValueError("an answer space needs at least one cause")
        if len(set(causes)) != len(causes):
            raise ValueError(f"answer space lists a cause twice: {causes}")
        object.__setattr__(self, "causes", causes)
        sliced = frozenset(self.sliced)
        unknown = sliced - set(causes)
        if unknown:
            raise ValueError(f"sliced causes {sorted(unknown)} are not among the causes")
        object.__setattr__(self, "sliced", sliced)
        object.__setattr__(
            self, "groups", {c: str(self.groups.get(c, DEFAULT_GROUP)) for c in causes}
        )
        dims = tuple((str(n), tuple(str(v) for v in levels)) for n, levels in self.dimensions)
        object.__setattr__(self, "dimensions", dims)
        cells = np.asarray(self.cells, dtype=np.int64).reshape(-1, len(dims))
        if cells.shape[0] == 0:
            raise ValueError("an answer space needs at least one leaf cell")
        for j, (dim_name, levels) in enumerate(dims):
            if cells[:, j].min() < 0 or cells[:, j].max() >= len(levels):
                raise ValueError(f"cell codes of dimension {dim_name!r} out of range")
        cells.setflags(write=False)
        object.__setattr__(self, "cells", cells)
        object.__setattr__(
            self,
            "slice_dims",
            {
                c: tuple(tuple(str(d) for d in ds) for ds in self.slice_dims.get(c, ((),)))
                for c in causes
            },
        )
        object.__setattr__(
            self,
            "allowed_levels",
            {
                c: {str(d): tuple(v) for d, v in dict(self.allowed_levels.get(c, {})).items()}
                for c in causes
            },
        )
        object.__setattr__(self, "_masks", {})
        object.__setattr__(self, "_level_index", {n: set(lv) for n, lv in dims})

    # -- construction -------------------------------------------------------------------
    @classmethod
    def from_scm(cls, scm, *, name: str | None = None) -> AnswerSpace:
        """The answer space of an SCM: its intervention points and its panel's leaf cells.

        A cause takes a slice when its prior has one (``prior.has_slice``); its group is
        ``point.info.group`` (``"default"`` if the domain declares none).

        Args:
            scm (SCM): The model whose intervention points are the causes.
            name: The space's name; the SCM's name by default.
        """
        points = list(scm.intervention_points.values())
        panel = scm.panel
        return cls(
            causes=tuple(p.name for p in points),
            sliced=frozenset(p.name for p in points if p.prior.has_slice),
            groups={p.name: p.info.group or DEFAULT_GROUP for p in points},
            dimensions=tuple((d.name, d.levels) for d in panel.dimensions),
            cells=panel.cells,
            slice_dims={p.name: p.prior.slice_dims for p in points},
            allowed_levels={p.name: dict(p.prior.allowed_levels) for p in points},
            name=name if name is not None else getattr(scm, "name", ""),
        )

    @classmethod
    def create(
        cls,
        causes: Mapping[str, Mapping[str, Any]],
        dimensions: Mapping[str, Sequence[str]],
        *,
        cells: Iterable[Sequence[str]] | None = None,
        name: str = "",
    ) -> AnswerSpace:
        """A space from plain data (tests, or domains without an SCM at hand).

        ``causes`` maps a cause to ``{"group": ..., "slice_dims": [[dim, ...], ...]}``; a cause
        takes a slice when one of its ``slice_dims`` is non-empty. ``cells`` lists leaf cells
        as level names (default: the full cross product of ``dimensions``).

        Args:
            causes: Each cause's ``group``, ``slice_dims`` and optionally ``allowed_levels``
                (dimension to the levels the cause may take).
            dimensions: Each dimension's levels, in order.
            cells: The leaf cells; the full cross product by default.
            name: The space's name; empty by default.
        """
        dims = tuple((n, tuple(lv)) for n, lv in dimensions.items())
        if cells is None:
            codes = _cross_codes([len(lv) for _, lv in dims])
        else:
            codes = np.array(
                [[dims[j][1].index(level) for j, level in enumerate(cell)] for cell in cells],
                dtype=np.int64,
            )
        slice_dims = {
            c: tuple(tuple(d) for d in spec.get("slice_dims", ((),))) for c, spec in causes.items()
        }
        return cls(
            causes=tuple(causes),
            sliced=frozenset(c for c, sd in slice_dims.items() if any(sd)),
            groups={c: spec.get("group", DEFAULT_GROUP) for c, spec in causes.items()},
            dimensions=dims,
            cells=codes,
            slice_dims=slice_dims,
            allowed_levels={c: spec.get("allowed_levels", {}) for c, spec in causes.items()},
            name=name,
        )

    # -- serialization ------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """A JSON-serializable form; ``cells`` is ``null`` for a full cross product."""
        full = _cross_codes([len(lv) for _, lv in self.dimensions])
        is_cross = full.shape == self.cells.shape and bool(np.array_equal(full, self.cells))
        return {
            "name": self.name,
            "causes": [
                {
                    "name": c,
                    "group": self.groups[c],
                    "sliced": c in self.sliced,
                    "slice_dims": [list(ds) for ds in self.slice_dims[c]],
                    "allowed_levels": {d: list(v) for d, v in self.allowed_levels[c].items()},
                }
                for c in self.causes
            ],
            "dimensions": [{"name": n, "levels": list(lv)} for n, lv in self.dimensions],
            "cells": None if is_cross else self.cells.tolist(),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AnswerSpace:
        dims = tuple((d["name"], tuple(d["levels"])) for d in data["dimensions"])
        cells = data.get("cells")
        codes = _cross_codes([len(lv) for _, lv in dims]) if cells is None else np.asarray(cells)
        causes = data["causes"]
        return cls(
            causes=tuple(c["name"] for c in causes),
            sliced=frozenset(c["name"] for c in causes if c.get("sliced")),
            groups={c["name"]: c.get("group", DEFAULT_GROUP) for c in causes},
            dimensions=dims,
            cells=codes,
            slice_dims={
                c["name"]: tuple(tuple(d) for d in c.get("slice_dims", [[]])) for c in causes
            },
            allowed_levels={c["name"]: c.get("allowed_levels", {}) for c in causes},
            name=data.get("name", ""),
        )

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> AnswerSpace:
        return cls.from_dict(json.loads(text))

    def fingerprint(self) -> str:
        """A short content hash, used to cache rebuilt spaces in reward workers."""
        return hashlib.sha256(self.to_json().encode()).hexdigest()[:16]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AnswerSpace) and self.to_json() == other.to_json()

    def __hash__(self) -> int:
        return hash(self.fingerprint())

    # -- queries ------------------------------------------------------------------------
    @property
    def n_cells(self) -> int:
        return int(self.cells.shape[0])

    @property
    def dimension_names(self) -> tuple[str, ...]:
        return tuple(n for n, _ in self.dimensions)

    def levels(self, dim: str) -> tuple[str, ...]:
        for n, lv in self.dimensions:
            if n == dim:
                return lv
        raise AnswerFormatError(
            f"unknown dimension {dim!r}; known dimensions: {', '.join(self.dimension_names) or '(none)'}"
        )

    def takes_slice(self, cause: str) -> bool:
        return cause in self.sliced

    def group(self, cause: str) -> str:
        return self.groups.get(cause, DEFAULT_GROUP)

    def group_names(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(self.groups[c] for c in self.causes))

    def check_cause(self, cause: Any) -> str:
        """The cause name, or :class:`AnswerFormatError` naming the known causes.

        Args:
            cause: The answered cause; surrounding whitespace is dropped.

        Raises:
            AnswerFormatError: ``cause`` is not a string or not a known cause.
        """
        if not isinstance(cause, str):
            raise AnswerFormatError(
                f"root_cause must be one cause name (a string), got {_type_name(cause)}"
            )
        name = cause.strip()
        if name not in self.groups:
            shown = name if len(name) <= 60 else name[:57] + "..."
            raise AnswerFormatError(
                f"unknown root cause {shown!r}; known causes: {', '.join(self.causes)}"
            )
        return name

    def canonical_slice(self, value: Any) -> str | None:
        """Canonical text of a slice given as text, an object or ``None``; ``None`` = whole panel.

        Raises :class:`AnswerFormatError` for a malformed slice, an unknown dimension or level,
        a repeated dimension, or a slice that matches no leaf cell.

        Args:
            value: Slice text like ``"dim=level&dim=level"``, an object mapping dimensions to
                levels, or ``None``.
        """
        if value is None:
            return None
        if isinstance(value, str) and value.strip() in _NULL_TEXTS:
            # A null written as text: what XML tool-call formats carry (Qwen3.5's template
            # renders a Python None as "None"); no slice text has this form.
            return None
        if isinstance(value, Mapping):
            for key, level in value.items():
                if not isinstance(key, str) or not isinstance(level, str):
                    raise AnswerFormatError(
                        "a slice object maps each dimension to one level (a string), got "
                        f"{key!r}: {_type_name(level)}"
                    )
        elif not isinstance(value, str):
            raise AnswerFormatError(
                f"slice must be text like 'dim=level&dim=level', an object or null, got {_type_name(value)}"
            )
        elif len(value) > 1000:
            raise AnswerFormatError(f"slice text is too long ({len(value)} characters)")
        try:
            sl = parse_slice(value)
        except SliceError as exc:
            raise AnswerFormatError(str(exc)) from None
        for dim, level in sl.conditions:
            if dim not in self._level_index:
                raise AnswerFormatError(
                    f"slice {sl.canonical()!r}: unknown dimension {dim!r}; known dimensions: "
                    f"{', '.join(self.dimension_names) or '(none)'}"
                )
            if level not in self._level_index[dim]:
                raise AnswerFormatError(
                    f"slice {sl.canonical()!r}: unknown level {level!r} of dimension {dim!r}; "
                    f"known levels: {', '.join(self.levels(dim))}"
                )
        text = sl.canonical() or None
        if text is not None and not self.mask(text).any():
            raise AnswerFormatError(f"slice {text!r} matches no cell of the panel")
        return text

    def mask(self, slice_text: str | None) -> np.ndarray:
        """Boolean mask over the leaf cells covered by a canonical slice (``None``: all).

        Args:
            slice_text: A canonical slice, or ``None`` (or empty) for the whole panel.
        """
        key = slice_text or ""
        cache: dict[str, np.ndarray] = self._masks  # type: ignore[attr-defined]
        if key not in cache:
            mask = np.ones(self.n_cells, dtype=bool)
            for dim, level in parse_slice(key).conditions:
                j = self.dimension_names.index(dim)
                mask &= self.cells[:, j] == self.levels(dim).index(level)
            mask.setflags(write=False)
            if len(cache) > 4096:
                cache.clear()
            cache[key] = mask
        return cache[key]

    def coverage(self, slice_text: str | None) -> float:
        """Share of the leaf cells a slice covers (1 for the whole panel).

        Args:
            slice_text: A canonical slice, or ``None`` for the whole panel.
        """
        return float(self.mask(slice_text).sum()) / self.n_cells

    def jaccard(self, a: str | None, b: str | None) -> float:
        """Jaccard similarity of the leaf cells covered by two slices (``None``: whole panel).

        Args:
            a: A canonical slice, or ``None`` for the whole panel.
            b: The other slice, the same way.
        """
        ma, mb = self.mask(a), self.mask(b)
        union = int(np.count_nonzero(ma | mb))
        return float(np.count_nonzero(ma & mb)) / union if union else 1.0

    def candidate_slices(self, cause: str) -> list[str | None]:
        """Every slice a cause's prior may draw (canonical text; ``None`` for the whole panel).

        Args:
            cause: The cause; one with no slice dimensions gets only ``None``.
        """
        out: list[str | None] = []
        allowed = self.allowed_levels.get(cause, {})
        for dims in self.slice_dims.get(cause, ((),)):
            if not dims:
                out.append(None)
                continue
            idx = [self.dimension_names.index(d) for d in dims]
            for row in np.unique(self.cells[:, idx], axis=0):
                conds = {d: self.levels(d)[c] for d, c in zip(dims, row)}
                if all(level in allowed.get(d, (level,)) for d, level in conds.items()):
                    out.append(parse_slice(conds).canonical())
        return list(dict.fromkeys(out))

    # -- answers --------------------------------------------------------------------------
    def answer_from_object(
        self, obj: Any, *, allow_extra_keys: bool = False
    ) -> tuple[Answer, tuple[str, ...]]:
        """Validate a decoded answer object; return the answer and notes on what was normalized.

        Raises :class:`AnswerFormatError` with the reason when the object is not a valid answer.

        Args:
            obj: The decoded JSON answer.
            allow_extra_keys: Ignore keys that are not answer keys; off (they are an error) by
                default.
        """
        if not isinstance(obj, Mapping):
            raise AnswerFormatError(f"an answer must be a JSON object, got {_type_name(obj)}")
        notes: list[str] = []
        extra = [k for k in obj if k not in ANSWER_KEYS]
        if extra and not allow_extra_keys:
            shown = ", ".join(repr(k)[:40] for k in extra[:5])
            raise AnswerFormatError(
                f"unknown answer key(s) {shown}; an answer has keys {', '.join(ANSWER_KEYS)}"
            )
        also: tuple[Candidate, ...] = ()
        if "causes" in obj:
            if "root_cause" in obj or "slice" in obj:
                raise AnswerFormatError(
                    "an answer has either 'root_cause' and 'slice' (one cause) or 'causes' "
                    "(a list of them), not both"
                )
            first, *rest = self._causes(obj["causes"], notes)
            cause, sl, also = first.root_cause, first.slice, tuple(rest)
        else:
            if "root_cause" not in obj:
                raise AnswerFormatError("the answer has no 'root_cause' (nor 'causes')")
            cause, sl = self._entry(obj["root_cause"], obj.get("slice"), notes)
        ranking = self._ranking(obj.get("ranking"), cause, sl) if "ranking" in obj else ()
        impact = self._impact(obj["impact"]) if obj.get("impact") is not None else None
        onset = obj.get("onset")
        if onset is not None and not (
            (isinstance(onset, str) and len(onset) <= 40)
            or (isinstance(onset, int) and not isinstance(onset, bool))
        ):
            raise AnswerFormatError("onset must be a date text or a time index")
        if isinstance(onset, str):
            onset = onset.strip()
        return Answer(cause, sl, ranking, impact, onset, also), tuple(notes)

    def _entry(self, cause: Any, slice_value: Any, notes: list[str]) -> tuple[str, str | None]:
        """One cause and its canonical slice (dropped, with a note, for a cause without one)."""
        cause = self.check_cause(cause)
        sl = self.canonical_slice(slice_value)
        if sl is not None and cause not in self.sliced:
            notes.append(f"slice {sl!r} ignored: {cause} takes no slice")
            sl = None
        return cause, sl

    def _causes(self, value: Any, notes: list[str]) -> list[Candidate]:
        """The entries of a ``causes`` list, each named by its position in errors (a list
        given as JSON text, as the flat submit tool takes it, is decoded first)."""
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError:
                raise AnswerFormatError(
                    "causes must be a list of {'root_cause', 'slice'} objects (or that list as "
                    "JSON text), got text that is not JSON"
                ) from None
        if not isinstance(value, list):
            raise AnswerFormatError(
                "causes must be a list of {'root_cause', 'slice'} objects, got "
                f"{_type_name(value)}"
            )
        if not value:
            raise AnswerFormatError("causes is an empty list; name at least one cause")
        if len(value) > MAX_CAUSES:
            raise AnswerFormatError(f"causes has {len(value)} entries; at most {MAX_CAUSES}")
        out: list[Candidate] = []
        seen: dict[Candidate, int] = {}
        for i, entry in enumerate(value):
            where = f"causes[{i}]"
            if not isinstance(entry, Mapping):
                raise AnswerFormatError(
                    f"{where} must be an object {{'root_cause', 'slice'}}, got {_type_name(entry)}"
                )
            extra = [k for k in entry if k not in ("root_cause", "slice")]
            if extra:
                shown = ", ".join(repr(k)[:40] for k in extra[:5])
                raise AnswerFormatError(
                    f"{where} has unknown key(s) {shown}; an entry has keys root_cause and slice"
                )
            if "root_cause" not in entry:
                raise AnswerFormatError(f"{where} has no 'root_cause'")
            try:
                cause, sl = self._entry(entry["root_cause"], entry.get("slice"), notes)
            except AnswerFormatError as exc:
                raise AnswerFormatError(f"{where}: {exc}") from None
            candidate = Candidate(cause, sl)
            if candidate in seen:
                raise AnswerFormatError(_repeated_entry(candidate, seen[candidate], i, self))
            seen[candidate] = i
            out.append(candidate)
        return out

    def _ranking(self, value: Any, cause: str, sl: str | None) -> tuple[Candidate, ...]:
        if not isinstance(value, list) or not value:
            raise AnswerFormatError("ranking must be a non-empty list of causes, best first")
        if len(value) > MAX_RANKING:
            raise AnswerFormatError(f"ranking has {len(value)} entries; at most {MAX_RANKING}")
        out: list[Candidate] = []
        for entry in value:
            if isinstance(entry, Mapping):
                if set(entry) - {"root_cause", "slice"}:
                    raise AnswerFormatError("a ranking entry has keys root_cause and slice only")
                c = self.check_cause(entry.get("root_cause"))
                s = self.canonical_slice(entry.get("slice"))
                out.append(Candidate(c, s if c in self.sliced else None))
            else:
                out.append(Candidate(self.check_cause(entry)))
        if len(set(out)) != len(out):
            raise AnswerFormatError("ranking lists a candidate twice")
        if out[0].root_cause != cause or (out[0].slice is not None and out[0].slice != sl):
            raise AnswerFormatError("the ranking's first entry must be the answer itself")
        out[0] = Candidate(cause, sl)
        return tuple(out)

    @staticmethod
    def _impact(value: Any) -> Impact:
        kpi = None
        if isinstance(value, Mapping):
            if set(value) - {"kpi", "effect", "lost"} or ("effect" in value) == ("lost" in value):
                raise AnswerFormatError(
                    "impact is {'kpi': name, 'effect': number} or {'kpi': name, 'lost': number}"
                )
            kpi = value.get("kpi")
            if kpi is not None and not isinstance(kpi, str):
                raise AnswerFormatError("impact.kpi must be a KPI name")
            number = value["effect"] if "effect" in value else value["lost"]
            sign = 1.0 if "effect" in value else -1.0
        else:
            number, sign = value, 1.0
        if isinstance(number, bool) or not isinstance(number, int | float):
            raise AnswerFormatError(f"impact must be a number, got {_type_name(number)}")
        if not math.isfinite(float(number)):
            raise AnswerFormatError("impact must be a finite number")
        return Impact(sign * float(number), kpi)

    def answer_json_schema(self) -> dict[str, Any]:
        """A JSON Schema of the answer (e.g. for a ``submit`` tool's parameters).

        The schema cannot express every check (levels per dimension, slices that exist);
        :meth:`answer_from_object` is the authority.
        """
        return {
            "type": "object",
            "properties": {
                "root_cause": {"type": "string", "enum": list(self.causes)},
                "slice": {
                    "type": ["string", "null"],
                    "description": "conditions 'dim=level' joined by '&', or null for no slice; "
                    "dimensions: "
                    + "; ".join(f"{n} in {{{', '.join(lv)}}}" for n, lv in self.dimensions),
                },
            },
            "required": ["root_cause"],
            "additionalProperties": False,
        }


_NULL_TEXTS = frozenset({"null", "None", "none", "NULL"})


def _repeated_entry(entry: Candidate, first: int, again: int, space: AnswerSpace) -> str:
    """The error for a ``causes`` entry that repeats an earlier one (same cause, same slice)."""
    where = f"causes[{again}] names {entry.root_cause} again (first at causes[{first}])"
    if not space.takes_slice(entry.root_cause):
        return f"{where}; {entry.root_cause} takes no slice, so name it once"
    shown = "no slice (the whole panel)" if entry.slice is None else f"slice {entry.slice!r}"
    return (
        f"{where} with the same {shown}; a cause named more than once needs a different "
        "slice in each entry"
    )


def _cross_codes(sizes: Sequence[int]) -> np.ndarray:
    if not sizes:
        return np.zeros((1, 0), dtype=np.int64)
    grids = np.meshgrid(*[np.arange(n) for n in sizes], indexing="ij")
    return np.stack([g.ravel() for g in grids], axis=1).astype(np.int64)


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "text"
    return type(value).__name__
