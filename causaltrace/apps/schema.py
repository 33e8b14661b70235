"""The Hydra apps' configs as structured configs, registered in Hydra's ``ConfigStore``.

Each app's primary config (``causaltrace/conf/generate.yaml``, ``eval.yaml``, ``audit.yaml``)
starts its defaults list with its schema (``generate_schema``, ``eval_schema``,
``audit_schema``), so Hydra types every option while it composes: ``concurrency=abc`` or
``+nope=1`` fail before the app runs, naming the key. Ranges and choices are checked in the
dataclasses' ``__post_init__``, which runs when an app turns its config into the dataclass
(:func:`options`). Config groups (``domain``, ``dataset``, ``verifier``, ``agent``) and
sections checked by their own types (``env``: :class:`~causaltrace.env.EnvConfig`, ``tools``:
:class:`~causaltrace.tools.ToolConfig`) are ``Any`` here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypeVar

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, DictConfig, OmegaConf

from causaltrace.errors import CausalTraceError

T = TypeVar("T")


def _at_least(owner: object, name: str, minimum: float) -> None:
    value = getattr(owner, name)
    if value is not None and value < minimum:
        raise CausalTraceError(f"{name} must be >= {minimum}, got {value!r}")


@dataclass
class RayOptions:
    """Where ``executor: ray`` runs (``address: null`` starts a local Ray instance)."""

    address: str | None = None
    num_cpus: int | None = None


@dataclass
class GenerateConfig:
    """``causaltrace-generate``'s options (``causaltrace/conf/generate.yaml``)."""

    domain: Any = MISSING
    dataset: Any = MISSING
    verifier: Any = MISSING
    out_dir: str = MISSING
    num_workers: int = 1
    worker_index: int = 0
    progress: bool = True
    executor: str = "local"
    ray: RayOptions = field(default_factory=RayOptions)

    def __post_init__(self) -> None:
        _at_least(self, "num_workers", 1)
        _at_least(self, "worker_index", 0)
        if self.executor not in ("local", "ray"):
            raise CausalTraceError(f"executor must be 'local' or 'ray', got {self.executor!r}")


@dataclass
class EvalConfig:
    """``causaltrace-eval``'s options (``causaltrace/conf/eval.yaml``)."""

    agent: Any = MISSING
    domain: Any = MISSING
    dataset: Any = MISSING
    verifier: Any = MISSING
    dataset_dir: str = MISSING
    out_dir: str = MISSING
    concurrency: int = 4
    seed: int = 0
    limit: int | None = None
    episodes: Any = None  # a list of episode ids, or null
    rerun_errors: bool = False
    episode_timeout: float | None = None
    progress: bool = True
    n_boot: int = 1000
    env: Any = field(default_factory=dict)
    tools: Any = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name, minimum in (("concurrency", 1), ("seed", 0), ("limit", 0), ("n_boot", 1)):
            _at_least(self, name, minimum)
        if self.episode_timeout is not None and not self.episode_timeout > 0:
            raise CausalTraceError(f"episode_timeout must be > 0, got {self.episode_timeout!r}")


@dataclass
class AuditOptions:
    """``causaltrace-audit``'s options (``causaltrace/conf/audit.yaml``); paths may be one
    path or a list (checked by the app)."""

    domain: Any = MISSING
    datasets: Any = field(default_factory=list)
    out: str = MISSING
    results: Any = field(default_factory=list)
    episodes: int | None = None
    seed: int = 0
    scan_alpha: float | None = None
    onset_step: int = 2
    refine_top: int = 5
    channel_threshold: float = 0.05
    folds: int = 5
    tree_depth: int = 2
    decoy_tables: Any = field(default_factory=lambda: ["change_history"])
    record_tables: Any = None
    rule_precision: float = 0.85
    rule_recall: float = 0.3
    rule_repeats: int = 3
    learned: bool = True
    learned_train: Any = field(default_factory=list)
    learned_heldout: Any = field(default_factory=list)
    learned_trees: int = 500
    learned_repeats: int = 5
    progress: bool = True

    def __post_init__(self) -> None:
        for name, minimum in (
            ("episodes", 1),
            ("seed", 0),
            ("onset_step", 1),
            ("refine_top", 1),
            ("channel_threshold", 0),
            ("folds", 2),
            ("tree_depth", 1),
            ("rule_precision", 0),
            ("rule_recall", 0),
            ("rule_repeats", 1),
            ("learned_trees", 1),
            ("learned_repeats", 1),
        ):
            _at_least(self, name, minimum)
        if self.scan_alpha is not None and not 0 < self.scan_alpha < 1:
            raise CausalTraceError(f"scan_alpha must be in (0, 1), got {self.scan_alpha}")


SCHEMAS = {
    "generate_schema": GenerateConfig,
    "eval_schema": EvalConfig,
    "audit_schema": AuditOptions,
}


def register_schemas() -> None:
    """Store the apps' schemas in Hydra's ConfigStore (idempotent)."""
    store = ConfigStore.instance()
    for name, node in SCHEMAS.items():
        store.store(name=name, node=node)


def options(schema: type[T], cfg: DictConfig) -> T:
    """The app's config as its dataclass (ranges and choices checked by ``__post_init__``);
    the groups and ``Any`` sections become plain dicts and lists."""
    return OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(schema), cfg))


register_schemas()
