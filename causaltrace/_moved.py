"""Where the engine's modules moved when it was grouped in layers (model, episodes, datasets,
structure): ``import causaltrace.panel`` still works, gives the module now at
``causaltrace.model.panel`` (the same object, so pickles and ``isinstance`` agree) and warns
once with a DeprecationWarning naming the new path."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from types import ModuleType

MOVED = {
    "causaltrace.panel": "causaltrace.model.panel",
    "causaltrace.slices": "causaltrace.model.slices",
    "causaltrace.node": "causaltrace.model.node",
    "causaltrace.noise": "causaltrace.model.noise",
    "causaltrace.distributions": "causaltrace.model.distributions",
    "causaltrace.count_kernels": "causaltrace.model.count_kernels",
    "causaltrace.profiles": "causaltrace.model.profiles",
    "causaltrace.interventions": "causaltrace.model.interventions",
    "causaltrace.intervention_points": "causaltrace.model.intervention_points",
    "causaltrace.scm": "causaltrace.model.scm",
    "causaltrace.simulate": "causaltrace.model.simulate",
    "causaltrace.counterfactuals": "causaltrace.model.counterfactuals",
    "causaltrace.domain": "causaltrace.episodes.domain",
    "causaltrace.labels": "causaltrace.episodes.labels",
    "causaltrace.alerts": "causaltrace.episodes.alerts",
    "causaltrace.verify": "causaltrace.episodes.verify",
    "causaltrace.composition": "causaltrace.episodes.composition",
    "causaltrace.difficulty": "causaltrace.episodes.difficulty",
    "causaltrace.generation": "causaltrace.datasets.generation",
    "causaltrace.storage": "causaltrace.datasets.storage",
    "causaltrace.seeds": "causaltrace.datasets.seeds",
    "causaltrace.ray_executor": "causaltrace.datasets.ray_executor",
    "causaltrace.identification": "causaltrace.structure.identification",
    "causaltrace.structure_export": "causaltrace.structure.export",
}


class _Loader(importlib.abc.Loader):
    def __init__(self, target: str) -> None:
        self.target = target

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        warnings.warn(
            f"{spec.name} moved to {self.target}; import it from there (or from causaltrace)",
            DeprecationWarning,
            stacklevel=2,
        )
        return importlib.import_module(self.target)

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the module was imported under its new name."""


class MovedFinder(importlib.abc.MetaPathFinder):
    """Finds the old names of moved modules (and only those)."""

    def find_spec(self, fullname, path=None, target=None):
        new = MOVED.get(fullname)
        if new is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _Loader(new))


def install() -> None:
    if not any(isinstance(f, MovedFinder) for f in sys.meta_path):
        sys.meta_path.append(MovedFinder())
