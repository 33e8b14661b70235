"""Gymnasium registration: every dataset as a ``gymnasium.Env`` made by ``gymnasium.make``.

    import gymnasium
    import causaltrace.env.gymnasium_env  # registers the ids (gymnasium.register_envs idiom)

    env = gymnasium.make("causaltrace/ads-test-v0")
    prompt, info = env.reset(seed=12)                       # episode 12 % n
    obs, reward, terminated, truncated, info = env.step(
        '{"name": "sql", "arguments": {"query": "SHOW TABLES"}}'
    )

(or, without the import, ``gymnasium.make("causaltrace.env.gymnasium_env:causaltrace/ads-test-v0")``:
Gymnasium imports the module named before the colon.) Gymnasium 1.x has no plug-in entry
points (0.x's ``gymnasium.envs`` entry-point group, read by ``load_env_plugins``, was removed
in 1.0), so the ids are registered when this module is imported, and by :func:`register_envs`.

**Ids.** ``causaltrace/<dataset name, "_" -> "-">-v0``, one per dataset preset of every
registered domain (``conf/dataset/*.yaml`` of the packages in the ``causaltrace.domains``
entry points, read without importing the domains) and one per generated dataset directory
(``manifest.json``) under ``./data`` and the repository's committed ``data/``:
``causaltrace/ads-test-v0``, ``causaltrace/ads-easy-v0``, ..., ``causaltrace/services-test-v0``.
``causaltrace/diagnosis-v0`` takes any dataset directory (``dataset_dir=``). An id names a
dataset; its directory is found when the environment is made: ``dataset_dir=``, else
``<data_root>/<name>`` (``data_root=``), else ``./data/<name>`` (where ``causaltrace-generate``
writes it), else the repository's ``data/<name>``; a preset not generated yet is an error
that says how to generate it.

**Protocol.** :class:`CausalTraceGymEnv` is a :class:`~causaltrace.env.gym.DiagnosisEnv` and a
``gymnasium.Env``: the same sessions, budgets and rewards (:class:`DiagnosisSession`), with
Gymnasium's spaces and seeding. The observation is text (the prompt, then each tool's
output); an action is one assistant message as text: a JSON tool call
(``{"name": ..., "arguments": ...}``, or OpenAI's ``{"function": {...}}``) is a step; any
other text is a message without a tool call, which the session takes as the final answer
(scored by the reward's parser, as the harness scores it). ``reset(seed=s)`` opens episode
``s mod n`` (as :class:`DiagnosisEnv`), ``options={"episode": id}`` that episode, and a plain
``reset()`` an episode drawn from the environment's seeded ``np_random``.
"""

from __future__ import annotations

import json
import os
import re
import string
from collections.abc import Mapping
from importlib import util as importlib_util
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, ClassVar

import gymnasium
import yaml
from gymnasium import spaces

from causaltrace.datasets.reading import DatasetSource
from causaltrace.env.gym import DiagnosisEnv
from causaltrace.env.session import EnvConfig
from causaltrace.errors import CausalTraceError
from causaltrace.tools import ToolConfig

NAMESPACE = "causaltrace"
VERSION = 0
GENERIC_ID = f"{NAMESPACE}/diagnosis-v{VERSION}"
ENTRY_POINT = "causaltrace.env.gymnasium_env:CausalTraceGymEnv"
DOMAINS_GROUP = "causaltrace.domains"
# The repository's committed splits (a source checkout or an editable install; absent from a
# wheel install, where datasets are generated into ./data).
REPO_DATA = Path(__file__).resolve().parents[2] / "data"

# An observation is the prompt or one tool output (each capped by the tools' ToolConfig at
# 20,000 characters by default) with a line about the end of the episode; an action one tool
# call with its code or query.
OBSERVATION_MAX_CHARS = 1 << 20
ACTION_MAX_CHARS = 1 << 17


class AnyText(spaces.Text):
    """A :class:`gymnasium.spaces.Text` of any Unicode characters.

    Gymnasium's ``Text`` holds strings over a finite charset; tool outputs and code are any
    text, so membership here checks the length only. The charset (printable ASCII) is what
    :meth:`sample` draws from.

    Args:
        max_length: The longest string (characters).
        min_length: The shortest string; 0 by default.
    """

    def __init__(self, max_length: int, *, min_length: int = 0, seed=None):
        super().__init__(max_length, min_length=min_length, charset=string.printable, seed=seed)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length

    def __repr__(self) -> str:
        return f"AnyText({self.min_length}, {self.max_length})"


def env_id(dataset: str) -> str:
    """The Gymnasium id of a dataset name (``ads_test`` -> ``causaltrace/ads-test-v0``).

    Args:
        dataset: The dataset's name (its preset's ``name``, or its directory's name).
    """
    name = re.sub(r"[^A-Za-z0-9.-]+", "-", dataset.replace("_", "-")).strip("-")
    return f"{NAMESPACE}/{name}-v{VERSION}"


def _package_dirs(module: str) -> list[Path]:
    """The folders of the package holding ``module`` (found without importing it)."""
    try:
        spec = importlib_util.find_spec(module)
        if spec is not None and spec.submodule_search_locations is None:
            package = module.rpartition(".")[0]
            spec = importlib_util.find_spec(package) if package else None
    except (ImportError, ValueError):
        return []
    if spec is None or spec.submodule_search_locations is None:
        return []
    return [Path(d) for d in spec.submodule_search_locations]


def domain_presets() -> dict[str, str]:
    """Dataset preset name -> domain name, over the registered domains' ``conf/dataset``."""
    found: dict[str, str] = {}
    for ep in sorted(entry_points(group=DOMAINS_GROUP), key=lambda e: e.name):
        for folder in _package_dirs(ep.module):
            for path in sorted((folder / "conf" / "dataset").glob("*.yaml")):
                try:
                    name = (yaml.safe_load(path.read_text()) or {}).get("name") or path.stem
                except (OSError, yaml.YAMLError, AttributeError):
                    name = path.stem
                found.setdefault(str(name), ep.name)
    return found


def data_roots() -> list[Path]:
    """Where datasets are looked for by name: ``./data``, then the repository's ``data/``."""
    try:
        roots = [Path.cwd() / "data", REPO_DATA]
    except OSError:  # the working directory was removed
        roots = [REPO_DATA]
    return list(dict.fromkeys(r.resolve() for r in roots))


def generated_datasets() -> list[str]:
    """The names of the dataset directories (with a ``manifest.json``) under :func:`data_roots`."""
    names: list[str] = []
    for root in data_roots():
        if root.is_dir():
            names += [p.parent.name for p in sorted(root.glob("*/manifest.json"))]
    return list(dict.fromkeys(names))


def dataset_names() -> list[str]:
    """Every dataset name an id is registered for: the domains' presets and generated ones."""
    return sorted(set(domain_presets()) | set(generated_datasets()))


def resolve_dataset(
    dataset: str | None = None,
    dataset_dir: str | os.PathLike | None = None,
    data_root: str | os.PathLike | None = None,
) -> Path:
    """The directory of a dataset given by name or by directory.

    Args:
        dataset: The dataset's name.
        dataset_dir: Its directory (wins over the name).
        data_root: Look for ``<data_root>/<dataset>`` only; :func:`data_roots` by default.

    Raises:
        CausalTraceError: Neither is given, or no generated dataset of that name is found.
    """
    if dataset_dir is not None:
        return Path(dataset_dir)
    if not dataset:
        raise CausalTraceError(
            f"{GENERIC_ID} needs dataset_dir=<a generated dataset directory>, "
            "e.g. gymnasium.make(..., dataset_dir='data/ads_test')"
        )
    roots = [Path(data_root)] if data_root is not None else data_roots()
    for root in roots:
        if (root / dataset / "manifest.json").is_file():
            return root / dataset
    domain = domain_presets().get(dataset)
    how = (
        f"generate it with `causaltrace-generate domain={domain} dataset={dataset}` "
        f"(it writes data/{dataset})"
        if domain
        else "generate it with causaltrace-generate"
    )
    raise CausalTraceError(
        f"no generated dataset {dataset!r} under {', '.join(map(str, roots))}: {how}, "
        "or pass dataset_dir= (or data_root=) to gymnasium.make"
    )


def _config(value: Any, cls: Any) -> Any:
    return value if value is None or isinstance(value, cls) else cls.from_mapping(value)


class CausalTraceGymEnv(DiagnosisEnv, gymnasium.Env):
    """A :class:`DiagnosisEnv` that is a ``gymnasium.Env`` (see the module docstring).

    Args:
        dataset: The dataset's name (the registered ids pass it).
        dataset_dir: The dataset's directory (wins over ``dataset``).
        data_root: Where to look for ``<data_root>/<dataset>``; ``./data`` then the
            repository's ``data/`` by default.
        config (EnvConfig | Mapping | None): Budgets, reward and transcripts; the
            :class:`EnvConfig` defaults by default.
        tool_config (ToolConfig | Mapping | None): The sandbox settings; the defaults by default.
        cache_dir: Where a lazy split's rebuilt episodes go; the dataset's own by default.
        render_mode: Must be None (there is nothing to render).

    Raises:
        CausalTraceError: The dataset is not found, or ``render_mode`` is not None.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}

    def __init__(
        self,
        dataset: str | None = None,
        *,
        dataset_dir: str | os.PathLike | None = None,
        data_root: str | os.PathLike | None = None,
        config: EnvConfig | Mapping[str, Any] | None = None,
        tool_config=None,
        cache_dir: str | os.PathLike | None = None,
        render_mode: str | None = None,
    ):
        if render_mode is not None:
            raise CausalTraceError(f"causaltrace environments render nothing: {render_mode!r}")
        self.render_mode = None
        source = DatasetSource(resolve_dataset(dataset, dataset_dir, data_root), cache_dir)
        super().__init__(source, _config(config, EnvConfig), _config(tool_config, ToolConfig))
        self.observation_space = AnyText(OBSERVATION_MAX_CHARS)
        self.action_space = AnyText(ACTION_MAX_CHARS, min_length=1)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Start an episode: ``options["episode"]``, else episode ``seed % n``, else one drawn
        from ``np_random``.

        Args:
            seed: Seeds ``np_random`` and picks episode ``seed % n``.
            options: ``{"episode": id}`` picks an episode by id.

        Returns:
            The prompt, and info with ``episode_id`` and the ``tools`` schemas.
        """
        gymnasium.Env.reset(self, seed=seed)
        episode = (options or {}).get("episode")
        if episode is None:
            ids = self.source.episode_ids
            index = seed if seed is not None else int(self.np_random.integers(len(ids)))
            episode = ids[index % len(ids)]
        return super().reset(options={"episode": episode})

    def step(self, action: Any) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """One assistant message: a JSON tool call is a tool step, other text the final answer.

        Args:
            action: The message as text (the action space); a tool call as a mapping is
                taken as :class:`DiagnosisEnv` takes it.

        Returns:
            ``(observation, reward, terminated, truncated, info)``.

        Raises:
            RuntimeError: :meth:`reset` was not called, or the episode is over.
        """
        call = tool_call(action)
        if call is not None:
            return super().step(call)
        if self.session is None:
            raise RuntimeError("call reset() before step()")
        result = self._runtime.run(self.session.turn([], str(action)))[-1]
        return result.observation, result.reward, result.terminated, result.truncated, result.info


def tool_call(action: Any) -> Any:
    """The tool call an action holds, or None when it is a message without one.

    Args:
        action: Text (a JSON object naming a tool, or anything else) or a tool call already.
    """
    if not isinstance(action, str):
        return action
    try:
        data = json.loads(action)
    except ValueError:
        return None
    if isinstance(data, Mapping) and (
        isinstance(data.get("name"), str) or isinstance(data.get("function"), Mapping)
    ):
        return data
    return None


def register_envs() -> list[str]:
    """Register every dataset's id (see the module docstring) and ``causaltrace/diagnosis-v0``;
    ids already registered are kept. Returns the ids this call registered."""
    registry = gymnasium.envs.registration.registry
    added = []
    wanted = {GENERIC_ID: {}}
    for name in dataset_names():
        wanted.setdefault(env_id(name), {"dataset": name})
    for id_, kwargs in wanted.items():
        if id_ not in registry:
            gymnasium.register(id=id_, entry_point=ENTRY_POINT, kwargs=kwargs)
            added.append(id_)
    return added


register_envs()
