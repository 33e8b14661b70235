import json
import random
import time

import pytest
from _scoring_data import example_space, synthetic_space

from causaltrace.scoring import ParsePolicy, parse_answer, split_segments

RIGHT = {"root_cause": "CHECKOUT_BUG", "slice": "channel=search&region=north"}
WRONG = {"root_cause": "TRACKING_LOSS", "slice": "region=west"}


def parse(output, **kw):
    return parse_answer(output, example_space(), **kw)


def submit_call(args, as_string=True):
    return {
        "id": "c1",
        "type": "function",
        "function": {"name": "submit", "arguments": json.dumps(args) if as_string else args},
    }


# -- sources --------------------------------------------------------------------------------
@pytest.mark.parametrize("as_string", [True, False])
def test_submit_call_in_messages(as_string):
    msgs = [
        {"role": "system", "content": f"Answer like {json.dumps(WRONG)}"},
        {"role": "user", "content": "Orders fell."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"function": {"name": "query", "arguments": "{}"}}],
        },
        {"role": "tool", "content": json.dumps(WRONG)},
        {"role": "assistant", "content": "", "tool_calls": [submit_call(RIGHT, as_string)]},
        {"role": "tool", "content": "submitted"},
    ]
    r = parse(msgs)
    assert r.ok and r.source == "submit"
    assert r.answer.slice == "channel=search&region=north"
    assert (r.tool_calls, r.turns) == (1, 2)


def test_free_text_final_message_with_fences_and_prose():
    text = f"After checking:\n```json\n{json.dumps(RIGHT, indent=2)}\n```\nThat is my answer."
    r = parse(text)
    assert r.ok and r.source == "message" and r.answer.root_cause == "CHECKOUT_BUG"


def test_think_blocks_are_not_the_answer():
    r = parse(f"<think>maybe {json.dumps(WRONG)}</think>Final: {json.dumps(RIGHT)}")
    assert r.ok and r.answer.root_cause == "CHECKOUT_BUG"
    assert not parse(f"<think>{json.dumps(RIGHT)}</think>Not sure.").ok


def test_verl_response_decoded_without_special_tokens():
    # Qwen's template after skip_special_tokens: role words stay, <|im_start|> goes.
    text = (
        "Let me query.\n<tool_call>\n"
        + json.dumps({"name": "query", "arguments": {"sql": "select 1"}})
        + "\n</tool_call>user\n<tool_response>\n"
        + json.dumps(WRONG)
        + "\n</tool_response>\nassistant\nThe checkout broke: "
        + json.dumps(RIGHT)
    )
    r = parse(text)
    assert r.ok and r.answer.root_cause == "CHECKOUT_BUG"
    assert (r.tool_calls, r.turns) == (1, 2)


def test_verl_response_ending_on_a_tool_output_has_no_answer():
    text = (
        "I think " + json.dumps(RIGHT) + " but let me check.\n<tool_call>\n"
        '{"name": "query", "arguments": {}}\n</tool_call>user\n<tool_response>\n'
        + json.dumps(RIGHT)
        + "\n</tool_response>"
    )
    r = parse(text)
    assert not r.ok and "ends on a tool output" in r.error


def test_chatml_with_markers_and_hermes_submit():
    args = json.dumps(RIGHT)
    text = (
        "<|im_start|>assistant\n<tool_call>\n"
        + json.dumps({"name": "submit", "arguments": args})
        + "\n</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\nok\n</tool_response>"
        "<|im_end|>\n<|im_start|>assistant\nDone.<|im_end|>"
    )
    r = parse(text)
    assert r.ok and r.source == "submit" and r.tool_calls == 0 and r.turns == 2


def test_llama3_tool_turn_is_not_searched():
    text = (
        "<|start_header_id|>assistant<|end_header_id|>\n\n"
        '{"name": "query", "parameters": {"q": 1}}<|eot_id|>'
        "<|start_header_id|>ipython<|end_header_id|>\n\n" + json.dumps(WRONG) + "<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n" + json.dumps(RIGHT) + "<|eot_id|>"
    )
    r = parse(text)
    assert r.ok and r.answer.root_cause == "CHECKOUT_BUG" and r.tool_calls == 1


def test_mistral_tool_calls_and_results():
    text = (
        "[TOOL_CALLS]"
        + json.dumps([{"name": "query", "arguments": {}}])
        + "[TOOL_RESULTS]"
        + json.dumps(WRONG)
        + "[/TOOL_RESULTS]"
        + "[TOOL_CALLS]"
        + json.dumps([{"name": "submit", "arguments": RIGHT}])
    )
    r = parse(text)
    assert r.ok and r.source == "submit" and r.answer.root_cause == "CHECKOUT_BUG"


def test_segments_split_roles():
    segs = split_segments(
        "a<|im_start|>user\nb<|im_end|><|im_start|>assistant\nc<tool_response>d</tool_response>e"
    )
    assert [r for r, _ in segs] == ["agent", "other", "agent", "tool", "agent"]


def test_object_and_call_mappings():
    assert parse(RIGHT).source == "object"
    assert parse({"name": "submit", "arguments": json.dumps(RIGHT)}).source == "submit"
    assert parse({"role": "assistant", "content": json.dumps(RIGHT)}).ok
    assert parse(json.dumps(RIGHT).encode()).ok


# -- policy: one final answer -----------------------------------------------------------------
def test_only_the_final_message_counts():
    msgs = [
        {"role": "assistant", "content": json.dumps(RIGHT)},
        {"role": "user", "content": "continue"},
        {"role": "assistant", "content": json.dumps(WRONG)},
    ]
    r = parse(msgs)
    assert r.ok and r.answer.root_cause == "TRACKING_LOSS"
    msgs[-1] = {"role": "assistant", "content": "Done."}
    assert not parse(msgs).ok


def test_identical_repeats_pass_and_conflicts_fail():
    assert parse(json.dumps(RIGHT) + " again: " + json.dumps(RIGHT)).ok
    r = parse(json.dumps(RIGHT) + " or " + json.dumps(WRONG))
    assert not r.ok and "2 different answers" in r.error
    # Equal after normalization: slice order and whitespace do not matter.
    same = {"root_cause": "CHECKOUT_BUG", "slice": "region=north & channel=search"}
    assert parse(json.dumps(RIGHT) + json.dumps(same)).ok


def test_conflicting_submit_calls_fail_but_a_fixed_retry_passes():
    bad = {"root_cause": "CHECKOUT", "slice": None}
    msgs = [
        {"role": "assistant", "content": "", "tool_calls": [submit_call(bad)]},
        {"role": "tool", "content": "error: unknown cause"},
        {"role": "assistant", "content": "", "tool_calls": [submit_call(RIGHT)]},
    ]
    assert parse(msgs).ok
    msgs.append({"role": "assistant", "content": "", "tool_calls": [submit_call(WRONG)]})
    r = parse(msgs)
    assert not r.ok and "different submit calls" in r.error


def test_submit_call_wins_over_text():
    msgs = [
        {"role": "assistant", "content": "", "tool_calls": [submit_call(RIGHT)]},
        {"role": "assistant", "content": json.dumps(WRONG)},
    ]
    assert parse(msgs).answer.root_cause == "CHECKOUT_BUG"


# -- strict content ------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (
            '{"root_cause": "CHECKOUT_BUG", "slice": "channel=search", "slice": "channel=email"}',
            "duplicate key 'slice'",
        ),
        ('{"root_cause": "OUTAGE"}', "unknown root cause 'OUTAGE'"),
        ('{"root_cause": "CHECKOUT_BUG", "slice": "device=mobile"}', "unknown dimension 'device'"),
        ('{"root_cause": "CHECKOUT_BUG", "slice": "channel=tv"}', "unknown level 'tv'"),
        ('{"root_cause": "CHECKOUT_BUG", "slice": }', "no valid JSON answer"),
        ("{'root_cause': 'CHECKOUT_BUG'}", "no valid JSON answer"),
        ('{"root_cause": "CHECKOUT_BUG", "impact": NaN}', "no valid JSON answer"),
        ("The cause is CHECKOUT_BUG.", "no answer"),
        ("", "no agent text"),
    ],
)
def test_format_errors_have_reasons(text, reason):
    r = parse(text)
    assert not r.ok and reason in r.error


def test_size_limits():
    policy = ParsePolicy(max_answer_chars=200, max_output_chars=5000)
    padded = {**RIGHT, "ranking": ["CHECKOUT_BUG", "TRACKING_LOSS", "TRAFFIC_DROP"]}
    assert parse(padded, policy=ParsePolicy(max_answer_chars=500)).ok
    assert "at most 60" in parse(json.dumps(padded), policy=ParsePolicy(max_answer_chars=60)).error
    assert "characters" in parse("x" * 6000 + json.dumps(RIGHT), policy=policy).error
    r = parse("\n".join([json.dumps(RIGHT)] * 20))
    assert not r.ok and "at most 16" in r.error


def test_extra_keys_policy():
    text = json.dumps({**RIGHT, "reasoning": "the funnel"})
    assert not parse(text).ok
    assert parse(text, policy=ParsePolicy(allow_extra_keys=True)).ok


def test_policy_from_config_rejects_unknown_options():
    assert ParsePolicy.from_config({"submit_tools": ["answer"]}).submit_tools == ("answer",)
    with pytest.raises(ValueError, match="unknown parse option"):
        ParsePolicy.from_config({"max_chars": 3})


def test_counts_can_be_overridden_by_the_environment():
    r = parse(RIGHT, tool_calls=7, turns=9)
    assert (r.tool_calls, r.turns) == (7, 9)


# -- never raises ---------------------------------------------------------------------------
def test_fuzz_never_raises():
    rng = random.Random(1234)
    base = [
        json.dumps(RIGHT),
        json.dumps({"name": "submit", "arguments": json.dumps(RIGHT)}),
        "<tool_call>" + json.dumps({"name": "submit", "arguments": RIGHT}) + "</tool_call>",
        "<|im_start|>assistant\n" + json.dumps(RIGHT) + "<tool_response>x</tool_response>",
    ]
    alphabet = '{}[]":,\\ \n<>|/_abcroot_causeslice=&nametool_responseNaN0123'
    for _ in range(3000):
        text = rng.choice(base)
        for _ in range(rng.randint(1, 6)):
            i = rng.randrange(len(text) + 1)
            op = rng.random()
            if op < 0.4:
                text = (
                    text[:i]
                    + "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 5)))
                    + text[i:]
                )
            elif op < 0.8:
                text = text[:i] + text[i + rng.randint(1, 5) :]
            else:
                text = text[:i]
        r = parse(text)
        assert r.ok or r.error
    odd = [
        None,
        3,
        2.5,
        [],
        [1, 2],
        [{"x": 1}],
        {"role": "assistant", "content": 5},
        {"role": "assistant", "tool_calls": "nope"},
        {"name": "submit", "arguments": 5},
        {"name": "submit", "arguments": "[1]"},
        {"root_cause": {"a": 1}},
        object(),
        b"\xff\xfe",
    ]
    for value in odd:
        r = parse(value)
        assert not r.ok and r.error


@pytest.mark.parametrize(
    "text",
    [
        '{"root_cause":' * 50_000,
        "{" * 300_000,
        '{"name":{"name":' * 30_000,
        "[" * 100_000 + json.dumps(RIGHT) + "]" * 100_000,
        ('{"a":' * 20 + '"root_cause"') * 3000,
    ],
    ids=["open-root-cause", "open-braces", "nested-names", "deep-list", "keys-in-nesting"],
)
def test_adversarial_outputs_are_fast(text):
    start = time.perf_counter()
    r = parse(text)
    # Bounded work: at most 1024 key occurrences, each decoded once within a 16 KiB window.
    assert time.perf_counter() - start < 3.0
    assert r.ok or r.error


def test_synthetic_space_nested_cells():
    space = synthetic_space()
    r = parse_answer(
        {"root_cause": "BROWSER_TRACKING", "slice": "browser=samsung&device=desktop"}, space
    )
    assert not r.ok and "matches no cell" in r.error


@pytest.mark.parametrize(
    "args",
    [
        json.dumps({"diagnosis": json.dumps(RIGHT)}),
        {"diagnosis": "Checkout broke for search in the north: " + json.dumps(RIGHT)},
        {"diagnosis": RIGHT},
        {"answer": json.dumps(RIGHT)},
    ],
    ids=["json-string", "prose", "object", "answer-key"],
)
def test_submit_with_a_wrapped_diagnosis(args):
    # causaltrace.tools declares submit(diagnosis: str); the prompt may also ask for
    # submit(root_cause, slice): both are read.
    msgs = [
        {"role": "assistant", "content": "", "tool_calls": [submit_call(args, as_string=False)]}
    ]
    r = parse(msgs)
    assert r.ok and r.source == "submit" and r.answer.slice == "channel=search&region=north"


def test_wrapped_diagnosis_errors():
    def one(args):
        return parse([{"role": "assistant", "tool_calls": [submit_call(args, as_string=False)]}])

    assert "no JSON answer" in one({"diagnosis": "no idea"}).error
    assert "different" in one({"diagnosis": json.dumps(RIGHT) + json.dumps(WRONG)}).error
    assert "unknown answer key" in one({"diagnosis": json.dumps(RIGHT), "note": "x"}).error
    assert "at most 2048" in one(json.dumps({**RIGHT, "impact": 1, "onset": "x" * 3000})).error


def test_onset_is_kept_but_checked():
    r = parse({**RIGHT, "onset": " 2026-02-10 "})
    assert r.ok and r.answer.onset == "2026-02-10"
    assert parse({**RIGHT, "onset": 41}).answer.onset == 41
    assert "onset must be" in parse({**RIGHT, "onset": [1, 2]}).error
