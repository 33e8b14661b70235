"""Dataset generation: episodes sharded by index, verified, written atomically, resumable.

Each shard (a fixed range of episode indices) is a unit of work whose bytes depend only on the
config and the shard id, so one worker or N workers write the same dataset. A shard is complete
when its ``done`` record exists (written last, atomically); a killed run leaves at most a
partial shard without a record, which the next run of the same command rewrites from scratch.
Workers are separate processes started by an existing engine (Hydra's joblib launcher, or Ray
tasks), each taking the shards ``shard % num_workers == worker_index``.

What makes one episode valid is :mod:`causaltrace.episodes.acceptance`; the job a worker runs
is :mod:`causaltrace.datasets.job`; whether an existing split is this config's and this
generator's is :mod:`causaltrace.datasets.split_check`.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from causaltrace.core.files import (
    atomic_write_text,
    canonical_json,
    json_load,
    jsonl,
    plain_data,
    sha256_file,
)
from causaltrace.core.progress import progress_bar
from causaltrace.core.version import __version__
from causaltrace.datasets.content import (
    ROW_KINDS,
    content_digest,
    dataset_content,
    shard_episodes,
)
from causaltrace.datasets.job import (
    Job,
    episode_rows,
    episode_spec,
    generation_plan,
)
from causaltrace.datasets.split_check import check_existing
from causaltrace.datasets.storage import DatasetLayout, write_episode_dir
from causaltrace.episodes.acceptance import accept_episode
from causaltrace.episodes.domain import Domain
from causaltrace.errors import CausalTraceError

FORMAT = "causaltrace-dataset/1"


@dataclass
class ShardResult:
    shard: int
    episodes: int
    attempts: int
    rejections: Counter


def generate_shard(job: Job, domain: Domain, shard: int, plan, progress=None) -> ShardResult:
    """Generate, verify and write one shard; the done record is written last."""
    layout = DatasetLayout(job.out_dir)
    ds = job.dataset
    _clear_partial_writes(job, layout, shard)
    rows: dict[str, list[dict[str, Any]]] = {kind: [] for kind in ROW_KINDS}
    attempts, rejections = 0, Counter()
    for index in job.shard_range(shard):
        spec = episode_spec(job, plan, index)
        episode, verdicts = accept_episode(domain, spec, job.verifier, ds.max_attempts)
        attempts += len(verdicts)
        rejections.update(v.reason for v in verdicts if not v.accepted)
        if ds.materialize:
            write_episode_dir(
                layout.episode_dir(spec.episode_id),
                episode.tables,
                episode.prompt,
                domain.data_dictionary(),
            )
        for kind, row in episode_rows(episode, verdicts).items():
            rows[kind].append(row)
        if progress is not None:
            progress(len(verdicts))
    atomic_write_text(layout.index(shard), jsonl(rows["index"]))
    atomic_write_text(layout.specs(shard), jsonl(rows["spec"]))
    atomic_write_text(layout.labels(shard), jsonl(rows["label"]))
    atomic_write_text(layout.stats(shard), canonical_json(rows["stats"]))
    files = [layout.index(shard), layout.specs(shard), layout.labels(shard), layout.stats(shard)]
    if ds.materialize:
        for row in rows["index"]:
            files.extend(sorted(layout.episode_dir(row["episode_id"]).iterdir()))
    checksums = {str(p.relative_to(layout.root)): sha256_file(p) for p in files}
    record = {
        "shard": shard,
        "episodes": [job.shard_range(shard).start, job.shard_range(shard).stop],
        "files": checksums,
        "generation": job.identity(),
    }
    atomic_write_text(layout.done(shard), canonical_json(record))
    return ShardResult(shard, len(rows["index"]), attempts, rejections)


def _clear_partial_writes(job: Job, layout: DatasetLayout, shard: int) -> None:
    """Remove the temporary files a killed run left while writing this shard (atomic writes
    go through ``.<name>.*.tmp`` beside their target). Only this shard's own files are
    touched, so workers writing other shards at the same time are never disturbed."""
    prefix = f".{layout.shard_name(shard)}."
    for target in (
        layout.index(shard),
        layout.specs(shard),
        layout.labels(shard),
        layout.stats(shard),
        layout.done(shard),
    ):
        if target.parent.is_dir():
            for stale in target.parent.glob(f"{prefix}*.tmp"):
                stale.unlink(missing_ok=True)
    for index in job.shard_range(shard):
        directory = layout.episode_dir(job.episode_id(index))
        if directory.is_dir():
            for stale in directory.glob(".*.tmp"):
                stale.unlink(missing_ok=True)


def pending_shards(job: Job, worker_index: int = 0, num_workers: int = 1) -> list[int]:
    """This worker's shards without a done record."""
    if not 0 <= worker_index < num_workers:
        raise CausalTraceError(f"worker_index {worker_index} is not in [0, {num_workers})")
    layout = DatasetLayout(job.out_dir)
    return [
        s
        for s in range(job.n_shards)
        if s % num_workers == worker_index and not layout.done(s).exists()
    ]


def shard_order(job: Job, worker_index: int = 0, num_workers: int = 1) -> list[int]:
    """The shards this worker tries, in order: its own share first (``shard % num_workers ==
    worker_index``), then the other workers' from the end backwards, to take over what a slower
    worker has not started (:func:`claim_shard` keeps two workers off one shard). Which worker
    makes a shard does not change its bytes."""
    own = pending_shards(job, worker_index, num_workers)
    layout = DatasetLayout(job.out_dir)
    others = [
        s
        for s in reversed(range(job.n_shards))
        if s % num_workers != worker_index and not layout.done(s).exists()
    ]
    return own + others


@contextlib.contextmanager
def claim_shard(job: Job, shard: int):
    """Yield True while this process holds the shard (an exclusive lock on its claim file, which
    the kernel releases if the process dies, so a crashed worker's shard is free again), False
    if a live worker holds it; the claim file goes once the shard is done."""
    path = Path(job.out_dir) / ".claims" / f"{DatasetLayout(job.out_dir).shard_name(shard)}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            if DatasetLayout(job.out_dir).done(shard).exists():
                path.unlink(missing_ok=True)


def run(
    job: Job,
    worker_index: int = 0,
    num_workers: int = 1,
    show_progress: bool = True,
    check: bool = True,
) -> dict:
    """Generate this worker's pending shards, then any other pending shard no live worker has
    claimed (:func:`shard_order`), then the manifest if every shard is done.

    Refuses (:class:`DatasetMismatchError`) if ``job.out_dir`` holds a dataset or shards of
    another config, or made by another generator that does not reproduce them
    (:func:`check_existing`).

    Args:
        job: The job (config and output directory).
        worker_index: This worker's index, from 0; 0 by default.
        num_workers: How many workers share the job; 1 by default.
        show_progress: Show a progress bar; on by default.
        check: Check what ``job.out_dir`` holds first; on by default (off only where the
            caller has checked, e.g. the Ray tasks of a checked job).

    Returns:
        A summary: shards made, episodes, attempts, rejections by reason, whether the
        dataset was finished before this run (``already_finished``), whether the manifest was
        written, the content digest once it is (``content_sha256``), and, when episodes made
        by another generator were regenerated to check them, ``verified`` (one
        :meth:`SampleCheck.to_dict` per recorded fingerprint).

    Raises:
        DatasetMismatchError: ``job.out_dir`` holds data of another config, or of another
            generator that does not reproduce it.
    """
    domain = job.make_domain()
    verified = check_existing(job, domain) if check else []
    ds = job.dataset
    plan = generation_plan(job, domain)
    already_finished = not pending_shards(job)
    shards = shard_order(job, worker_index, num_workers)
    total = sum(len(job.shard_range(s)) for s in pending_shards(job, worker_index, num_workers))
    bar = progress_bar(total, f"{ds.name} worker {worker_index}/{num_workers}", show_progress)
    tried = {"attempts": 0, "episodes": 0}

    def tick(attempts: int) -> None:
        tried["attempts"] += attempts
        tried["episodes"] += 1
        if bar is not None:
            bar.update(1)
            bar.set_postfix(acceptance=f"{tried['episodes'] / tried['attempts']:.0%}")

    rejections: Counter = Counter()
    made = []
    layout = DatasetLayout(job.out_dir)
    try:
        for shard in shards:
            with claim_shard(job, shard) as mine:
                if not mine or layout.done(shard).exists():  # another worker has it
                    continue
                rejections.update(generate_shard(job, domain, shard, plan, tick).rejections)
                made.append(shard)
    finally:
        if bar is not None:
            bar.close()
    with contextlib.suppress(OSError):  # empty once every shard is done
        (Path(job.out_dir) / ".claims").rmdir()
    manifest = write_manifest(job)
    summary = {
        "shards": made,
        "episodes": tried["episodes"],
        "attempts": tried["attempts"],
        "rejections": dict(rejections),
        "already_finished": already_finished,
        "manifest_written": manifest is not None,
    }
    if manifest is not None:
        summary["content_sha256"] = manifest_content(job.out_dir)
    if verified:
        summary["verified"] = [c.to_dict() for c in verified]
    return summary


def manifest_content(out_dir: str | Path) -> str:
    """A finished dataset's content digest: the one its manifest states, or (a manifest written
    before it was stated) computed from its files (:func:`content.dataset_content`)."""
    layout = DatasetLayout(out_dir)
    stated = json_load(layout.manifest).get("content_sha256")
    return stated if stated is not None else dataset_content(out_dir)


def write_manifest(job: Job) -> Path | None:
    """The manifest, once every shard is done (idempotent: same shards, same bytes). A manifest
    already there for the same config and shards is kept as it is, generator record included:
    a dataset another generator made and this one reproduces (:func:`check_existing`) is not
    rewritten.

    The manifest states the split's identity, its config and ``content_sha256`` (the digest of
    every episode's checksums, :mod:`causaltrace.datasets.content`), and, as provenance, the
    generator fingerprint of the run that wrote it."""
    layout = DatasetLayout(job.out_dir)
    records = []
    for shard in range(job.n_shards):
        if not layout.done(shard).exists():
            return None
        record = json_load(layout.done(shard))
        records.append({k: v for k, v in record.items() if k != "generation"})
    if layout.manifest.exists():
        held = json_load(layout.manifest)
        if held.get("config") == job.config_record() and held.get("shards") == records:
            return layout.manifest
    episodes = [e for shard, r in enumerate(records) for e in shard_episodes(layout, shard, r)]
    manifest = {
        "format": FORMAT,
        "package_version": __version__,
        "generator": job.identity()["generator"],
        "name": job.dataset.name,
        "split": job.dataset.split,
        "n_episodes": job.dataset.n_episodes,
        "materialized": job.dataset.materialize,
        "config": job.config_record(),
        "content_sha256": content_digest(job.config_record(), episodes),
        "shards": records,
    }
    with _directory_lock(layout.root):
        # Under the lock no other writer is mid-write, so any temporary manifest left here is
        # a killed writer's: remove it with the new manifest in place.
        atomic_write_text(layout.manifest, canonical_json(plain_data(manifest)))
        for stale in layout.root.glob(f".{layout.manifest.name}.*.tmp"):
            stale.unlink(missing_ok=True)
    return layout.manifest


@contextlib.contextmanager
def _directory_lock(directory: Path):
    """An exclusive advisory lock on a directory (flock on its descriptor: no lock file to
    leave behind). Workers on one machine take turns; a shared file system that ignores flock
    degrades to the unlocked behaviour, where a killed writer's temporary file may stay."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def acceptance_report(out_dir: str | Path):
    """Acceptance rate and rejection reasons per cause (a pandas DataFrame).

    Args:
        out_dir: The dataset directory (its ``private/stats`` is read).
    """
    # lazy: pandas takes ~0.5 s to import; the rest of this module does not need it
    import pandas as pd

    rows = []
    for path in sorted((Path(out_dir) / "private" / "stats").glob("shard-*.json")):
        for stat in json_load(path):
            reasons = Counter(r[0].split(":")[0] for r in stat["rejections"] if r)
            rows.append(
                {
                    "cause": stat["cause"],
                    "slice_order": stat["slice_order"],
                    "attempts": stat["attempts"],
                    **reasons,
                }
            )
    frame = pd.DataFrame(rows).fillna(0)
    grouped = frame.groupby("cause").sum(numeric_only=True)
    counts = frame.groupby("cause").size()
    grouped.insert(0, "episodes", counts)
    grouped.insert(2, "acceptance", (counts / grouped["attempts"]).round(3))
    return grouped.drop(columns=["slice_order"], errors="ignore").sort_index()
