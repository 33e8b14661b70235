"""Run an agent over a dataset split, concurrently and resumably, and score it.

    summary = await evaluate(agent, DatasetSource("data/ads_test"), "runs/x", concurrency=8)

Every episode runs in its own :class:`~causaltrace.env.DiagnosisSession` inside one shared
:class:`~causaltrace.tools.ToolRuntime`, at most ``concurrency`` at a time. A finished episode
appends one line to ``<out_dir>/results.jsonl`` (one ``write`` of the whole line, then
``fsync``) and writes its transcript to ``<out_dir>/transcripts/<episode>.jsonl``; a re-run of
the same command skips the episodes already in ``results.jsonl`` (resume). When every selected
episode has a result, the metrics (labels come from the dataset, never from the agent) are
written to ``summary.md``, ``metrics.json``, ``confusion.png`` and ``report.html``; a run that
stops with episodes unrecorded writes none of them (and removes those of an earlier run, which
no longer describe ``results.jsonl``): :func:`rebuild_reports` reports on what it recorded.

Before it writes anything, :func:`evaluate` calls the agent's ``preflight()`` (the ``openai``
agent: one ``GET /models``), so a model server that cannot be reached fails the run in seconds
with nothing written.

Agent failures never stop a run: an exception from ``agent.run`` (or an agent that returns
before the episode is over) ends that episode without an answer (a format error) and records
the error. A failure of the host side (the episode's tools cannot start) writes no result, so
the next run retries that episode. An exception with a true ``abort_run`` attribute (the
``openai`` agent's ``ModelServerUnavailable``: the model server cannot be reached, or refuses the
agent's configuration) says nothing about the episode and affects them all: that episode is not
recorded either, no further episode starts, and :attr:`EvalSummary.aborted` says why.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import logging
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from causaltrace.agents.base import end_episode
from causaltrace.core.files import atomic_write_text, canonical_json, json_load, sha256_file
from causaltrace.core.version import __version__
from causaltrace.datasets.reading import DatasetSource
from causaltrace.env.contract import ToolContract
from causaltrace.env.session import DiagnosisSession, EnvConfig
from causaltrace.errors import CausalTraceError
from causaltrace.eval.report import (
    CAUSE_METRICS,
    EPISODE_TYPES,
    SUMMARY_METRICS,
    answer_candidates,
    cause_tables,
    write_report,
)
from causaltrace.scoring import (
    Answer,
    Candidate,
    EpisodeOutcome,
    Impact,
    ParsedAnswer,
    compute_metrics,
    plot_confusion,
)
from causaltrace.tools import ToolRuntime

log = logging.getLogger(__name__)

FORMAT = "causaltrace-eval/1"
RESULTS_FILE = "results.jsonl"
RUN_FILE = "run.json"
TRANSCRIPT_DIR = "transcripts"
OUTPUT_FILES = ("summary.md", "metrics.json", "confusion.png", "report.html")
SECRET_WORDS = ("key", "token", "secret", "password")
# Agent options that do not change the agent's behaviour: a resumed run may change them.
OPERATIONAL_KEYS = frozenset(
    {
        "api_key",
        "base_url",
        "retries",
        "backoff",
        "max_backoff",
        "timeout",
        "preflight",
        "preflight_timeout",
    }
)


# -- small pieces ---------------------------------------------------------------------------
def episode_rng(seed: int, episode: str) -> np.random.Generator:
    """The episode's own generator: ``SeedSequence(seed, spawn_key=(sha256(id)[:8],))``.

    It depends only on the evaluation seed and the episode id, so results do not depend on
    concurrency, order, or which episodes were resumed.

    Args:
        seed: The evaluation seed.
        episode: The episode id.
    """
    key = int.from_bytes(hashlib.sha256(episode.encode("utf-8")).digest()[:8], "little")
    return np.random.default_rng(np.random.SeedSequence(int(seed), spawn_key=(key,)))


def redact(value: Any, key: str = "") -> Any:
    """A copy of a config with secrets (keys naming a key, token, secret or password) hidden."""
    if isinstance(value, Mapping):
        return {str(k): redact(v, str(k)) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact(v) for v in value]
    if value and any(word in key.lower() for word in SECRET_WORDS):
        return "***"
    return value


def agent_name(agent) -> str:
    config = getattr(agent, "config", None) or {}
    return str(config.get("name") or getattr(agent, "name", "") or type(agent).__name__)


def read_results(path: str | os.PathLike) -> dict[str, dict[str, Any]]:
    """Result records by episode id; the last line of an episode wins, a torn line is skipped.

    Args:
        path: A run's ``results.jsonl``; a missing file gives ``{}``.
    """
    path = Path(path)
    out: dict[str, dict[str, Any]] = {}
    if not path.exists():
        return out
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            log.warning("%s:%d: skipping a line that is not JSON (a torn write?)", path, number)
            continue
        if isinstance(record, dict) and record.get("episode_id"):
            out[str(record["episode_id"])] = record
    return out


def _repair_tail(path: Path) -> None:
    """Cut a torn last line (a crash mid-append) so that the next append starts a new line."""
    if not path.exists() or path.stat().st_size == 0:
        return
    data = path.read_bytes()
    if data.endswith(b"\n"):
        return
    keep = data[: data.rfind(b"\n") + 1]
    log.warning("%s: dropping a torn last line (%d bytes)", path, len(data) - len(keep))
    atomic_write_text(path, keep.decode("utf-8", errors="replace"))


def append_record(path: Path, record: Mapping[str, Any]) -> None:
    """Append one JSON line with a single ``write`` on an ``O_APPEND`` descriptor, then fsync."""
    data = (json.dumps(record, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


def dataset_info(source) -> dict[str, Any]:
    """What identifies the dataset: name, split, the manifest's sha256 (not its seed)."""
    manifest_path = Path(source.root) / "manifest.json"
    manifest = json_load(manifest_path)
    return {
        "root": str(Path(source.root).resolve()),
        "name": manifest.get("name"),
        "split": manifest.get("split"),
        "n_episodes": manifest.get("n_episodes"),
        "manifest_sha256": sha256_file(manifest_path),
    }


def _env_dict(env_config) -> dict[str, Any]:
    return {k: v for k, v in dataclasses.asdict(env_config).items() if k != "transcript_dir"}


def run_info(agent, source, seed: int, env_config, tools: list[dict[str, Any]]) -> dict:
    """The run's identity, written to ``run.json`` (and checked when a run is resumed)."""
    return {
        "format": FORMAT,
        "package_version": __version__,
        "agent": {
            "name": agent_name(agent),
            "config": redact(dict(getattr(agent, "config", None) or {})),
        },
        "dataset": dataset_info(source),
        "seed": int(seed),
        "env": _env_dict(env_config),
        "tools": tools,
    }


def _check_resume(previous: Mapping[str, Any], current: Mapping[str, Any]) -> None:
    """Refuse to mix results of a different agent, dataset, seed or budget in one run dir."""

    def behaviour(info):
        agent = dict(info.get("agent") or {})
        config = {k: v for k, v in (agent.get("config") or {}).items() if k not in OPERATIONAL_KEYS}
        return {
            "agent": agent.get("name"),
            "agent config": config,
            "dataset": (info.get("dataset") or {}).get("manifest_sha256"),
            "seed": info.get("seed"),
            "env": info.get("env"),
        }

    old, new = behaviour(previous), behaviour(current)
    diff = [k for k in new if old.get(k) != new[k]]
    if diff:
        details = "; ".join(f"{k}: {old.get(k)!r} -> {new[k]!r}" for k in diff)
        raise CausalTraceError(
            f"this output directory holds a run with a different {', '.join(diff)} "
            f"({details}); use a new out_dir, or delete the old run"
        )


# -- the run --------------------------------------------------------------------------------
@dataclass
class EvalSummary:
    """What :func:`evaluate` did and found.

    Args:
        out_dir: The run directory.
        records: One result record per selected episode that has one, in dataset order.
        metrics: The :class:`~causaltrace.scoring.MetricsReport`, or ``None`` when nothing
            was scored.
        ran: Episodes run by this call; 0 by default.
        resumed: Episodes skipped because ``results.jsonl`` already had them; 0 by default.
        failed: Episode id -> why it failed on the host side (not recorded); empty by default.
        aborted: Why the run stopped early (e.g. the model server is down); ``None`` if it
            did not.

    The reports (``summary.md`` ...) exist only when every selected episode has a result
    (``failed`` is empty).
    """

    out_dir: Path
    records: list[dict[str, Any]]
    metrics: Any  # causaltrace.scoring.MetricsReport, or None when nothing was scored
    ran: int = 0
    resumed: int = 0
    failed: dict[str, str] = field(default_factory=dict)  # host-side failures (not recorded)
    aborted: str | None = None  # why the run stopped early (e.g. the model server is down)

    @property
    def summary_path(self) -> Path:
        return self.out_dir / "summary.md"

    def summary_text(self) -> str:
        path = self.summary_path
        return path.read_text(encoding="utf-8") if path.exists() else ""


async def evaluate(
    agent,
    source,
    out_dir: str | os.PathLike,
    concurrency: int = 4,
    seed: int = 0,
    env_config=None,
    limit: int | None = None,
    episodes: Sequence[str] | None = None,
    *,
    tool_config=None,
    progress: bool = True,
    rerun_errors: bool = False,
    episode_timeout: float | None = None,
    n_boot: int = 1000,
    preflight: bool = True,
) -> EvalSummary:
    """Run ``agent`` on the episodes of ``source`` (a :class:`~causaltrace.env.DatasetSource`)
    and write the results and reports under ``out_dir``.

    ``episodes`` selects episode ids (default: all, in dataset order), ``limit`` keeps the
    first ``limit`` of them. Episodes with a line in ``results.jsonl`` are skipped, unless
    ``rerun_errors`` is set and their line records an error. ``episode_timeout`` (seconds) ends
    an episode whose agent takes longer, as an error.

    Args:
        agent (Agent): The agent (see :func:`causaltrace.agents.make_agent`).
        source (DatasetSource): The dataset.
        out_dir: The run directory (``results.jsonl``, transcripts, reports); an existing run
            of the same agent and dataset is resumed.
        concurrency: Episodes run at once (at least 1); 4 by default.
        seed: The evaluation seed (each episode's generator, bootstrap); 0 by default.
        env_config (EnvConfig | Mapping | None): Budgets and reward; :class:`EnvConfig`
            defaults by default (its ``transcript_dir`` is ignored: transcripts go under
            ``out_dir``).
        limit: Keep the first ``limit`` selected episodes; all by default.
        episodes: The episode ids to run; all, in dataset order, by default.
        tool_config (ToolConfig | Mapping | None): The sandbox settings; the defaults by
            default.
        progress: Show a progress bar; on by default.
        rerun_errors: Run again episodes whose recorded line is an error; off by default.
        episode_timeout: Seconds an episode may take before it is ended as an error; no
            limit by default.
        n_boot: Bootstrap resamples of the metrics' intervals; 1000 by default.
        preflight: Call the agent's ``preflight()`` (:func:`check_agent`) before anything is
            written; on by default (off for a caller that has just checked).

    Returns:
        The records, metrics and counts of the run; ``metrics`` is None (and no report is
        written) unless every selected episode has a result.

    Raises:
        CausalTraceError: ``concurrency`` < 1, or ``out_dir`` holds a run of another agent,
            dataset or configuration.
        RunFailure: The agent's preflight failed (e.g. the ``openai`` agent's
            ``ModelServerUnavailable``); nothing was written.
    """

    if concurrency < 1:
        raise CausalTraceError(f"concurrency must be >= 1, got {concurrency}")
    if env_config is None or isinstance(env_config, Mapping):
        env_config = EnvConfig.from_mapping(env_config)
    env_config = dataclasses.replace(env_config, transcript_dir=None)  # written here instead
    selection = _select(source, episodes, limit)
    if preflight:
        await check_agent(agent)
    out = Path(out_dir)
    (out / TRANSCRIPT_DIR).mkdir(parents=True, exist_ok=True)
    results_path = out / RESULTS_FILE

    info = run_info(agent, source, seed, env_config, ToolContract.for_dataset(source).openai())
    run_path = out / RUN_FILE
    if run_path.exists():
        _check_resume(json_load(run_path), info)
    atomic_write_text(run_path, canonical_json(info))
    _repair_tail(results_path)
    done = read_results(results_path)
    todo = [ep for ep in selection if ep not in done or (rerun_errors and done[ep].get("error"))]
    resumed = len(selection) - len(todo)
    name = agent_name(agent)
    failed: dict[str, str] = {}
    pending = set(todo)
    scores = {ep: done[ep] for ep in selection if ep in done and ep not in pending}
    bar = _progress(len(selection), resumed, f"{name} on {info['dataset']['name']}", progress)
    _show_progress(bar, scores)
    semaphore = asyncio.Semaphore(concurrency)
    abort: dict[str, str] = {}

    async def one(episode: str) -> None:
        async with semaphore:
            if abort:  # the run is stopping: do not start this episode
                failed[episode] = f"not started: {abort['reason']}"
                return
            record = await _run_episode(
                agent,
                name,
                source,
                episode,
                env_config,
                runtime,
                seed,
                out,
                episode_timeout,
                failed,
                DiagnosisSession,
                abort,
            )
        if record is not None:
            append_record(results_path, record)
            scores[episode] = record
        if bar is not None:
            bar.update(1)
            _show_progress(bar, scores)

    try:
        if todo:
            async with ToolRuntime(tool_config) as runtime:
                await asyncio.gather(*(one(ep) for ep in todo))
    finally:
        if bar is not None:
            bar.close()
    final = read_results(results_path) if todo else done
    records = [final[ep] for ep in selection if ep in final]
    metrics = None
    if not failed:
        metrics = write_reports(out, source, records, info, n_boot=n_boot)
    else:  # incomplete: no report that could pass for the run's, and none left from before
        stale = remove_reports(out)
        shown = sorted(failed)
        more = f" and {len(shown) - 3} more" if len(shown) > 3 else ""
        log.error(
            "%d episode(s) were not run to the end and not recorded (re-run to retry: %s%s); "
            "no report written%s (rebuild_reports() reports on the %d recorded)",
            len(failed),
            ", ".join(shown[:3]),
            more,
            f", {len(stale)} earlier report file(s) removed" if stale else "",
            len(records),
        )
    return EvalSummary(
        out,
        records,
        metrics,
        ran=len(todo) - len(failed),
        resumed=resumed,
        failed=failed,
        aborted=abort.get("reason"),
    )


async def check_agent(agent) -> None:
    """The agent's ``preflight()`` (:meth:`~causaltrace.agents.base.Agent.preflight`), if it
    has one: what every episode needs, checked once before a run (the ``openai`` agent: that
    its server can be reached). Its exception propagates."""
    check = getattr(agent, "preflight", None)
    if check is not None:
        await check()


def remove_reports(out_dir: str | os.PathLike) -> list[str]:
    """Delete the report files (:data:`OUTPUT_FILES`) of a run directory; the names removed."""
    removed = []
    for name in OUTPUT_FILES:
        path = Path(out_dir) / name
        if path.is_file():
            path.unlink()
            removed.append(name)
    return removed


def _select(source, episodes: Sequence[str] | None, limit: int | None) -> list[str]:
    ids = list(source.episode_ids)
    if episodes is not None:
        known = set(ids)
        unknown = [ep for ep in episodes if ep not in known]
        if unknown:
            raise CausalTraceError(f"dataset {source.root}: no episode(s) {unknown[:5]}")
        ids = list(dict.fromkeys(episodes))
    if limit is not None:
        if limit < 0:
            raise CausalTraceError(f"limit must be >= 0, got {limit}")
        ids = ids[:limit]
    return ids


def _progress(total: int, initial: int, desc: str, enabled: bool):
    if not enabled:
        return None

    return tqdm(total=total, initial=initial, desc=desc, unit="episode", mininterval=0.5)


def _show_progress(bar, scores: Mapping[str, Mapping[str, Any]]) -> None:
    if bar is None or not scores:
        return
    full = [float(r.get("full_attribution") or 0.0) for r in scores.values()]
    errors = sum(bool(r.get("error")) for r in scores.values())
    postfix = {"FullAttr@1": f"{np.mean(full):.3f}"}
    if errors:
        postfix["errors"] = errors
    bar.set_postfix(postfix, refresh=False)


async def _run_episode(
    agent,
    name,
    source,
    episode,
    env_config,
    runtime,
    seed,
    out,
    episode_timeout,
    failed,
    session_cls,
    abort: dict[str, str] | None = None,
) -> dict[str, Any] | None:

    abort = {} if abort is None else abort

    rng = episode_rng(seed, episode)
    started = time.perf_counter()
    session = session_cls(runtime, source, episode, env_config)
    try:
        await session.__aenter__()
    except Exception as exc:  # the host side failed: retry on the next run
        log.exception("episode %s: its tools could not start", episode)
        failed[episode] = f"{type(exc).__name__}: {exc}"
        await session.close()
        return None
    error: str | None = None
    try:
        try:
            await asyncio.wait_for(agent.run(session, rng), episode_timeout)
        except TimeoutError:
            error = f"the episode timed out after {episode_timeout} s"
        except Exception as exc:
            if getattr(exc, "abort_run", False):  # not this episode's fault: stop the run
                log.error("episode %s: %s; stopping the run", episode, exc)
                abort.setdefault("reason", str(exc))
                failed[episode] = str(exc)
                return None
            log.warning("episode %s: the agent failed: %r", episode, exc, exc_info=True)
            error = f"{type(exc).__name__}: {exc}"
        if not session.done:
            error = error or "the agent returned before the episode was over"
            ender = getattr(agent, "end_episode", None)
            await (ender(session, error) if ender else end_episode(session, error))
        error = error or _transcript_error(session)
    finally:
        await session.close()
    session.write_transcript(out / TRANSCRIPT_DIR / f"{episode}.jsonl")
    result = session.result or {}
    reward = dict(result.get("reward") or {})
    return {
        "episode_id": episode,
        "agent": name,
        "answer": result.get("answer"),
        "reason": result.get("reason"),
        "parse_error": result.get("parse_error"),
        "reward": reward,
        "score": float(reward.get("score", 0.0)),
        "full_attribution": float(reward.get("full_attribution", 0.0)),
        "tool_calls": session.tool_calls,
        "turns": session.turns,
        "seconds": round(time.perf_counter() - started, 3),
        "error": error,
        "eval_seed": int(seed),
    }


def _transcript_error(session) -> str | None:
    """The error an agent recorded on its last message (see ``Agent.end_episode``)."""
    for message in reversed(session.messages):
        if message.get("role") == "assistant":
            return message.get("error") or None
    return None


# -- scoring and reports --------------------------------------------------------------------
def outcome_of(record: Mapping[str, Any], label, space):
    """An :class:`~causaltrace.scoring.EpisodeOutcome` from a result record and its label.

    Args:
        record: A line of ``results.jsonl``.
        label (OracleLabel): The episode's oracle label.
        space (AnswerSpace): The dataset's answer space.
    """

    data = record.get("answer")
    answer = None
    named = answer_candidates(data)  # the single form, or {"causes": [...]} (several causes)
    if named:
        impact = data.get("impact")
        (cause, slice_text), *rest = named
        answer = Answer(
            root_cause=cause,
            slice=slice_text,
            ranking=tuple(
                Candidate(c["root_cause"], c.get("slice")) for c in data.get("ranking") or ()
            ),
            impact=Impact(float(impact["effect"]), impact.get("kpi")) if impact else None,
            onset=data.get("onset"),
            also=tuple(Candidate(c, s) for c, s in rest),
        )
    kwargs: dict[str, Any] = {
        "tool_calls": int(record.get("tool_calls") or 0),
        "turns": int(record.get("turns") or 0),
        "source": "submit",
    }
    if answer is None:
        kwargs["error"] = record.get("parse_error") or record.get("error") or "no answer"
    parsed = ParsedAnswer.of(answer, space, **kwargs)
    outcome = EpisodeOutcome.from_parsed(parsed, label)
    reward = record.get("reward") or {}
    terms = {
        k: float(v)
        for k, v in reward.items()
        if k not in ("score", "parse_ok", "tool_calls", "turns")
    }
    return dataclasses.replace(outcome, reward=float(record.get("score") or 0.0), terms=terms)


def write_reports(
    out_dir: str | os.PathLike,
    source,
    records: Sequence[Mapping[str, Any]],
    info: Mapping[str, Any] | None = None,
    *,
    n_boot: int = 1000,
    failed: Mapping[str, str] | None = None,
):
    """Write ``summary.md``, ``metrics.json``, ``confusion.png`` and ``report.html``; return
    the :class:`~causaltrace.scoring.MetricsReport` (``None`` without records).

    Args:
        out_dir: The run directory.
        source (DatasetSource): The dataset (labels and answer space).
        records: The result records to report on.
        info: The run's ``run.json`` content; read from ``out_dir`` by default.
        n_boot: Bootstrap resamples of the metrics' intervals; 1000 by default.
        failed: Episode id -> host-side failure, counted as not started; none by default.
    """

    out = Path(out_dir)
    if info is None:
        info = json_load(out / RUN_FILE)
    space = source.answer_space
    labels = {r["episode_id"]: source.label(r["episode_id"]) for r in records}
    outcomes = [outcome_of(r, labels[r["episode_id"]], space) for r in records]
    seed = int(info.get("seed", 0))
    metrics = tables = None
    if outcomes:
        metrics = compute_metrics(outcomes, causes=space.causes, n_boot=n_boot, seed=seed)
        # Per cause, per group and the confusion read every cause of a concurrent episode.
        answers = {r["episode_id"]: r.get("answer") for r in records}
        tables = cause_tables(labels, outcomes, answers, space, n_boot=n_boot, seed=seed)
        title = f"{info['agent']['name']} on {info['dataset']['name']}: cause confusion"
        plot_confusion(tables.confusion, out / "confusion.png", title=title)
    counts = _counts(records, failed or {})
    payload = {
        "run": {k: v for k, v in info.items() if k != "tools"},
        "counts": counts,
        "metrics": {**metrics.to_dict(), **tables.to_dict()} if metrics else None,
        "confusion": _confusion_dict(tables.confusion) if tables else None,
    }
    atomic_write_text(out / "metrics.json", canonical_json(_finite(payload)))
    atomic_write_text(out / "summary.md", summary_markdown(metrics, info, counts, tables))
    write_report(
        out / "report.html",
        records=records,
        labels=labels,
        outcomes=outcomes,
        metrics=metrics,
        info=info,
        counts=counts,
        transcript_dir=out / TRANSCRIPT_DIR,
        tables=tables,
        confusion_png=out / "confusion.png" if metrics else None,
    )
    return metrics


def rebuild_reports(out_dir: str | os.PathLike, source=None, *, n_boot: int = 1000):
    """Re-write the reports of an existing run directory (e.g. after a crash mid-report).

    Args:
        out_dir: The run directory.
        source (DatasetSource | None): The dataset; the one ``run.json`` names by default.
        n_boot: Bootstrap resamples of the metrics' intervals; 1000 by default.
    """

    out = Path(out_dir)
    info = json_load(out / RUN_FILE)
    if source is None:
        source = DatasetSource(info["dataset"]["root"])
    order = {ep: i for i, ep in enumerate(source.episode_ids)}
    records = sorted(
        read_results(out / RESULTS_FILE).values(),
        key=lambda r: order.get(r["episode_id"], len(order)),
    )
    return write_reports(out, source, records, info, n_boot=n_boot)


def _counts(records: Sequence[Mapping[str, Any]], failed: Mapping[str, str]) -> dict:
    n = len(records)
    return {
        "episodes": n,
        "errors": sum(bool(r.get("error")) for r in records),
        "no_answer": sum(not r.get("answer") for r in records),
        # Cut off by a budget: ended without an answer, and not by an error.
        "truncated": sum(
            r.get("reason") not in (None, "submitted") and not r.get("error") for r in records
        ),
        "not_started": len(failed),
        "mean_score": float(np.mean([r.get("score") or 0.0 for r in records])) if n else None,
        "mean_seconds": float(np.mean([r.get("seconds") or 0.0 for r in records])) if n else None,
    }


def _confusion_dict(frame) -> dict[str, Any]:
    return {
        "true": [str(i) for i in frame.index],
        "predicted": [str(c) for c in frame.columns],
        "counts": frame.to_numpy().astype(int).tolist(),
    }


def _finite(value: Any) -> Any:
    """JSON-safe: NaN and infinities become null."""
    if isinstance(value, Mapping):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    if isinstance(value, float) and not np.isfinite(value):
        return None
    return value


CAUSE_NOTE = (
    "A row per true cause of each episode: a concurrent episode counts under each of its "
    "causes (`n` counts causes, not episodes). `attributed`: the answer names the cause with "
    "its slice; `cause named`: it names the cause; `FullAttr@1 (episode)`: the whole episode "
    "was solved."
)


def _cell(metrics: Mapping[str, Any], key: str) -> str:
    mv = metrics.get(key)
    if mv is None or not np.isfinite(mv.value):
        return "–"
    digits = 1 if key == "mean_tool_calls" else 3
    if not (np.isfinite(mv.low) and np.isfinite(mv.high)):
        return f"{mv.value:.{digits}f}"
    return f"{mv.value:.{digits}f} [{mv.low:.{digits}f}, {mv.high:.{digits}f}]"


def _table(
    rows: Sequence[tuple[str, Mapping[str, Any]]], first: str, columns=SUMMARY_METRICS
) -> list[str]:
    header = [first, "n", *(title for _, title in columns)]
    lines = [
        "| " + " | ".join(header) + " |",
        "| --- | " + " | ".join("---:" for _ in header[1:]) + " |",
    ]
    for name, metrics in rows:
        n = metrics["full_attr_at_1"].n if "full_attr_at_1" in metrics else 0
        cells = [name, str(n), *(_cell(metrics, key) for key, _ in columns)]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def summary_markdown(
    metrics, info: Mapping[str, Any], counts: Mapping[str, Any], tables=None
) -> str:
    """The run's summary as Markdown tables: overall, per episode type (single cause or
    concurrent), per cause group and per cause. With ``tables``
    (:class:`~causaltrace.eval.report.CauseTables`), the group and cause tables count a
    concurrent episode under each of its causes; without, they are the scoring module's (the
    first cause only)."""
    ds, agent = info["dataset"], info["agent"]
    lines = [f"# {agent['name']} on {ds['name']} (split {ds['split']})", ""]
    model = (agent.get("config") or {}).get("model")
    lines.append(
        f"{counts['episodes']} episodes; evaluation seed {info['seed']}; budgets "
        f"{info['env'].get('max_tool_calls')} tool calls, {info['env'].get('max_turns')} turns"
        + (f"; model `{model}`" if model else "")
        + "."
    )
    lines.append(
        f"Errors: {counts['errors']}; no answer: {counts['no_answer']}; cut off by a budget: "
        f"{counts['truncated']}"
        + (
            f"; could not start: {counts['not_started']} (re-run to retry)"
            if counts.get("not_started")
            else ""
        )
        + "."
    )
    if metrics is None:
        return "\n".join([*lines, "", "No episode was scored.", ""])
    lines.append(
        f"Values are means with {metrics.confidence:.0%} percentile-bootstrap intervals "
        f"({metrics.n_boot} resamples of episodes); `–`: not applicable."
    )
    lines += ["", "## Overall", "", *_table([("all", metrics.overall)], "scope")]
    if tables is None:
        lines += ["", "## By cause group", "", *_table(list(metrics.by_group.items()), "group")]
        lines += ["", "## By cause", "", *_table(list(metrics.by_cause.items()), "cause")]
    else:
        types = [(EPISODE_TYPES[k], m) for k, m in tables.by_type.items()]
        lines += ["", "## By episode type", "", *_table(types, "episodes")]
        lines += [
            "",
            "A concurrent episode is solved (FullAttr@1) when the answer names exactly its set "
            "of causes, each with its slice.",
        ]
        rows = list(tables.by_group.items())
        lines += [
            "",
            "## By cause group",
            "",
            CAUSE_NOTE,
            "",
            *_table(rows, "group", CAUSE_METRICS),
        ]
        rows = list(tables.by_cause.items())
        lines += ["", "## By cause", "", *_table(rows, "cause", CAUSE_METRICS)]
    lines += [
        "",
        "The cause confusion matrix is in `confusion.png`; browse the episodes in `report.html`.",
        "",
    ]
    return "\n".join(lines)
