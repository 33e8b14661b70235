"""What every trainer adapter shares: episode records and the self-contained ground truth.

A *record* is one episode as a trainer sees it: its id, the prompt (chat messages), the oracle
label, the answer space, and answer-free metadata. The *ground truth* is a JSON string holding the
label, the answer space, the environment's rules (:class:`EpisodeRules`: the tool-call budget and
whether a malformed submit could be retried) and, optionally, the reward configuration, so that a
reward worker can score an output from that string alone, without the SCM or the dataset, and by
the rules the rollout ran under.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

from causaltrace.core.files import json_load
from causaltrace.datasets.reading import DatasetSource
from causaltrace.env.session import EnvConfig
from causaltrace.episodes.answers import AnswerSpace
from causaltrace.episodes.labels import OracleLabel
from causaltrace.scoring.rewards import CompositeReward

GROUND_TRUTH_VERSION = 1

# Metadata keys that would carry the answer: refused so a prompt-side column cannot leak it.
LEAKY_METADATA_KEYS = frozenset(
    {
        "label",
        "ground_truth",
        "answer",
        "solution",
        "cause",
        "root_cause",
        "slice",
        "true_slice",
        "strength",
        "onset",
        "onset_time",
        "effect",
        "effect_in_slice",
        "effect_overall",
        "reward_model",
    }
)


@dataclass(frozen=True)
class EpisodeRecord:
    """One episode for export: id, prompt messages, label, answer space, answer-free metadata."""

    episode_id: str
    prompt: tuple[Mapping[str, Any], ...]
    label: OracleLabel
    space: AnswerSpace
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "episode_id", str(self.episode_id))
        object.__setattr__(self, "prompt", tuple(_message(m) for m in self.prompt))
        if not self.prompt:
            raise ValueError(f"episode {self.episode_id!r}: the prompt has no messages")
        leaky = sorted(LEAKY_METADATA_KEYS & set(self.metadata))
        if leaky:
            raise ValueError(
                f"episode {self.episode_id!r}: metadata key(s) {leaky} would carry the answer; "
                "the label travels in the ground truth column only"
            )
        object.__setattr__(self, "metadata", dict(self.metadata))


def as_record(item: EpisodeRecord | Sequence[Any] | Mapping[str, Any]) -> EpisodeRecord:
    """An :class:`EpisodeRecord` from a record, a tuple ``(id, prompt, label, space[, metadata])``
    or a mapping with those keys. A prompt given as a string becomes one user message.

    Args:
        item: A record, a tuple, or a mapping with keys ``episode_id``, ``prompt``, ``label``,
            ``space`` and optionally ``metadata``; a label given as a mapping is read with
            :meth:`OracleLabel.from_dict`.

    Raises:
        ValueError: A tuple has the wrong length, or the record is invalid (no prompt messages,
            or metadata that would carry the answer).
    """
    if isinstance(item, EpisodeRecord):
        return item
    if isinstance(item, Mapping):
        fields_ = [
            item["episode_id"],
            item["prompt"],
            item["label"],
            item["space"],
            item.get("metadata") or {},
        ]
    else:
        fields_ = list(item)
        if len(fields_) == 4:
            fields_.append({})
        if len(fields_) != 5:
            raise ValueError("a record is (episode_id, prompt, label, space[, metadata])")
    episode_id, prompt, label, space, metadata = fields_
    if isinstance(prompt, str):
        prompt = [{"role": "user", "content": prompt}]
    if isinstance(label, Mapping):
        label = OracleLabel.from_dict(label)
    return EpisodeRecord(episode_id, tuple(prompt), label, space, metadata)


def dataset_records(source: Any, episodes: Sequence[str] | None = None) -> list[EpisodeRecord]:
    """The records of a generated dataset (a directory or a ``DatasetSource``), in dataset
    order: its prompts as user messages, labels, answer space, and answer-free metadata (the
    dataset's name and split).

    Args:
        source (str | Path | DatasetSource): The dataset directory, or an open
            :class:`~causaltrace.datasets.reading.DatasetSource`.
        episodes: The episode ids to take, in this order; every episode by default.
    """
    if not hasattr(source, "episode_ids"):
        source = DatasetSource(source)

    manifest = json_load(source.root / "manifest.json")
    meta = {k: manifest[k] for k in ("name", "split") if isinstance(manifest.get(k), (str, int))}
    meta = {("dataset" if k == "name" else k): v for k, v in meta.items()}
    chosen = source.episode_ids if episodes is None else list(episodes)
    return [
        EpisodeRecord(
            e,
            ({"role": "user", "content": source.prompt(e)},),
            source.label(e),
            source.answer_space,
            meta,
        )
        for e in chosen
    ]


def as_records(items: Iterable[Any]) -> list[EpisodeRecord]:
    return [as_record(item) for item in items]


def _message(msg: Mapping[str, Any]) -> dict[str, Any]:
    if not isinstance(msg, Mapping) or "role" not in msg or "content" not in msg:
        raise ValueError(f"a prompt message needs 'role' and 'content', got {msg!r}"[:200])
    return {"role": str(msg["role"]), "content": str(msg["content"])}


# -- ground truth -----------------------------------------------------------------------------
@dataclass(frozen=True)
class EpisodeRules:
    """The environment's rules a rollout ran under, stored in its ground truth.

    A reward adapter that scores a text transcript (verl's ``compute_score``, TRL's reward
    functions) cannot see the environment; without these it would accept a submit made after
    the budget ran out, or refuse the valid retry that followed a malformed submit. One
    setting, written once at export, so the tools and every reward agree.

    Args:
        max_tool_calls: The tool-call budget; :class:`~causaltrace.env.EnvConfig`'s (30) by
            default. A reward config that sets ``parse.max_tool_calls`` itself wins.
        retry_malformed_submit: A malformed submit answered with its format error and let the
            agent try again (see :class:`~causaltrace.scoring.ParsePolicy`); on by default, as
            in the RL exports.
    """

    max_tool_calls: int = EnvConfig.max_tool_calls
    retry_malformed_submit: bool = True

    def __post_init__(self) -> None:
        if self.max_tool_calls < 1:
            raise ValueError(f"rules: max_tool_calls must be >= 1, got {self.max_tool_calls}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "max_tool_calls": int(self.max_tool_calls),
            "retry_malformed_submit": bool(self.retry_malformed_submit),
        }

    def env_reward(self) -> dict[str, Any]:
        """The ``reward`` section of an environment config that runs by these rules."""
        return {"parse": {"retry_malformed_submit": bool(self.retry_malformed_submit)}}


RL_RULES = EpisodeRules()
"""The rules the RL exports store and run their tools by: the default budget, retries on."""


def ground_truth_json(
    label: OracleLabel,
    space: AnswerSpace,
    reward: CompositeReward | Mapping[str, Any] | None = None,
    rules: EpisodeRules | None = None,
) -> str:
    """The ground truth string of one episode: label, answer space, the environment's rules and
    optional reward config.

    Args:
        label: The episode's oracle label.
        space: The episode's answer space.
        reward: A reward (or its config) to store with the label; none by default (the reward
            functions then use TRACE).
        rules: The environment's rules to score by; none by default (the reward's own parse
            policy alone; the RL exports store :class:`EpisodeRules`' defaults).

    Returns:
        Compact JSON with sorted keys, so equal ground truths are equal strings.
    """
    data: dict[str, Any] = {
        "version": GROUND_TRUTH_VERSION,
        "label": label.to_dict(),
        "space_id": space.fingerprint(),
        "space": space.to_dict(),
    }
    if reward is not None:
        if not isinstance(reward, CompositeReward):
            reward = CompositeReward.from_config(reward)
        data["reward"] = reward.config()
    if rules is not None:
        data["rules"] = rules.to_dict()
    return json.dumps(data, sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True)
class GroundTruth:
    label: OracleLabel
    space: AnswerSpace
    reward: Mapping[str, Any] | None = None
    rules: EpisodeRules | None = None

    def scoring_reward(
        self, reward: CompositeReward | Mapping[str, Any] | None = None
    ) -> CompositeReward:
        """The reward to score this episode with: ``reward``, else the stored one, else TRACE;
        its parse policy then takes the stored rules (a budget the reward sets itself wins).

        Args:
            reward: A reward (or its config) chosen by the caller; none by default.
        """
        composite = reward_from(reward if reward is not None else self.reward)
        if self.rules is None:
            return composite
        policy = composite.policy
        ruled = replace(
            policy,
            max_tool_calls=(
                policy.max_tool_calls
                if policy.max_tool_calls is not None
                else self.rules.max_tool_calls
            ),
            retry_malformed_submit=policy.retry_malformed_submit
            or self.rules.retry_malformed_submit,
        )
        if ruled == policy:
            return composite
        config = composite.config()
        config["parse"] = {**config["parse"], **_policy_delta(ruled)}
        return reward_from(config)


_SPACES: dict[str, AnswerSpace] = {}


def load_ground_truth(ground_truth: str | Mapping[str, Any]) -> GroundTruth:
    """Rebuild label, space and reward config from :func:`ground_truth_json`'s output.

    Strings are cached (a trainer scores each prompt many times), and spaces are cached by
    fingerprint, so a reward worker rebuilds each answer space once.

    Args:
        ground_truth: The JSON string, or the mapping it decodes to.

    Raises:
        ValueError: The label or the space is missing, or the version is not supported.
    """
    if isinstance(ground_truth, str):
        return _load_cached(ground_truth)
    return _load(ground_truth)


@lru_cache(maxsize=8192)
def _load_cached(text: str) -> GroundTruth:
    return _load(json.loads(text))


def _load(data: Mapping[str, Any]) -> GroundTruth:
    if not isinstance(data, Mapping) or "label" not in data or "space" not in data:
        raise ValueError("ground truth must hold 'label' and 'space' (see ground_truth_json)")
    version = data.get("version", GROUND_TRUTH_VERSION)
    if version != GROUND_TRUTH_VERSION:
        raise ValueError(
            f"ground truth version {version} is not supported (expected {GROUND_TRUTH_VERSION})"
        )
    key = data.get("space_id")
    space = _SPACES.get(key) if key else None
    if space is None:
        space = AnswerSpace.from_dict(data["space"])
        if key:
            if len(_SPACES) > 256:
                _SPACES.clear()
            _SPACES[key] = space
    label = OracleLabel.from_dict(data["label"])
    rules = data.get("rules")
    if rules is not None:
        try:
            rules = EpisodeRules(**rules)
        except TypeError as exc:
            raise ValueError(f"ground truth rules {rules!r} are not valid: {exc}") from None
    return GroundTruth(label, space, data.get("reward"), rules)


def _policy_delta(policy: Any) -> dict[str, Any]:
    return {
        "max_tool_calls": policy.max_tool_calls,
        "retry_malformed_submit": policy.retry_malformed_submit,
    }


_REWARDS: dict[str, CompositeReward] = {}


def reward_from(config: CompositeReward | Mapping[str, Any] | None) -> CompositeReward:
    """A composite reward from a config (cached by its JSON form); ``None``: TRACE.

    Args:
        config: A reward (returned as is), its config, or ``None`` for TRACE.
    """
    if isinstance(config, CompositeReward):
        return config
    key = json.dumps(config, sort_keys=True, default=str) if config is not None else ""
    if key not in _REWARDS:
        _REWARDS[key] = CompositeReward.from_config(config)
    return _REWARDS[key]
