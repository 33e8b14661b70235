"""Issue 42, item 2: every byte from a worker, and every call's arguments, are untrusted.

Agent code runs in the python worker and can replace the functions that encode its replies
(``worker_protocol._dumps``): a reply with ``Infinity`` in a counter made the host raise
``OverflowError`` on that call and every later one, a deeply nested reply or deeply nested
call arguments raised ``RecursionError``. Each now reads as a named tool error, the worker is
restarted where its channel can no longer be trusted, and the episode's next call runs.
"""

from __future__ import annotations

import json

import pytest
from _tools_support import make_episode, tools_config

from causaltrace.core import untrusted
from causaltrace.tools import SyncToolRuntime

PATCH = "import sys, json\nwp = sys.modules['worker_protocol']\n"


def test_loads_turns_every_bad_input_into_a_named_value_error():
    assert untrusted.loads('{"a": [1, 2.5, "x"]}') == {"a": [1, 2.5, "x"]}
    for data, why in (
        ('{"n": Infinity}', "Infinity is not a JSON number"),
        ('{"n": NaN}', "NaN is not a JSON number"),
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
        ("[" * 100 + "]" * 100, f"nested more than {untrusted.MAX_DEPTH} levels deep"),
        ("{not json", "not valid JSON"),
    ):
        with pytest.raises(ValueError, match=why):
            untrusted.loads(data, "the reply")


def test_fields_of_a_reply_are_read_with_their_types_checked():
    reply = {"n": 12, "big": 2**60, "neg": -1, "flag": True, "f": 1e308, "s": "12", "t": "ok"}
    assert [untrusted.count(reply, k) for k in ("n", "big", "neg", "flag", "f", "s", "x")] == [
        12,
        0,
        0,
        0,
        0,
        0,
        0,
    ]
    assert untrusted.text(reply, "t") == "ok"
    assert untrusted.text(reply, "n") == "" and untrusted.text({"e": [[1]]}, "e") == ""
    assert untrusted.text({"t": "a\ud800b"}, "t") == "a?b"


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -1.0, 0.0])
def test_tool_limits_must_be_positive_finite_numbers(value):
    from causaltrace.tools import ToolConfig, ToolError

    with pytest.raises(ToolError, match="python_timeout must be"):
        ToolConfig(python_timeout=value)


@pytest.fixture(scope="module")
def runtime():
    owner = SyncToolRuntime(tools_config(warm_workers=1))
    yield owner
    owner.close()


@pytest.mark.sandbox
@pytest.mark.parametrize(
    ("forged", "expected"),
    [
        # a counter of infinity (json.dumps writes Infinity): the channel is refused
        ("lambda m, _d=json.dumps: _d({**m, 'stdout_total': float('inf')})", "Error:"),
        # a counter of the wrong type and an error that is not text: both read as absent
        ("lambda m, _d=json.dumps: _d({**m, 'stdout_total': 'many', 'error': [[1]]})", "done"),
        # a reply nested past the recursion limit, within the frame limit
        ("lambda m: '{\"a\":' * 20000 + '1' + '}' * 20000", "Error:"),
        # a reply that is not an object
        ("lambda m: '[1, 2, 3]'", "Error:"),
    ],
)
def test_a_forged_reply_is_a_tool_error_and_the_episode_goes_on(
    runtime, tmp_path, forged, expected
):
    with runtime.episode(make_episode(tmp_path)) as tools:
        assert tools.python("kept = 41") == "(no output)"
        out = tools.python(f"{PATCH}wp._dumps = {forged}\nprint('done')")
        assert out.startswith(expected), out
        # The next call runs (on a restarted namespace where the channel was refused).
        assert tools.python("1 + 1") == "2"
        assert "400" in tools.sql("SELECT count(*) AS n FROM orders")


@pytest.mark.sandbox
def test_a_lone_surrogate_in_the_output_is_written_as_valid_utf8(runtime, tmp_path):
    with runtime.episode(make_episode(tmp_path)) as tools:
        out = tools.python("print('a\\ud800b')")
        assert out == "a?b"
        out.encode("utf-8")  # what the transcript and an HTTP response do with it


@pytest.mark.sandbox
def test_deeply_nested_call_arguments_are_a_tool_error(runtime, tmp_path):
    with runtime.episode(make_episode(tmp_path)) as tools:
        deep = json.dumps({"code": "1"})[:-1] + ', "x": ' + "[" * 50_000 + "]" * 50_000 + "}"
        out = tools.call("python", deep)
        assert out == "Error: the arguments could not be read: nested too deeply", out
        assert tools.call("python", json.dumps({"code": "2 + 2"})) == "4"
