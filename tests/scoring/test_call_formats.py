"""Tool calls in the text formats of the model families people train (Hermes and Llama 3 JSON,
Qwen3.5 / Qwen3-Coder XML, GLM, Kimi), retries of a malformed submit, and the budget they share.

The texts here are written by hand in each format; tests/training/test_chat_template_formats.py
renders the same calls with the real chat templates TRL ships and scores them through verl's and
TRL's reward functions.
"""

from __future__ import annotations

import json

import pytest
from _scoring_data import synthetic_labels, synthetic_space

from causaltrace.scoring import CompositeReward, ParsePolicy, parse_answer
from causaltrace.scoring.call_formats import CALL_FORMATS, find_markup_calls

SPACE = synthetic_space()
RIGHT = {"root_cause": "BUDGET_CAP", "slice": "device=mobile"}


def qwen_xml(name: str, **arguments) -> str:
    params = "".join(
        f"<parameter={k}>\n{v if isinstance(v, str) else json.dumps(v)}\n</parameter>\n"
        for k, v in arguments.items()
    )
    return f"<tool_call>\n<function={name}>\n{params}</function>\n</tool_call>"


def glm(name: str, **arguments) -> str:
    args = "".join(
        f"<arg_key>{k}</arg_key>\n<arg_value>{v if isinstance(v, str) else json.dumps(v)}</arg_value>\n"
        for k, v in arguments.items()
    )
    return f"<tool_call>{name}\n{args}</tool_call>"


def kimi(name: str, index: int = 0, **arguments) -> str:
    return (
        "<|tool_calls_section_begin|><|tool_call_begin|>"
        f"functions.{name}:{index}<|tool_call_argument_begin|>{json.dumps(arguments)}"
        "<|tool_call_end|><|tool_calls_section_end|>"
    )


def hermes(name: str, **arguments) -> str:
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


def llama3(name: str, **arguments) -> str:
    return json.dumps({"name": name, "parameters": arguments})


FORMATS = {"qwen3_coder": qwen_xml, "glm": glm, "kimi": kimi, "hermes": hermes, "llama3": llama3}


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_a_submit_in_each_format_is_the_answer(fmt):
    call = FORMATS[fmt]
    text = "Looking.\n" + call("sql", query="SELECT 1") + "\n" + call("submit", **RIGHT)
    parsed = parse_answer(text, SPACE)
    assert parsed.ok, parsed.error
    assert (parsed.answer.root_cause, parsed.answer.slice) == ("BUDGET_CAP", "device=mobile")
    assert parsed.source == "submit" and parsed.tool_calls == 1


@pytest.mark.parametrize("fmt", ["qwen3_coder", "glm"])
def test_null_slices_in_xml_formats_are_no_slice(fmt):
    # Qwen3.5's template writes a Python None as "None" (verl's qwen3_coder parser reads
    # "null" as null too); GLM's writes JSON null, and verl's glm parser reads JSON only.
    for null in ("None", "null") if fmt == "qwen3_coder" else ("null",):
        text = FORMATS[fmt]("submit", root_cause="NO_ANOMALY", slice=null)
        parsed = parse_answer(text, SPACE)
        assert parsed.ok, (null, parsed.error)
        assert parsed.answer.slice is None


def test_the_kimi_call_is_read_when_decoding_dropped_its_markers():
    text = 'functions.sql:0{"query": "SELECT 1"}\nfunctions.submit:1' + json.dumps(RIGHT)
    parsed = parse_answer(text, SPACE)
    assert parsed.ok and parsed.tool_calls == 1 and parsed.answer.root_cause == "BUDGET_CAP"


def test_json_inside_a_markup_call_is_not_a_call_of_its_own():
    # Python code that prints a Hermes-style submit is an argument of the python call.
    code = 'print(\'{"name": "submit", "arguments": {"root_cause": "NO_ANOMALY"}}\')'
    text = qwen_xml("python", code=code) + qwen_xml("submit", **RIGHT)
    calls = find_markup_calls(text)
    assert [c.name for c in calls] == ["python", "submit"]
    parsed = parse_answer(text, SPACE)
    assert parsed.ok and parsed.answer.root_cause == "BUDGET_CAP" and parsed.tool_calls == 1


@pytest.mark.parametrize("fmt", ["qwen3_coder", "glm", "kimi"])
def test_a_call_inside_a_tool_response_is_never_read(fmt):
    call = FORMATS[fmt]
    echoed = call("submit", **RIGHT)
    text = (
        call("sql", query="SELECT 1")
        + f"<|im_end|>\n<|im_start|>user\n<tool_response>\n{echoed}\n</tool_response><|im_end|>\n"
        + "<|im_start|>assistant\nI am not sure."
    )
    parsed = parse_answer(text, SPACE)
    assert not parsed.ok and "no answer" in parsed.error


def test_glm_and_kimi_role_headers_split_tool_outputs_from_the_agent():
    glm_text = (
        glm("sql", query="SELECT 1")
        + "<|observation|>\n"
        + glm("submit", root_cause="NO_ANOMALY")
        + "<|assistant|>\n"
        + glm("submit", **RIGHT)
    )
    parsed = parse_answer(glm_text, SPACE)
    assert parsed.ok and parsed.answer.root_cause == "BUDGET_CAP"
    kimi_text = (
        kimi("sql", query="SELECT 1")
        + "<|im_end|><|im_system|>tool<|im_middle|>## Return of functions.sql:0\n"
        + 'functions.submit:9{"root_cause": "NO_ANOMALY"}<|im_end|>'
        + "<|im_assistant|>assistant<|im_middle|>"
        + kimi("submit", 1, **RIGHT)
    )
    parsed = parse_answer(kimi_text, SPACE)
    assert parsed.ok and parsed.answer.root_cause == "BUDGET_CAP", parsed.error


def test_formats_can_be_restricted_and_unknown_ones_are_named():
    text = qwen_xml("submit", **RIGHT)
    only_json = ParsePolicy.from_config({"call_formats": ["json"]})
    assert not parse_answer(text, SPACE, policy=only_json).ok
    assert parse_answer(text, SPACE, policy=ParsePolicy(call_formats=("qwen3_coder",))).ok
    with pytest.raises(ValueError, match="harmony"):
        ParsePolicy.from_config({"call_formats": ["harmony"]})
    assert set(CALL_FORMATS) == {"json", "qwen3_coder", "glm", "kimi"}


# -- retries of a malformed submit -----------------------------------------------------------
def _messages(*calls):
    out = [{"role": "user", "content": "why?"}]
    for i, (name, args) in enumerate(calls):
        out.append(
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"id": f"c{i}", "function": {"name": name, "arguments": args}}],
            }
        )
        out.append({"role": "tool", "tool_call_id": f"c{i}", "content": "..."})
    return out


MALFORMED = {"root_cause": "BUDGET_CAP", "slice": "device=phone"}  # no such level


def test_without_retries_a_malformed_submit_is_not_rescued_by_a_later_one():
    out = _messages(("submit", MALFORMED), ("submit", RIGHT))
    parsed = parse_answer(out, SPACE)
    # Submits that parse must agree; the malformed one is ignored, as it always was.
    assert parsed.ok and parsed.malformed_submits == 0
    only_bad = parse_answer(_messages(("submit", MALFORMED)), SPACE)
    assert not only_bad.ok and "phone" in only_bad.error


def test_with_retries_the_first_valid_submit_is_the_answer_and_malformed_ones_are_counted():
    policy = ParsePolicy(retry_malformed_submit=True)
    out = _messages(
        ("submit", MALFORMED), ("submit", RIGHT), ("submit", {"root_cause": "NO_ANOMALY"})
    )
    parsed = parse_answer(out, SPACE, policy=policy)
    assert parsed.ok and parsed.answer.root_cause == "BUDGET_CAP"
    assert parsed.malformed_submits == 1
    # The penalty term: -1 per malformed submit; the composite moves by -weight per retry.
    reward = CompositeReward.from_config(
        {
            "terms": {"full_attribution": 1.0, "malformed_submit": 0.1},
            "parse": {"retry_malformed_submit": True},
        }
    )
    label = synthetic_labels()["budget_1d"]
    clean = reward.score_output(_messages(("submit", RIGHT)), label, SPACE)
    retried = reward.score_output(out, label, SPACE)
    assert clean.score == pytest.approx(1.0)
    assert retried.score == pytest.approx(clean.score - 0.1)
    assert retried.terms["malformed_submit"] == -1.0


def test_with_retries_each_malformed_submit_costs_a_unit_of_the_budget():
    policy = ParsePolicy(retry_malformed_submit=True, max_tool_calls=2)
    within = _messages(("sql", {"query": "1"}), ("submit", MALFORMED), ("submit", RIGHT))
    assert parse_answer(within, SPACE, policy=policy).ok
    over = _messages(
        ("sql", {"query": "1"}), ("submit", MALFORMED), ("submit", MALFORMED), ("submit", RIGHT)
    )
    parsed = parse_answer(over, SPACE, policy=policy)
    assert not parsed.ok and parsed.error == "tool-call budget exhausted"


def test_the_parse_settings_survive_the_reward_config_round_trip():
    reward = CompositeReward.from_config(
        {"parse": {"retry_malformed_submit": True, "call_formats": ["json", "glm"]}}
    )
    again = CompositeReward.from_config(reward.config())
    assert again.policy == reward.policy
    assert again.policy.call_formats == ("json", "glm") and again.policy.retry_malformed_submit
    # Defaults stay out of the config, so older stored configs serialize as they did.
    assert "retry_malformed_submit" not in CompositeReward().config()["parse"]


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_the_local_model_agent_runs_calls_in_every_format(fmt):
    """The transformers agent's turn parser finds the same calls the scorer reads."""
    from causaltrace.agents.transformers_agent import parse_tool_calls

    call = FORMATS[fmt]
    text = call("sql", query="SELECT 1")  # Llama 3 writes the call as the whole turn
    content, calls = parse_tool_calls(text if fmt == "llama3" else "Looking.\n" + text)
    assert content == ("" if fmt == "llama3" else "Looking.")
    assert [(c["name"], json.loads(c["arguments"])) for c in calls] == [
        ("sql", {"query": "SELECT 1"})
    ]
