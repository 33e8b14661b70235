"""Reward functions: a registry of named ``(answer, label) -> float`` terms and their weighted sum.

Contract of a reward function (see ``docs/rewards.md``)::

    @register_reward("my_term")
    def my_term(answer: ParsedAnswer, label: OracleLabel, *, some_param: float = 1.0) -> float:
        ...

- ``answer`` is a :class:`~causaltrace.scoring.parsing.ParsedAnswer`: ``answer.ok`` tells whether
  an answer parsed, ``answer.answer`` is the validated :class:`~causaltrace.episodes.answers.Answer`
  (``None`` on a format error), ``answer.space`` the :class:`AnswerSpace` (slice coverage and
  Jaccard), ``answer.tool_calls`` and ``answer.turns`` the trajectory's counts.
- ``label`` is the episode's :class:`~causaltrace.episodes.labels.OracleLabel`.
- Keyword-only parameters are set from configuration; the function must be pure and
  deterministic, must not raise on any parsed answer, and should return 0 on a format error.
- Terms that reward success return values in ``[0, 1]``; penalties (``tool_call_cost``) return
  values ``<= 0``.

:class:`CompositeReward` is a weighted sum of registered terms built from a Hydra/OmegaConf
mapping such as ``{"graded_attribution": 0.65, "full_attribution": 0.30, "format": 0.05}`` (the
default, TRACE's reward). It returns a :class:`RewardResult` with every term, for logging.
"""

from __future__ import annotations

import inspect
import math
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from omegaconf import OmegaConf

from causaltrace.core.registry import Registry
from causaltrace.episodes.answers import AnswerSpace
from causaltrace.episodes.labels import OracleLabel
from causaltrace.scoring.parsing import ParsedAnswer, ParsePolicy, parse_answer

RewardFn = Callable[..., float]

TRACE_WEIGHTS: Mapping[str, float] = {
    "graded_attribution": 0.65,
    "full_attribution": 0.30,
    "format": 0.05,
}


@dataclass(frozen=True)
class RewardSpec:
    """A registered reward: its function, a one-line description and its parameter defaults."""

    name: str
    fn: RewardFn
    description: str
    params: Mapping[str, Any]


def _reward_spec(name: str, fn: Any) -> RewardSpec:
    """A reward function's spec: its keyword-only parameters and its docstring's first line."""
    if isinstance(fn, RewardSpec):
        return fn
    if not callable(fn):
        raise TypeError(f"reward {name!r} must be a function (answer, label, **params); got {fn!r}")
    sig = inspect.signature(fn)
    positional = [
        p for p in sig.parameters.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    if len(positional) != 2:
        raise TypeError(
            f"reward {name!r} must take (answer, label) positionally and its parameters "
            f"keyword-only; got {sig}"
        )
    params = {
        p.name: p.default
        for p in sig.parameters.values()
        if p.kind == p.KEYWORD_ONLY and p.default is not p.empty
    }
    doc = (fn.__doc__ or "").strip().splitlines()
    return RewardSpec(name, fn, doc[0] if doc else "", params)


# Reward terms by name: the built-ins below, ``causaltrace.rewards`` entry points of installed
# packages, and terms registered at run time with :func:`register_reward`.
REWARDS: Registry[RewardSpec] = Registry("reward", "causaltrace.rewards", _reward_spec)


def register_reward(
    name: str | None = None, *, description: str | None = None, overwrite: bool = False
) -> Callable[[RewardFn], RewardFn]:
    """Decorator that registers ``fn(answer, label, **params) -> float`` under ``name``.

    ``name`` defaults to the function's name; registering a taken name raises unless
    ``overwrite=True``. Parameters must be keyword-only (they come from configuration).

    Args:
        name: The reward's name; the function's ``__name__`` by default.
        description: A one-line description; the docstring's first line by default.
        overwrite: Replace a reward of the same name; off by default.

    Returns:
        A decorator that registers the function and returns it unchanged.

    Raises:
        DuplicateNameError: The name is taken and ``overwrite`` is off (raised on decoration).
        RegistryError: The function does not follow the contract (raised on decoration).
    """

    def decorate(fn: RewardFn) -> RewardFn:
        key = name or fn.__name__
        spec = _reward_spec(key, fn)
        if description:
            spec = RewardSpec(key, fn, description, spec.params)
        REWARDS.register(key, spec, overwrite=overwrite)
        return fn

    return decorate


def unregister_reward(name: str) -> None:
    """Remove a reward registered at run time (for tests and notebooks).

    Args:
        name: The reward's name; an unknown name is ignored.
    """
    REWARDS.unregister(name)


def get_reward(name: str) -> RewardSpec:
    """The registered reward called ``name``.

    Args:
        name: A registered name, or a ``"module:attr"`` path to a reward function.

    Raises:
        RegistryError: An unknown name, or one that does not load as a reward.
    """
    return REWARDS.get(name)


def available_rewards() -> dict[str, str]:
    """Registered reward names and their one-line descriptions."""
    return {name: REWARDS.get(name).description for name in REWARDS.names()}


# -- built-in terms -------------------------------------------------------------------------
EXTRA_PENALTY = 0.5  # graded_attribution's penalty per answered cause that is not at work


def _cause_right(answer: ParsedAnswer, label: OracleLabel) -> bool:
    return answer.answer is not None and answer.answer.root_cause == label.cause


def _true_slice(answer: ParsedAnswer, label: OracleLabel) -> str | None:
    return answer.space.canonical_slice(label.slice) if label.slice else None


def _is_set(answer: ParsedAnswer, label: OracleLabel) -> bool:
    """Whether the answer or the truth has more than one cause (the set form of a term)."""
    return bool(label.also) or (answer.answer is not None and bool(answer.answer.also))


CausePair = tuple[str, str | None]


def true_causes(space: AnswerSpace, label: OracleLabel) -> list[CausePair]:
    """The true ``(cause, canonical slice)`` pairs, the label's first cause first (a cause may
    appear more than once, on different slices).

    Args:
        space: The answer space (canonicalizes the label's slices).
        label: The episode's oracle label.
    """
    return [(c, space.canonical_slice(s) if s else None) for c, s in label.causes]


def _answered(answer: ParsedAnswer) -> list[CausePair]:
    """The answered ``(cause, slice)`` entries, in the answer's order."""
    return [(c.root_cause, c.slice) for c in answer.answer.causes]


def _pair_credit(space: AnswerSpace, cause: str, answered: str | None, true: str | None) -> float:
    """graded_attribution of one answered cause against the same true cause."""
    if not space.takes_slice(cause):
        return 1.0
    return 0.5 + 0.5 * space.jaccard(answered, true)


@dataclass(frozen=True)
class CauseMatching:
    """A one-to-one matching of answered entries to true causes (see :func:`match_causes`).

    ``credit`` and ``jaccard`` hold, per true cause in the label's order, its matched entry's
    :func:`graded_attribution` credit and slice Jaccard (0 for a true cause left unmatched);
    ``matched`` the answered entry's index (``None``: unmatched); ``extras`` counts the answered
    entries matched to no true cause."""

    credit: tuple[float, ...]
    jaccard: tuple[float, ...]
    matched: tuple[int | None, ...]
    extras: int


def match_causes(
    space: AnswerSpace, truths: list[CausePair], answered: list[CausePair]
) -> CauseMatching:
    """Match answered entries to true causes one to one, maximizing the total credit.

    An entry earns the single-cause credit against a true cause of the same name (1 without a
    slice, ``0.5 + 0.5 x Jaccard`` with one) and 0 against another cause, so the order of the
    entries and a kind named on several slices cost nothing: the assignment (Hungarian,
    ``scipy.optimize.linear_sum_assignment``) pairs each kind's entries with its true slices
    best. Only pairs of the same cause count as matched.

    Args:
        space: The answer space (slice Jaccard).
        truths: The true ``(cause, canonical slice)`` pairs.
        answered: The answered ``(cause, slice)`` entries.
    """
    # lazy: scipy.optimize takes ~0.5 s to import; only set answers need it, not every worker
    from scipy.optimize import linear_sum_assignment

    credit = np.zeros((len(truths), len(answered)))
    for i, (cause, true) in enumerate(truths):
        for j, (named, sl) in enumerate(answered):
            if named == cause:
                credit[i, j] = _pair_credit(space, cause, sl, true)
    rows, cols = linear_sum_assignment(credit, maximize=True)
    matched: list[int | None] = [None] * len(truths)
    for i, j in zip(rows.tolist(), cols.tolist()):
        if truths[i][0] == answered[j][0]:
            matched[i] = j
    return CauseMatching(
        credit=tuple(0.0 if j is None else float(credit[i, j]) for i, j in enumerate(matched)),
        jaccard=tuple(
            0.0 if j is None else space.jaccard(answered[j][1], truths[i][1])
            for i, j in enumerate(matched)
        ),
        matched=tuple(matched),
        extras=len(answered) - sum(j is not None for j in matched),
    )


def same_causes(
    space: AnswerSpace, truths: list[CausePair], answered: list[CausePair], *, slices: bool
) -> bool:
    """Whether the answered entries are the true causes as a multiset: of names, or (with
    ``slices``) of ``(cause, exact slice)`` where the cause takes a slice.

    Args:
        space: The answer space (which causes take a slice).
        truths: The true ``(cause, canonical slice)`` pairs.
        answered: The answered ``(cause, canonical slice)`` entries.
        slices: Compare slices too (FullAttr), not only the causes named.
    """

    def key(cause: str, sl: str | None) -> CausePair:
        return cause, (sl if slices and space.takes_slice(cause) else None)

    return Counter(key(*t) for t in truths) == Counter(key(*a) for a in answered)


@register_reward("format")
def format_reward(answer: ParsedAnswer, label: OracleLabel) -> float:
    """1 when an answer parsed, else 0."""
    return 1.0 if answer.ok else 0.0


@register_reward("cause_accuracy")
def cause_accuracy(answer: ParsedAnswer, label: OracleLabel) -> float:
    """1 when the root cause is right (with several causes: the causes named are the truth's,
    each as often as it is at work)."""
    if _is_set(answer, label):
        if not answer.ok:
            return 0.0
        truths = true_causes(answer.space, label)
        return 1.0 if same_causes(answer.space, truths, _answered(answer), slices=False) else 0.0
    return 1.0 if _cause_right(answer, label) else 0.0


@register_reward("full_attribution")
def full_attribution(answer: ParsedAnswer, label: OracleLabel) -> float:
    """FullAttr@1: right cause and, where the cause takes a slice, exactly the right slice.

    With several causes (in the answer or the truth): 1 when the answered entries are the true
    causes, each with exactly its true slice where it takes one (as multisets: order does not
    matter, and a cause at work on two slices is named twice, once on each)."""
    if _is_set(answer, label):
        if not answer.ok:
            return 0.0
        truths = true_causes(answer.space, label)
        return 1.0 if same_causes(answer.space, truths, _answered(answer), slices=True) else 0.0
    if not _cause_right(answer, label):
        return 0.0
    if not answer.space.takes_slice(label.cause):
        return 1.0
    return 1.0 if answer.answer.slice == _true_slice(answer, label) else 0.0


@register_reward("slice_jaccard")
def slice_jaccard(answer: ParsedAnswer, label: OracleLabel) -> float:
    """Jaccard similarity of the leaf cells covered by the predicted and true slices.

    No slice covers the whole panel, so a slice broader than the truth is penalized by the
    cells it adds. Independent of the cause; 0 on a format error. With several causes (in the
    answer or the truth): the mean over true causes of the Jaccard of the answered entry
    :func:`match_causes` pairs with it (0 for a true cause left unmatched).
    """
    if answer.answer is None:
        return 0.0
    if _is_set(answer, label):
        truths = true_causes(answer.space, label)
        matching = match_causes(answer.space, truths, _answered(answer))
        return math.fsum(matching.jaccard) / len(truths)
    return answer.space.jaccard(answer.answer.slice, _true_slice(answer, label))


@register_reward("graded_attribution")
def graded_attribution(
    answer: ParsedAnswer, label: OracleLabel, *, extra_penalty: float = EXTRA_PENALTY
) -> float:
    """0 for a wrong cause; 1 for a right cause without a slice; 0.5 + 0.5 x slice Jaccard else.

    With several causes (in the answer or the truth), a set score: answered entries are
    matched to true causes one to one, maximizing the total credit (:func:`match_causes`);
    the mean over true causes of their matched entry's credit (0 if none), minus
    ``extra_penalty`` per answered entry matched to no true cause, floored at 0. For one
    answered and one true cause this is the single-cause credit exactly.

    Args:
        answer: The parsed answer.
        label: The episode's oracle label.
        extra_penalty: The penalty per answered entry that is not at work; 0.5 by default.
    """
    if _is_set(answer, label):
        if not answer.ok:
            return 0.0
        truths = true_causes(answer.space, label)
        matching = match_causes(answer.space, truths, _answered(answer))
        credit = math.fsum(matching.credit) / len(truths)
        return max(0.0, credit - float(extra_penalty) * matching.extras)
    if not _cause_right(answer, label):
        return 0.0
    if not answer.space.takes_slice(label.cause):
        return 1.0
    return 0.5 + 0.5 * slice_jaccard(answer, label)


@register_reward("malformed_submit")
def malformed_submit(
    answer: ParsedAnswer, label: OracleLabel, *, max_penalty: float | None = None
) -> float:
    """A penalty of 1 per malformed submit the environment refused before the answer, <= 0.

    Only with ``parse.retry_malformed_submit`` can an episode have any (without it the first
    submit ends the episode). With weight ``w`` and budget ``max_tool_calls`` the term moves
    the composite by at most ``-w * max_tool_calls`` (or ``-w * max_penalty``), so a reward
    in ``[0, 1]`` becomes one in ``[-w * max_tool_calls, 1]``.

    Args:
        answer: The parsed answer.
        label: The episode's oracle label.
        max_penalty: A cap on the number counted; no cap by default.
    """
    count = float(answer.malformed_submits)
    return -min(count, max_penalty) if max_penalty is not None else -count


@register_reward("tool_call_cost")
def tool_call_cost(
    answer: ParsedAnswer,
    label: OracleLabel,
    *,
    cost: float = 0.01,
    free_calls: int = 0,
    max_penalty: float | None = None,
) -> float:
    """A penalty of ``cost`` per tool call beyond ``free_calls`` (submit excluded), <= 0.

    Args:
        answer: The parsed answer.
        label: The episode's oracle label.
        cost: The penalty per call; 0.01 by default.
        free_calls: Calls that cost nothing; 0 by default.
        max_penalty: A cap on the total penalty; no cap by default.
    """
    penalty = cost * max(0, int(answer.tool_calls) - int(free_calls))
    if max_penalty is not None:
        penalty = min(penalty, float(max_penalty))
    return -float(penalty)


@register_reward("impact_estimation")
def impact_estimation(
    answer: ParsedAnswer,
    label: OracleLabel,
    *,
    kpi: str | None = None,
    scope: str = "slice",
    require_cause: bool = True,
    min_denominator: float = 1.0,
) -> float:
    """1 - relative error of the agent's effect estimate against the label's, clipped to [0, 1].

    The estimate is the answer's ``impact`` (factual minus counterfactual after the onset);
    the truth is ``label.effect_in_slice[kpi]`` (``scope="slice"``) or
    ``label.effect_overall[kpi]`` (``scope="overall"``). The KPI is ``kpi``, else the one the
    answer names, else the label's only KPI. 0 when there is no estimate, the KPI is unknown,
    or (with ``require_cause``) the cause is wrong.

    Args:
        answer: The parsed answer.
        label: The episode's oracle label.
        kpi: The KPI to score; by default the one the answer names, else the label's only one.
        scope: ``"slice"`` (default, the effect in the true slice) or ``"overall"``.
        require_cause: Score 0 unless the cause is right; on by default.
        min_denominator: The smallest denominator of the relative error (guards tiny true
            effects); 1.0 by default.
    """
    if answer.answer is None or answer.answer.impact is None:
        return 0.0
    if require_cause and not _cause_right(answer, label):
        return 0.0
    effects = label.effect_in_slice if scope == "slice" else label.effect_overall
    name = kpi or answer.answer.impact.kpi
    if name is None and len(effects) == 1:
        name = next(iter(effects))
    if name is None or name not in effects:
        return 0.0
    if kpi is not None and answer.answer.impact.kpi not in (None, kpi):
        return 0.0
    truth = float(effects[name].effect)
    estimate = float(answer.answer.impact.effect)
    rel = abs(estimate - truth) / max(abs(truth), float(min_denominator))
    return float(min(1.0, max(0.0, 1.0 - rel))) if math.isfinite(rel) else 0.0


# -- composite --------------------------------------------------------------------------------
@dataclass(frozen=True)
class RewardResult:
    """A composite reward and its breakdown.

    ``terms`` maps each term to its raw value, ``weights`` to its weight; ``score`` is the
    weighted sum. ``to_dict()`` gives a flat dict of floats for trainers' loggers.
    """

    score: float
    terms: Mapping[str, float]
    weights: Mapping[str, float]
    parse_ok: bool
    parse_error: str | None = None
    tool_calls: int = 0
    turns: int = 0

    def to_dict(self) -> dict[str, float]:
        out = {"score": float(self.score)}
        out.update({name: float(v) for name, v in self.terms.items()})
        out["parse_ok"] = 1.0 if self.parse_ok else 0.0
        out["tool_calls"] = float(self.tool_calls)
        out["turns"] = float(self.turns)
        return out


@dataclass(frozen=True)
class RewardTerm:
    name: str
    weight: float
    params: Mapping[str, Any] = field(default_factory=dict)


class CompositeReward:
    """A weighted sum of registered reward terms, with the parse policy used to read answers.

    ``terms`` maps a registered name to a weight, or to ``{"weight": w, **params}`` for a term
    with parameters (e.g. ``{"tool_call_cost": {"weight": 1.0, "cost": 0.02}}``). The default
    is :data:`TRACE_WEIGHTS`: 0.65 graded + 0.30 full + 0.05 format.

    Args:
        terms: Registered reward name -> weight, or -> ``{"weight": w, **params}``; TRACE's
            weights by default. Accepts an OmegaConf config.
        parse: The parse policy, or its config mapping; :class:`ParsePolicy` defaults by
            default.

    Raises:
        ValueError: No terms, or a parameter the term does not take.
        RegistryError: An unknown reward name.
    """

    def __init__(
        self,
        terms: Mapping[str, Any] | None = None,
        *,
        parse: ParsePolicy | Mapping[str, Any] | None = None,
    ):
        terms = _plain(terms) if terms is not None else dict(TRACE_WEIGHTS)
        if not terms:
            raise ValueError("a composite reward needs at least one term")
        built = []
        for name, value in terms.items():
            spec = get_reward(name)
            if isinstance(value, Mapping):
                value = dict(value)
                weight = float(value.pop("weight", 1.0))
                unknown = sorted(set(value) - set(spec.params))
                if unknown:
                    raise ValueError(
                        f"reward {name!r} has no parameter(s) {unknown}; "
                        f"its parameters: {sorted(spec.params) or '(none)'}"
                    )
                built.append(RewardTerm(name, weight, value))
            else:
                built.append(RewardTerm(name, float(value)))
        self.terms: tuple[RewardTerm, ...] = tuple(built)
        self.policy = parse if isinstance(parse, ParsePolicy) else ParsePolicy.from_config(parse)

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any] | None) -> CompositeReward:
        """Build from a config: ``{"terms": {...}, "parse": {...}}`` or a bare terms mapping.

        Accepts plain mappings and OmegaConf ``DictConfig`` (e.g. ``causaltrace/conf/reward/trace.yaml``).

        Args:
            cfg: The reward config; ``None`` or empty gives TRACE.

        Raises:
            ValueError: An unknown key, or a bad term (see the class).
        """
        cfg = _plain(cfg) if cfg is not None else {}
        if "terms" not in cfg and "parse" not in cfg:
            return cls(cfg or None)
        unknown = sorted(set(cfg) - {"terms", "parse", "name", "description"})
        if unknown:
            raise ValueError(f"unknown reward config key(s) {unknown}; known: terms, parse, name")
        return cls(cfg.get("terms"), parse=cfg.get("parse"))

    @property
    def weights(self) -> dict[str, float]:
        return {t.name: t.weight for t in self.terms}

    def config(self) -> dict[str, Any]:
        """The configuration that rebuilds this reward (JSON-serializable)."""
        terms = {
            t.name: ({"weight": t.weight, **t.params} if t.params else t.weight) for t in self.terms
        }
        policy = self.policy
        parse = {
            "submit_tools": list(policy.submit_tools),
            "max_answer_chars": policy.max_answer_chars,
            "max_output_chars": policy.max_output_chars,
            "max_answers": policy.max_answers,
            "allow_extra_keys": policy.allow_extra_keys,
            "submit_wrapper_keys": list(policy.submit_wrapper_keys),
        }
        # absent at their defaults: older configs rebuild (and serialize) as they were
        if policy.max_tool_calls is not None:
            parse["max_tool_calls"] = policy.max_tool_calls
        if policy.retry_malformed_submit:
            parse["retry_malformed_submit"] = True
        if policy.call_formats != ParsePolicy().call_formats:
            parse["call_formats"] = list(policy.call_formats)
        return {"terms": terms, "parse": parse}

    def __call__(self, answer: ParsedAnswer, label: OracleLabel) -> RewardResult:
        """Score a parsed answer: every term, and their weighted sum.

        Args:
            answer: The parsed answer.
            label: The episode's oracle label.
        """
        values = {
            t.name: float(get_reward(t.name).fn(answer, label, **t.params)) for t in self.terms
        }
        total = math.fsum(t.weight * values[t.name] for t in self.terms)
        return RewardResult(
            score=total,
            terms=values,
            weights=self.weights,
            parse_ok=answer.ok,
            parse_error=answer.error,
            tool_calls=answer.tool_calls,
            turns=answer.turns,
        )

    def parse(self, output: Any, space: AnswerSpace, **counts: Any) -> ParsedAnswer:
        """Parse an agent's output with this reward's policy (see :func:`parse_answer`).

        Args:
            output: The agent's output (messages, a decoded transcript, or an object).
            space: The domain's answer space.
            **counts: ``tool_calls`` and ``turns`` overriding the counts read off the output.
        """
        return parse_answer(output, space, policy=self.policy, **counts)

    def score_output(
        self,
        output: Any,
        label: OracleLabel,
        space: AnswerSpace,
        *,
        tool_calls: int | None = None,
        turns: int | None = None,
    ) -> RewardResult:
        """Parse an agent's output with this reward's policy, then score it.

        Args:
            output: The agent's output (messages, a decoded transcript, or an object).
            label: The episode's oracle label.
            space: The domain's answer space.
            tool_calls: Overrides the tool-call count read off the output; not by default.
            turns: Overrides the turn count read off the output; not by default.
        """
        return self(self.parse(output, space, tool_calls=tool_calls, turns=turns), label)

    def __repr__(self) -> str:
        return f"CompositeReward({self.config()['terms']})"


@register_reward("composite")
def composite(
    answer: ParsedAnswer, label: OracleLabel, *, terms: Mapping[str, Any] | None = None
) -> float:
    """Weighted sum of terms (default TRACE: 0.65 graded + 0.30 full + 0.05 format).

    Args:
        answer: The parsed answer.
        label: The episode's oracle label.
        terms: The terms, as :class:`CompositeReward` takes them; TRACE by default.

    Raises:
        ValueError: ``terms`` contains ``composite``.
    """
    if terms is not None and "composite" in terms:
        raise ValueError("a composite reward cannot contain itself")
    return CompositeReward(terms)(answer, label).score


def score_output(
    output: Any,
    label: OracleLabel,
    space: AnswerSpace,
    reward: CompositeReward | Mapping[str, Any] | None = None,
    **counts: Any,
) -> RewardResult:
    """Parse ``output`` and score it against ``label`` (default reward: TRACE).

    Args:
        output: The agent's output (messages, a decoded transcript, or an object).
        label: The episode's oracle label.
        space: The domain's answer space.
        reward: The reward, or its config; TRACE by default.
        **counts: ``tool_calls`` and ``turns`` overriding the counts read off the output.

    Returns:
        The score and every term's value.
    """
    if not isinstance(reward, CompositeReward):
        reward = CompositeReward.from_config(reward)
    return reward.score_output(output, label, space, **counts)


def _plain(cfg: Any) -> dict[str, Any]:
    """A plain dict from a mapping or an OmegaConf config (without importing OmegaConf)."""
    if hasattr(cfg, "_metadata") and type(cfg).__module__.startswith("omegaconf"):
        cfg = OmegaConf.to_container(cfg, resolve=True)
    if not isinstance(cfg, Mapping):
        raise TypeError(f"a reward config must be a mapping, got {type(cfg).__name__}")
    return {str(k): (_plain(v) if isinstance(v, Mapping) else v) for k, v in cfg.items()}
