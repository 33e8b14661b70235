"""``causaltrace-audit``: audit a generated dataset and write a Markdown report with figures.

    causaltrace-audit domain=ads dataset=data/ads_test out=docs/audit/ads_test
    causaltrace-audit domain=ads datasets=[data/a,data/b] out=runs/audit results=[runs/teacher-a]

Writes ``report.md`` and PNG figures into ``out``: the oracle ceiling, distinguishability, the
channels causes move, leakage and shortcut probes, and difficulty curves (docs/audit.md).
``dataset=<path>`` is accepted as ``datasets=[<path>]``. User errors (an unknown dataset path
or domain, a bad option) print one line and exit with status 2 (``--debug``: traceback).
"""

from __future__ import annotations

import shlex
import sys

import hydra
from omegaconf import DictConfig, OmegaConf

from causaltrace.apps.config_dir import config_dir
from causaltrace.apps.errors import option, run_hydra_app, run_task
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
    from causaltrace.audit.run import AuditConfig

    datasets = _paths(plain.get("datasets"), "datasets")
    if not datasets:
        raise CausalTraceError("no dataset given: add dataset=<path> (or datasets=[a,b])")
    scan_alpha = option(plain, "scan_alpha", float, None, nullable=True)
    if scan_alpha is not None and not 0 < scan_alpha < 1:
        raise CausalTraceError(f"scan_alpha must be in (0, 1), got {scan_alpha}")
    return AuditConfig(
        domain=dict(plain.get("domain") or {}),
        datasets=datasets,
        out=str(plain["out"]),
        results=_paths(plain.get("results"), "results"),
        episodes=option(plain, "episodes", int, None, minimum=1, nullable=True),
        seed=option(plain, "seed", int, 0, minimum=0),
        scan_alpha=scan_alpha,
        onset_step=option(plain, "onset_step", int, 2, minimum=1),
        refine_top=option(plain, "refine_top", int, 5, minimum=1),
        channel_threshold=option(plain, "channel_threshold", float, 0.05, minimum=0),
        folds=option(plain, "folds", int, 5, minimum=2),
        tree_depth=option(plain, "tree_depth", int, 2, minimum=1),
        decoy_tables=_paths(plain.get("decoy_tables"), "decoy_tables"),
        record_tables=(
            None
            if plain.get("record_tables") is None
            else _paths(plain["record_tables"], "record_tables")
        ),
        rule_precision=option(plain, "rule_precision", float, 0.85, minimum=0),
        rule_recall=option(plain, "rule_recall", float, 0.3, minimum=0),
        rule_repeats=option(plain, "rule_repeats", int, 3, minimum=1),
        progress=option(plain, "progress", bool, True),
        command=command,
    )


def _command() -> str:
    """The command line as typed."""
    return shlex.join([PROG, *(_typed or sys.argv[1:])])


def audit(cfg: DictConfig):
    from causaltrace.audit.run import run_audit

    plain = OmegaConf.to_container(cfg, resolve=True, throw_on_missing=True)
    path = run_audit(audit_config(plain, _command()))
    print(f"report: {path}")
    return path


@hydra.main(config_path=config_dir(), config_name="audit", version_base="1.3")
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
    sys.exit(run_hydra_app(PROG, _main))


if __name__ == "__main__":
    main()
