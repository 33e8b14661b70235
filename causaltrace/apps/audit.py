"""``causaltrace-audit``: audit a generated dataset and write a Markdown report with figures.

    causaltrace-audit domain=ads dataset=data/ads_test out=docs/audit/ads_test
    causaltrace-audit domain=ads datasets=[data/a,data/b] out=runs/audit results=[runs/teacher-a]

Writes ``report.md`` and PNG figures into ``out``: the oracle ceiling, distinguishability, the
channels causes move, leakage and shortcut probes, difficulty curves, the per-cause rule probe and
the learned probe (docs/audit.md).
``dataset=<path>`` is accepted as ``datasets=[<path>]``. User errors (an unknown dataset path
or domain, a bad option) print one line and exit with status 2 (``--debug``: traceback).
"""

from __future__ import annotations

import shlex
import sys

import hydra
from omegaconf import DictConfig, OmegaConf

from causaltrace.apps.configs import CONFIG_PATH, register_search_path
from causaltrace.apps.errors import run_hydra_app, run_task
from causaltrace.apps.schema import AuditOptions, options
from causaltrace.audit.run import AuditConfig, run_audit
from causaltrace.errors import CausalTraceError

PROG = "causaltrace-audit"
_typed: list[str] = []  # the arguments as typed (before the dataset= rewrite), for the report


def _paths(value, key: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise CausalTraceError(f"{key} must be a path or a list of paths, got {value!r}")
    return tuple(value)


def audit_config(plain: dict, command: str = ""):
    """An :class:`~causaltrace.audit.run.AuditConfig` from the resolved Hydra config."""

    datasets = _paths(plain.get("datasets"), "datasets")
    if not datasets:
        raise CausalTraceError("no dataset given: add dataset=<path> (or datasets=[a,b])")
    opts = options(AuditOptions, plain)
    return AuditConfig(
        domain=dict(opts.domain or {}),
        datasets=datasets,
        out=opts.out,
        results=_paths(opts.results, "results"),
        episodes=opts.episodes,
        seed=opts.seed,
        scan_alpha=opts.scan_alpha,
        onset_step=opts.onset_step,
        refine_top=opts.refine_top,
        channel_threshold=opts.channel_threshold,
        folds=opts.folds,
        tree_depth=opts.tree_depth,
        decoy_tables=_paths(opts.decoy_tables, "decoy_tables"),
        record_tables=(
            None if opts.record_tables is None else _paths(opts.record_tables, "record_tables")
        ),
        rule_precision=opts.rule_precision,
        rule_recall=opts.rule_recall,
        rule_repeats=opts.rule_repeats,
        learned=opts.learned,
        learned_train=_paths(opts.learned_train, "learned_train"),
        learned_heldout=_paths(opts.learned_heldout, "learned_heldout"),
        learned_trees=opts.learned_trees,
        learned_repeats=opts.learned_repeats,
        progress=opts.progress,
        command=command,
    )


def _command() -> str:
    """The command line as typed."""
    return shlex.join([PROG, *(_typed or sys.argv[1:])])


def audit(cfg: DictConfig):

    plain = OmegaConf.to_container(cfg, resolve=True, throw_on_missing=True)
    path = run_audit(audit_config(plain, _command()))
    print(f"report: {path}")
    return path


@hydra.main(config_path=CONFIG_PATH, config_name="audit", version_base="1.3")
def _main(cfg: DictConfig) -> None:
    run_task(PROG, audit, cfg)


def rewrite_dataset_override(argv: list[str]) -> list[str]:
    """``dataset=<path>`` -> ``datasets=[<path>]`` (``dataset`` is a config group name)."""
    out = []
    for arg in argv:
        if arg.startswith("dataset="):
            path = arg.split("=", 1)[1]
            arg = f"datasets=[{_quoted(path)}]"
        out.append(arg)
    return out


def _quoted(path: str) -> str:
    return "'" + path.replace("\\", "\\\\").replace("'", "\\'") + "'"


def main() -> None:
    _typed[:] = [a for a in sys.argv[1:] if a != "--debug"]
    sys.argv = [sys.argv[0], *rewrite_dataset_override(sys.argv[1:])]
    register_search_path()
    sys.exit(run_hydra_app(PROG, _main))


if __name__ == "__main__":
    main()
