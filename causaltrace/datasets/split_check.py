"""Checking an existing split: does it hold what this config and this generator make?

A split's identity is what it holds: its config and its episodes' checksums
(:mod:`causaltrace.datasets.content`). Every done record and the manifest state the resolved
config (domain, dataset, verifier) and, as provenance, the generator's fingerprint (package
version, a hash of the generator's source, versions of the numerical libraries). A run into a
directory whose manifest or done records state another *config* refuses with a
:class:`DatasetMismatchError` naming each differing key and both values: shards of two configs
are never mixed in one dataset. A recorded *fingerprint* that differs from this generator's (a
refactor, a new release) is not a mismatch by itself: a deterministic sample of the episodes it
made (:func:`sample_indices`: the first, the last and two spread evenly between) is regenerated
from the config and each episode's index alone and compared with what the dataset holds, byte
for byte (:func:`check_sample`). If every byte matches, the run goes on (a finished split is
reported finished with nothing written; a resume finishes the split); if one differs, the
refusal names the split, the first differing episode and file, and what to do. The one
difference accepted, and reported, is float rounding from the CPU's vector math: label or
statistics values that differ in their last bits and nothing else
(:mod:`causaltrace.datasets.float_math`).

:func:`check_existing` is what :func:`causaltrace.datasets.generation.run` calls before it
writes anything into a directory that already holds a split.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from causaltrace.core.files import (
    json_load,
    sha256_file,
)
from causaltrace.datasets.content import (
    StoredEpisode,
    row_bytes,
    row_file,
    shard_episodes,
)
from causaltrace.datasets.float_math import rounding_only, vector_math_targets
from causaltrace.datasets.job import (
    DatasetMismatchError,
    Job,
    differences,
    episode_rows,
    episode_spec,
    generation_plan,
    shown_value,
)
from causaltrace.datasets.storage import DatasetLayout, write_episode_dir
from causaltrace.episodes.acceptance import accept_episode
from causaltrace.episodes.domain import Domain
from causaltrace.episodes.sampling import (
    Episode,
    EpisodeSpec,
    build_episode,
)
from causaltrace.errors import CausalTraceError


def check_existing(job: Job, domain: Domain | None = None) -> list[SampleCheck]:
    """Refuse to generate into a directory whose manifest or done records state another config
    (:class:`DatasetMismatchError` naming each difference); pass for an empty directory and for
    a resume or re-run with the same config.

    A split's identity is its config and what it holds, not the hash of the code that wrote it:
    episodes whose shards record another generator fingerprint (a refactor, a new release) are
    accepted when a sample of them (:func:`sample_indices`, one sample per recorded fingerprint)
    regenerates from the config and each episode's index alone, byte for byte (:func:`check_sample`;
    float rounding from the CPU's vector math is reported, not refused); otherwise the refusal
    names the split, the first differing episode and file, and what to do. Nothing is written
    either way.

    Args:
        job: The job (config and output directory).
        domain: The job's domain, if already made (made here when a sample is checked).

    Returns:
        One :class:`SampleCheck` per recorded fingerprint that differs from this generator's
        (each reproduced); empty when none differs.

    Raises:
        DatasetMismatchError: Another config, a done record that states none, or a sample that
            does not reproduce.
    """
    layout = DatasetLayout(job.out_dir)
    current = job.identity()
    manifest = json_load(layout.manifest) if layout.manifest.exists() else None
    if manifest is not None:
        _refuse_other_config(job, layout.manifest, manifest.get("config"), finished=True)
    made_by: dict[str, tuple[Any, list[int]]] = {}
    for shard in _done_shards(layout):
        path = layout.done(shard)
        generation = json_load(path).get("generation")
        if generation is None:
            if manifest is None:
                raise DatasetMismatchError(
                    f"{path} records no config (an older causaltrace wrote it), so resuming "
                    f"{job.out_dir} cannot be checked to match; finish it with the version that "
                    "started it, or use a new out_dir"
                )
            generator = manifest.get("generator")  # an older finished dataset states it once
        else:
            _refuse_other_config(job, path, generation.get("config"), finished=False)
            generator = generation.get("generator")
        if generator != current["generator"]:
            key = json.dumps(generator, sort_keys=True)
            made_by.setdefault(key, (generator, []))[1].append(shard)
    checks = []
    for generator, shards in made_by.values():
        if domain is None:
            domain = job.make_domain()
        indices = [i for shard in shards for i in job.shard_range(shard)]
        check = replace(
            check_sample(job, sample_indices(indices), domain), recorded_generator=generator
        )
        if check.difference is not None:
            raise DatasetMismatchError(
                _not_reproduced(job, check, current["generator"], finished=manifest is not None)
            )
        checks.append(check)
    return checks


def _done_shards(layout: DatasetLayout) -> list[int]:
    done_dir = layout.root / "done"
    if not done_dir.is_dir():
        return []
    return sorted(int(p.stem.split("-")[1]) for p in done_dir.glob("shard-*.json"))


# How many episodes a sample holds: the first, the last and two spread evenly between.
SAMPLE_SIZE = 4


def sample_indices(indices: Iterable[int], size: int = SAMPLE_SIZE) -> list[int]:
    """The episodes a check regenerates, out of ``indices``: the first, the last and
    ``size - 2`` spread evenly between (positions ``j * (n - 1) / (size - 1)``, rounded), with
    no seed, so every run and every machine checks the same ones; all of them when there are
    ``size`` or fewer.

    Args:
        indices: The episode indices to choose from (any order).
        size: How many to choose; :data:`SAMPLE_SIZE` by default.
    """
    ordered = sorted(set(indices))
    n = len(ordered)
    if n <= size:
        return ordered
    steps = size - 1
    return sorted({ordered[(j * (n - 1) + steps // 2) // steps] for j in range(size)})


@dataclass(frozen=True)
class Difference:
    """Where a regenerated episode first differs from the dataset's.

    Args:
        episode_id: The episode.
        index: Its index in the split.
        file: The dataset file that differs (relative to the dataset directory).
        what: What differs in it.
    """

    episode_id: str
    index: int
    file: str
    what: str

    def __str__(self) -> str:
        return f"{self.episode_id} (index {self.index}): {self.file}: {self.what}"


@dataclass(frozen=True)
class SampleCheck:
    """The outcome of regenerating a sample of a dataset's episodes (:func:`check_sample`).

    Args:
        out_dir: The dataset directory.
        episodes: The episodes regenerated, in index order (up to the first difference).
        difference: The first difference, or None when the sample reproduces.
        rounding: Rows that reproduce but for the last bits of float values
            (:func:`~causaltrace.datasets.float_math.rounding_only`), one line each; empty when
            every byte matched.
        recorded_generator: The fingerprint the checked episodes' shards record, if known.
    """

    out_dir: str
    episodes: tuple[str, ...]
    difference: Difference | None = None
    rounding: tuple[str, ...] = ()
    recorded_generator: Any = None

    @property
    def reproduces(self) -> bool:
        return self.difference is None

    @property
    def byte_for_byte(self) -> bool:
        return self.difference is None and not self.rounding

    def describe(self) -> str:
        """One sentence: what was regenerated and how it compared."""
        if self.difference is not None:
            return f"regenerated {', '.join(self.episodes)}: {self.difference}"
        said = f"regenerated {', '.join(self.episodes)}"
        if not self.rounding:
            return f"{said}: byte for byte the same"
        targets = vector_math_targets()
        why = (
            f" (this process's numpy computes float math with {' '.join(targets)} code, "
            "whose last bits differ from the C library's: docs/datasets.md)"
            if targets
            else ""
        )
        return (
            f"{said}: the same but for the last bits of float values in "
            f"{'; '.join(self.rounding)}{why}"
        )

    def to_dict(self) -> dict[str, Any]:
        recorded = self.recorded_generator or {}
        return {
            "out_dir": self.out_dir,
            "episodes": list(self.episodes),
            "reproduces": self.reproduces,
            "byte_for_byte": self.byte_for_byte,
            "float_rounding": list(self.rounding),
            "difference": None if self.difference is None else str(self.difference),
            "recorded_code_sha256": recorded.get("code_sha256"),
            "description": self.describe(),
        }


def check_sample(
    job: Job,
    indices: Iterable[int] | None = None,
    domain: Domain | None = None,
    *,
    read_path: bool = True,
) -> SampleCheck:
    """Regenerate episodes of a dataset with this generator and compare them with what the
    dataset holds, byte for byte; stop at the first difference.

    Each episode is regenerated from the config and its index alone (:func:`episode_spec`,
    then :func:`accept_episode`: the rejected attempts are regenerated and rejected again), and
    its row in each shard file (prompt, spec, label, acceptance statistics) is compared with the
    stored row, then its episode files with the checksums a materialized split froze. With
    ``read_path``, the episode is also rebuilt from its stored spec, as reading the split does
    (a lazy split's tables, :func:`causaltrace.datasets.reading.rebuild_episode`), and must give
    the same label, prompt and files as generating it.

    Rows equal but for the last bits of float values (numpy's vector math on another kind of
    CPU, :func:`~causaltrace.datasets.float_math.rounding_only`) are not a difference: they are
    listed in :attr:`SampleCheck.rounding` (empty in a process started with
    :func:`~causaltrace.datasets.float_math.portable_env`, for a split made the same way).

    Args:
        job: The dataset's job (its config must be the recorded one: :func:`check_existing`
            checks that first; :meth:`Job.from_record` builds it from a manifest).
        indices: The episode indices to regenerate; by default :func:`sample_indices` of
            every episode in a done shard.
        domain: The job's domain, if already made.
        read_path: Also rebuild each episode from its stored spec; on by default.

    Raises:
        DataFileError: A shard file is missing or does not match its done record's checksum.
    """
    layout = DatasetLayout(job.out_dir)
    if indices is None:
        done = [i for shard in _done_shards(layout) for i in job.shard_range(shard)]
        indices = sample_indices(done)
    domain = job.make_domain() if domain is None else domain
    plan = generation_plan(job, domain)
    stored: dict[int, dict[str, StoredEpisode]] = {}
    checked: list[str] = []
    rounding: list[str] = []
    with tempfile.TemporaryDirectory(prefix="causaltrace-check-") as tmp:
        for index in sorted(indices):
            shard = index // job.dataset.shard_size
            if shard not in stored:
                stored[shard] = {e.episode_id: e for e in shard_episodes(layout, shard)}
            spec = episode_spec(job, plan, index)
            checked.append(spec.episode_id)
            held = stored[shard].get(spec.episode_id)
            if held is None:
                where = str(layout.index(shard).relative_to(layout.root))
                difference = Difference(spec.episode_id, index, where, "the shard lacks it")
            else:
                difference = _regenerated_difference(
                    job, domain, spec, held, Path(tmp), read_path, rounding
                )
            if difference is not None:
                return SampleCheck(job.out_dir, tuple(checked), difference, tuple(rounding))
    return SampleCheck(job.out_dir, tuple(checked), None, tuple(rounding))


def _regenerated_difference(
    job: Job,
    domain: Domain,
    spec: EpisodeSpec,
    held: StoredEpisode,
    tmp: Path,
    read_path: bool,
    rounding: list[str],
) -> Difference | None:
    """The first difference between an episode regenerated now and the stored one, or None;
    rows that differ only by float rounding are added to ``rounding``."""
    layout = DatasetLayout(job.out_dir)

    def differs(file: str | Path, what: str) -> Difference:
        if isinstance(file, Path):
            file = str(file.relative_to(layout.root))
        return Difference(spec.episode_id, spec.index, file, what)

    try:
        episode, verdicts = accept_episode(domain, spec, job.verifier, job.dataset.max_attempts)
    except CausalTraceError as exc:
        return differs(row_file(layout, "spec", held.shard), f"no attempt is accepted now ({exc})")
    rows = episode_rows(episode, verdicts)
    for kind in ("spec", "label", "index", "stats"):  # the cause of a change first
        mine = row_bytes(rows[kind])
        if mine == held.rows[kind]:
            continue
        path = row_file(layout, kind, held.shard)
        rounded = rounding_only(json.loads(held.rows[kind]), json.loads(mine))
        if rounded is None:
            change = _row_change(held.rows[kind], mine)
            return differs(path, f"its row differs ({change})")
        rounding.append(
            f"{spec.episode_id}'s row of {path.relative_to(layout.root)} ({rounded[0]} "
            f"value{'s' if rounded[0] > 1 else ''}, at most {rounded[1]:.1e} relative)"
        )
    written_by = _recorded_libraries(layout, held.shard)
    made = _episode_files(tmp / "generated" / spec.episode_id, episode, domain, written_by)
    prefix = f"public/episodes/{spec.episode_id}/"
    for name, digest in sorted(held.files.items()):
        if made.get(name) != digest:
            what = "its bytes differ" if name in made else "it is not made any more"
            return differs(prefix + name, what)
    extra = sorted(set(made) - set(held.files)) if held.files else []
    if extra:
        return differs(prefix + extra[0], "a file the split did not freeze is made now")
    if not read_path:
        return None
    rebuilt = build_episode(domain, EpisodeSpec.from_dict(json.loads(held.rows["spec"])))
    how = "rebuilt from its stored spec (as reading the split does), differs from the generated one"
    if _built_label(rebuilt.label.to_dict()) != _built_label(episode.label.to_dict()):
        return differs(row_file(layout, "label", held.shard), f"its label, {how}")
    if rebuilt.prompt != episode.prompt:
        return differs(row_file(layout, "index", held.shard), f"its prompt, {how}")
    again = _episode_files(tmp / "rebuilt" / spec.episode_id, rebuilt, domain, written_by)
    for name in sorted(set(made) | set(again)):
        if made.get(name) != again.get(name):
            return differs(prefix + name, f"the file, {how}")
    return None


def _recorded_libraries(layout: DatasetLayout, shard: int) -> dict[str, str] | None:
    """The library versions of the generator that wrote ``shard`` (its done record's, else
    the manifest's): a regenerated file is written as they wrote it, so that a patch release
    of pandas, which renames only the version in a Parquet file's metadata, is no difference."""
    sources = [layout.done(shard), layout.manifest]
    for path in sources:
        if not path.exists():
            continue
        record = json_load(path)
        generator = (record.get("generation") or {}).get("generator") or record.get("generator")
        libraries = generator.get("libraries") if isinstance(generator, Mapping) else None
        if isinstance(libraries, Mapping):
            return dict(libraries)
    return None


def _episode_files(
    directory: Path, episode: Episode, domain: Domain, written_by: Mapping[str, str] | None
) -> dict[str, str]:
    """An episode's files, written to ``directory`` (as ``written_by``'s libraries write
    them): name -> sha256."""
    write_episode_dir(
        directory, episode.tables, episode.prompt, domain.data_dictionary(), written_by
    )
    return {p.name: sha256_file(p) for p in sorted(directory.iterdir())}


def _row_change(old: bytes, new: bytes) -> str:
    """The first keys that differ between two rows, with both values (shortened)."""

    def short(value: Any) -> str:
        text = shown_value(value)
        return text if len(text) <= 60 else text[:57] + "..."

    diff = differences(json.loads(old), json.loads(new))
    shown = "; ".join(f"{k}: recorded {short(a)}, now {short(b)}" for k, a, b in diff[:3])
    if len(diff) > 3:
        shown += f"; and {len(diff) - 3} more"
    return shown or "the same data, other bytes"


def _built_label(label: Mapping[str, Any]) -> str:
    """A label as :func:`build_episode` makes it: without what acceptance adds after (the
    verifier's and the oracle's measurements, each change's share of the alerts)."""
    data = json.loads(json.dumps(label, sort_keys=True))
    extra = data.get("extra") or {}
    extra.pop("alert_shares", None)
    extra.pop("change_shares", None)
    (extra.get("difficulty") or {}).pop("measured", None)
    for other in data.get("also") or ():
        (other.get("extra") or {}).pop("alert_shares", None)
    return json.dumps(data, sort_keys=True)


def describe_generator(generator: Any, current: Mapping[str, Any] | None = None) -> str:
    """A generator fingerprint in a few words (with the libraries whose version differs from
    ``current``'s)."""
    if not isinstance(generator, Mapping):
        return "not recorded"
    text = (
        f"causaltrace {generator.get('package_version')}, "
        f"code sha256 {str(generator.get('code_sha256'))[:12]}"
    )
    if current is not None:
        mine, theirs = current.get("libraries") or {}, generator.get("libraries") or {}
        moved = [
            f"{name} {theirs.get(name)}" for name in sorted(mine) if theirs.get(name) != mine[name]
        ]
        if moved:
            text += ", " + ", ".join(moved)
    return text


def _not_reproduced(
    job: Job, check: SampleCheck, current: Mapping[str, Any], finished: bool
) -> str:
    held = "a finished dataset" if finished else "done shards"
    out = job.out_dir.rstrip("/")
    return (
        f"{job.out_dir} (split {job.dataset.name}) holds {held} made by another generator "
        f"(recorded: {describe_generator(check.recorded_generator, current)}; this one: "
        f"{describe_generator(current)}), and this generator rebuilds its episodes differently "
        f"({check.difference}; regenerated {', '.join(check.episodes)}). A split is what it "
        f"holds, so {job.out_dir} is left as it is: to make this config with this generator, "
        f"generate into a new out_dir (e.g. out_dir={out}_regenerated); to resume or keep "
        f"{job.out_dir}, use the generator that made it"
    )


def _refuse_other_config(job: Job, source: Path, recorded: Any, finished: bool) -> None:
    diff = differences({"config": recorded}, {"config": job.config_record()})
    if not diff:
        return
    details = "; ".join(
        f"{path.removeprefix('config.')}: recorded {shown_value(old)}, now {shown_value(new)}"
        for path, old, new in diff[:8]
    )
    if len(diff) > 8:
        details += f"; and {len(diff) - 8} more"
    held = "a finished dataset" if finished else "shards"
    raise DatasetMismatchError(
        f"{job.out_dir} holds {held} made with a different config (recorded in {source}): "
        f"{details}. Generating into it would mix the two; use a new out_dir, delete "
        f"{job.out_dir}, or run with the recorded settings"
    )
