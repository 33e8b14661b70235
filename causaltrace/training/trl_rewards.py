"""TRL adapter: reward functions with TRL's ``reward(prompts, completions, **columns)`` signature.

TRL's GRPO trainer passes every dataset column other than ``prompt`` as a keyword argument, one
value per completion. Export the dataset with :mod:`causaltrace.training.hf` (its
``ground_truth`` column holds the label and answer space) and use::

    from causaltrace.training.trl_rewards import make_reward_function
    trainer = GRPOTrainer(..., reward_funcs=[make_reward_function()], train_dataset=ds)

or, to log every term as its own reward, ``funcs, weights = term_reward_functions()`` with
``GRPOConfig(reward_weights=weights)``. Nothing here imports TRL or torch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from causaltrace.scoring.rewards import CompositeReward
from causaltrace.training.records import load_ground_truth, reward_from

TRLReward = Callable[..., list[float]]


def _scores(
    completions: Sequence[Any],
    columns: Mapping[str, Any],
    column: str,
    reward: CompositeReward | Mapping[str, Any] | None,
) -> list[Any]:
    if column not in columns:
        raise KeyError(
            f"TRL passed no {column!r} column; export the dataset with "
            "causaltrace.training.hf (it writes the 'ground_truth' column)"
        )
    truths = columns[column]
    if len(truths) != len(completions):
        raise ValueError(f"{len(completions)} completions but {len(truths)} {column!r} values")
    results = []
    for completion, truth in zip(completions, truths):
        gt = load_ground_truth(truth)
        results.append(gt.scoring_reward(reward).score_output(completion, gt.label, gt.space))
    return results


def make_reward_function(
    reward: CompositeReward | Mapping[str, Any] | None = None,
    *,
    column: str = "ground_truth",
    name: str = "causaltrace_reward",
) -> TRLReward:
    """A TRL reward function returning the composite score of each completion.

    Completions may be strings or conversational (lists of messages, tool turns included).

    Args:
        reward: The reward to score with; by default each row's own (stored in its ground
            truth), else TRACE.
        column: The dataset column holding the ground truth; ``"ground_truth"`` by default.
        name: The function's ``__name__`` (what TRL logs it as); ``"causaltrace_reward"`` by
            default.
    """

    def reward_fn(
        prompts: Sequence[Any], completions: Sequence[Any], **columns: Any
    ) -> list[float]:
        return [r.score for r in _scores(completions, columns, column, reward)]

    reward_fn.__name__ = name
    reward_fn.__qualname__ = name
    return reward_fn


def term_reward_functions(
    reward: CompositeReward | Mapping[str, Any] | None = None, *, column: str = "ground_truth"
) -> tuple[list[TRLReward], list[float]]:
    """One TRL reward function per term of ``reward`` (default TRACE), and their weights.

    Pass the functions as ``reward_funcs`` and the weights as ``GRPOConfig.reward_weights``:
    TRL then logs each term and sums them into the same composite.

    Args:
        reward: The composite whose terms are split out; TRACE by default.
        column: The dataset column holding the ground truth; ``"ground_truth"`` by default.
    """
    composite = reward_from(reward)
    funcs: list[TRLReward] = []
    for term in composite.terms:

        def term_fn(
            prompts: Sequence[Any], completions: Sequence[Any], _t: str = term.name, **columns: Any
        ) -> list[float]:
            return [r.terms[_t] for r in _scores(completions, columns, column, composite)]

        term_fn.__name__ = term.name
        term_fn.__qualname__ = term.name
        funcs.append(term_fn)
    return funcs, [t.weight for t in composite.terms]
