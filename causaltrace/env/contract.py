"""The tool contract: what the agent's tools are called, what they take and what they say,
defined once and rendered for every consumer.

A model fine-tuned on exported trajectories must meet the same tools in RL, and an evaluation
must show it the same tools again; three hand-written descriptions drifted apart (different
descriptions, a cause enum in one and not the others, a required ``slice`` in one). Every
rendering here comes from one :class:`ToolContract`:

- :meth:`ToolContract.openai`: OpenAI function-calling schemas (the harness, the OpenAI agent,
  the SFT export's ``tools`` column, verl's ``tool_schema`` entries);
- :meth:`ToolContract.python_tools`: Python functions with signatures and Google-style
  docstrings (``(choices: [...])`` for enums) that ``transformers.utils.get_json_schema`` -
  how TRL describes an ``environment_factory``'s methods - turns back into the same schemas;
- :meth:`ToolContract.verl_tool_config`: verl's tool-config YAML content.

``slice`` is optional: causes that act on the whole account take none, and a model that leaves
it out must not lose its answer to a missing-argument error.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from causaltrace.datasets.reading import DatasetSource
from causaltrace.tools.schemas import PYTHON_SPEC, SQL_SPEC, Param, ToolSpec

SUBMIT = "submit"


def submit_spec(space, concurrent: bool = False) -> ToolSpec:
    """The submit tool of a domain's answer space (``concurrent``: episodes may have several
    causes, given as ``causes``, a JSON list of ``{"root_cause", "slice"}`` objects).

    Args:
        space (AnswerSpace): The domain's :class:`~causaltrace.episodes.answers.AnswerSpace` (its causes
            and slice dimensions).
        concurrent: Episodes may have several causes (submit also takes ``causes``); off by
            default.
    """
    dims = ", ".join(name for name, _ in space.dimensions)
    slice_text = (
        f"The affected slice as dim=level or dim=level&dim=level over {dims}; leave it out (or null) "
        "for causes that act on the whole account."
    )
    description = "Submit the final diagnosis and end the episode (call it once)."
    params = [
        Param("root_cause", "The root cause.", enum=tuple(space.causes), required=not concurrent),
        Param("slice", slice_text, required=False),
    ]
    if concurrent:
        params[0] = Param(
            "root_cause",
            "The root cause (when there is one).",
            enum=tuple(space.causes),
            required=False,
        )
        params.append(
            Param(
                "causes",
                "Several root causes at work at the same time, as a JSON list of "
                '{"root_cause": ..., "slice": ...} objects (give either root_cause and slice, '
                "or causes). Every cause listed that is not at work costs reward.",
                required=False,
            )
        )
        description += " Give one cause, or several with causes."
    return ToolSpec(SUBMIT, description, tuple(params))


@dataclass(frozen=True)
class ToolContract:
    """The tools of one dataset (sql, python, and its domain's submit), in the model's order.

    Args:
        tools: The tools' specs, in order.
    """

    tools: tuple[ToolSpec, ...]

    @classmethod
    def for_space(cls, space, concurrent: bool = False) -> ToolContract:
        """sql, python and the submit tool of an answer space.

        Args:
        space (AnswerSpace): The domain's :class:`~causaltrace.episodes.answers.AnswerSpace` (its causes
            and slice dimensions).
        concurrent: Episodes may have several causes (submit also takes ``causes``); off by
            default.
        """
        return cls((SQL_SPEC, PYTHON_SPEC, submit_spec(space, concurrent)))

    @classmethod
    def for_dataset(cls, source) -> ToolContract:
        """From a :class:`~causaltrace.env.DatasetSource` or a dataset directory.

        Args:
            source (DatasetSource | str): The dataset, or its directory.
        """
        if not hasattr(source, "answer_space"):
            source = DatasetSource(source)
        return cls.for_space(source.answer_space, source.concurrent)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.tools)

    def spec(self, name: str) -> ToolSpec:
        """The spec of the tool called ``name``.

        Args:
            name: The tool's name.

        Raises:
            KeyError: No tool has that name.
        """
        for tool in self.tools:
            if tool.name == name:
                return tool
        raise KeyError(f"no tool {name!r} in the contract; tools: {list(self.names)}")

    def openai(self) -> list[dict[str, Any]]:
        """OpenAI function-calling schemas, in order (fresh dicts)."""
        return [t.openai() for t in self.tools]

    def python_tools(
        self, call: Callable[[Any, str, dict[str, Any]], str]
    ) -> dict[str, Callable[..., str]]:
        """One method per tool, ``method(self, **arguments) -> call(self, name, arguments)``.

        Each has a real signature (required parameters first, optional ones defaulting to
        ``""``), ``str`` annotations and a Google-style docstring, so that ``get_json_schema``
        reproduces :meth:`openai`. The methods accept any keyword, so a wrong argument name
        reaches the environment (which answers with an error naming it) instead of failing
        inside the trainer.

        Args:
            call: Called as ``call(self, name, arguments)`` by every method.
        """
        return {t.name: _python_method(t, call) for t in self.tools}

    def verl_tool_config(
        self,
        dataset: str,
        *,
        max_tool_calls: int = 30,
        idle_seconds: float = 600,
        tool_config: Mapping[str, Any] | None = None,
        retry_malformed_submit: bool = False,
    ) -> dict[str, Any]:
        """verl's tool-config content (``actor_rollout_ref.rollout.multi_turn.tool_config_path``).

        Every tool shares one ``config`` (the dataset, the per-sample call budget, idle
        eviction and the sandbox's :class:`~causaltrace.tools.ToolConfig` fields).

        Args:
            dataset: The dataset directory the tools open episodes from.
            max_tool_calls: Tool calls per sample; 30 by default.
            idle_seconds: Evict a sample's tools after this long unused; 600 by default.
            tool_config: :class:`~causaltrace.tools.ToolConfig` fields for the sandbox; the
                defaults by default.
            retry_malformed_submit: A malformed submit answers with its format error and the
                sample may submit again (``parse.retry_malformed_submit``); off by default.
        """
        config: dict[str, Any] = {
            "type": "native",
            "dataset": str(dataset),
            "max_tool_calls": int(max_tool_calls),
            "idle_seconds": float(idle_seconds),
        }
        if retry_malformed_submit:
            config["retry_malformed_submit"] = True
        if tool_config:
            config["tools"] = dict(tool_config)
        classes = {"sql": "VerlSqlTool", "python": "VerlPythonTool", SUBMIT: "VerlSubmitTool"}
        return {
            "tools": [
                {
                    "class_name": f"causaltrace.training.verl_tools.{classes[t.name]}",
                    "config": dict(config),
                    "tool_schema": t.openai(),
                }
                for t in self.tools
            ]
        }


def _python_method(spec: ToolSpec, call: Callable[[Any, str, dict[str, Any]], str]):
    name = spec.name

    def method(self, **arguments: Any) -> str:
        return call(self, name, arguments)

    ordered = sorted(spec.params, key=lambda p: not p.required)  # Python: required ones first
    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    for p in ordered:
        default = inspect.Parameter.empty if p.required else ""
        params.append(
            inspect.Parameter(
                p.name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default, annotation=str
            )
        )
    # No return annotation: get_json_schema would add a "return" entry the schemas lack.
    method.__signature__ = inspect.Signature(params)
    method.__annotations__ = {p.name: str for p in spec.params}
    method.__name__ = method.__qualname__ = name
    lines = [spec.description, "", "Args:"]
    for p in ordered:
        text = p.description
        if p.enum is not None:
            text += f" (choices: {json.dumps(list(p.enum))})"
        lines.append(f"    {p.name}: {text}")
    method.__doc__ = "\n".join(lines)
    return method


def submit_tool(space, concurrent: bool = False) -> dict[str, Any]:
    """The submit tool's OpenAI schema for a domain (see :mod:`causaltrace.env.contract`).

    Args:
        space (AnswerSpace): The domain's :class:`~causaltrace.episodes.answers.AnswerSpace` (its causes
            and slice dimensions).
        concurrent: Episodes may have several causes (submit also takes ``causes``); off by
            default.
    """
    return submit_spec(space, concurrent).openai()


def tool_schemas_for(space, concurrent: bool = False) -> list[dict[str, Any]]:
    """sql, python and the domain's submit, in OpenAI function-calling format (``concurrent``:
    a dataset with concurrent episodes, whose submit also takes ``causes``).

    Args:
        space (AnswerSpace): The domain's :class:`~causaltrace.episodes.answers.AnswerSpace` (its causes
            and slice dimensions).
        concurrent: Episodes may have several causes (submit also takes ``causes``); off by
            default.
    """
    return ToolContract.for_space(space, concurrent).openai()
