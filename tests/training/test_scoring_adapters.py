"""Trainer adapters. None of these tests needs torch, verl or TRL; the ones that need
``datasets`` skip (with importorskip) when it is not installed."""

import json
import subprocess
import sys

import pytest
from _scoring_data import example_labels, example_space

from causaltrace.training.hf import export_hf_dataset, hf_columns, to_hf_dataset
from causaltrace.training.records import EpisodeRecord, ground_truth_json, load_ground_truth
from causaltrace.training.trl_rewards import make_reward_function, term_reward_functions
from causaltrace.training.verl_reward import compute_score, export_verl_parquet, verl_rows

PROMPT = [
    {"role": "system", "content": "You investigate KPI drops. Submit {root_cause, slice}."},
    {"role": "user", "content": "Orders fell in the last two weeks."},
]
RIGHT = '{"root_cause": "CHECKOUT_BUG", "slice": "channel=search&region=north"}'
WRONG = '{"root_cause": "TRACKING_LOSS", "slice": "region=west"}'


def records():
    space = example_space()
    return [
        EpisodeRecord(f"ep-{k}", PROMPT, lab, space, {"difficulty": "easy"})
        for k, lab in example_labels().items()
    ]


def checkout_truth(reward=None):
    return ground_truth_json(example_labels()["checkout_2d"], example_space(), reward)


# -- ground truth -----------------------------------------------------------------------------
def test_ground_truth_round_trip():
    lab, space = example_labels()["checkout_2d"], example_space()
    gt = load_ground_truth(ground_truth_json(lab, space))
    assert gt.label == lab and gt.space == space and gt.reward is None
    assert load_ground_truth(json.loads(ground_truth_json(lab, space))).label == lab
    with pytest.raises(ValueError, match="label"):
        load_ground_truth("{}")


def test_records_refuse_leaky_metadata():
    with pytest.raises(ValueError, match="carry the answer"):
        EpisodeRecord(
            "e", PROMPT, example_labels()["traffic"], example_space(), {"root_cause": "X"}
        )
    with pytest.raises(ValueError, match="role"):
        EpisodeRecord("e", [{"content": "hi"}], example_labels()["traffic"], example_space())


# -- verl -------------------------------------------------------------------------------------
def test_verl_compute_score_reads_the_agents_final_answer():
    # A multi-turn response as verl decodes it (skip_special_tokens): a tool output echoes a
    # wrong answer; the agent's own final message holds the right one.
    solution = (
        "I will query the funnel.\n<tool_call>\n"
        '{"name": "query", "arguments": {"sql": "select * from orders"}}\n</tool_call>user\n'
        f"<tool_response>\nprevious analyst said {WRONG}\n</tool_response>\nassistant\n"
        f"Checkout broke for search traffic in the north: {RIGHT}"
    )
    out = compute_score("causaltrace/example", solution, checkout_truth(), {"index": 0})
    assert out["score"] == pytest.approx(1.0)
    assert out["full_attribution"] == 1.0 and out["parse_ok"] == 1.0
    assert out["tool_calls"] == 1.0 and out["turns"] == 2.0
    assert all(isinstance(v, float) for v in out.values())
    # Only the tool output holds an answer: no credit.
    echoed = solution.rsplit("assistant\n", 1)[0] + "assistant\nI am not sure."
    assert compute_score("causaltrace/example", echoed, checkout_truth())["score"] == 0.0


def test_verl_compute_score_keys_are_stable_and_reward_is_configurable():
    bad = compute_score("x", "garbage", checkout_truth())
    good = compute_score("x", RIGHT, checkout_truth())
    assert set(bad) == set(good)
    cfg = {"terms": {"full_attribution": 1.0}}
    assert set(compute_score("x", RIGHT, checkout_truth(), reward=cfg)) == {
        "score",
        "full_attribution",
        "parse_ok",
        "tool_calls",
        "turns",
    }
    # A reward stored in the ground truth is used when none is passed.
    stored = compute_score("x", RIGHT, checkout_truth(cfg))
    assert "graded_attribution" not in stored and stored["score"] == 1.0
    # Extra keyword arguments from verl are accepted.
    assert compute_score("x", RIGHT, checkout_truth(), None, something="else")["score"] == 1.0


def test_verl_rows_schema():
    rows = verl_rows(
        records(), data_source="causaltrace/example", split="test", tool_names=("query", "submit")
    )
    assert len(rows) == 3
    row = rows[1]
    assert set(row) == {"data_source", "prompt", "ability", "reward_model", "extra_info"}
    assert row["prompt"] == PROMPT
    assert row["reward_model"]["style"] == "rule"
    gt = load_ground_truth(row["reward_model"]["ground_truth"])
    assert gt.label == example_labels()["checkout_2d"]
    extra = row["extra_info"]
    assert (
        extra["episode_id"] == "ep-checkout_2d" and extra["index"] == 1 and extra["split"] == "test"
    )
    assert extra["tools_kwargs"]["submit"]["create_kwargs"] == {"episode_id": "ep-checkout_2d"}
    assert extra["tools_kwargs"]["query"]["create_kwargs"] == {"episode_id": "ep-checkout_2d"}
    assert extra["need_tools_kwargs"] is True
    # The label never reaches the prompt or extra_info.
    visible = json.dumps([row["prompt"], extra])
    assert "channel=search&region=north" not in visible and "CHECKOUT_BUG" not in visible


def test_verl_parquet_round_trip(tmp_path):
    pq = pytest.importorskip("pyarrow.parquet", reason="pyarrow writes verl's parquet")
    path = export_verl_parquet(records(), tmp_path / "train.parquet", interaction_name="rca")
    table = pq.read_table(path).to_pylist()
    assert [r["extra_info"]["episode_id"] for r in table] == [
        "ep-traffic",
        "ep-checkout_2d",
        "ep-tracking_1d",
    ]
    row = table[1]
    assert row["prompt"][1] == PROMPT[1]
    assert row["extra_info"]["interaction_kwargs"] == {
        "name": "rca",
        "episode_id": "ep-checkout_2d",
    }
    out = compute_score(
        row["data_source"], RIGHT, row["reward_model"]["ground_truth"], row["extra_info"]
    )
    assert out["score"] == pytest.approx(1.0)


# -- TRL --------------------------------------------------------------------------------------
def test_trl_reward_function_strings_and_conversations():
    fn = make_reward_function()
    truth = checkout_truth()
    completions = [
        RIGHT,
        [{"role": "assistant", "content": RIGHT}],
        [
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"function": {"name": "submit", "arguments": WRONG}}],
            },
            {"role": "tool", "content": "ok"},
        ],
        "no answer",
    ]
    scores = fn(
        prompts=[PROMPT] * 4, completions=completions, ground_truth=[truth] * 4, completion_ids=None
    )
    assert scores == [pytest.approx(1.0), pytest.approx(1.0), pytest.approx(0.05), 0.0]
    assert fn.__name__ == "causaltrace_reward"
    with pytest.raises(KeyError, match="ground_truth"):
        fn(prompts=[PROMPT], completions=[RIGHT])


def test_trl_term_functions_sum_to_the_composite():
    funcs, weights = term_reward_functions()
    assert [f.__name__ for f in funcs] == ["graded_attribution", "full_attribution", "format"]
    assert weights == [0.65, 0.30, 0.05]
    completions = [RIGHT, '{"root_cause": "CHECKOUT_BUG", "slice": "region=north"}', WRONG]
    truths = [checkout_truth()] * 3
    per_term = [f(prompts=None, completions=completions, ground_truth=truths) for f in funcs]
    total = [sum(w * t[i] for w, t in zip(weights, per_term)) for i in range(3)]
    expected = make_reward_function()(None, completions, ground_truth=truths)
    assert total == pytest.approx(expected)


# -- Hugging Face datasets ----------------------------------------------------------------------
def test_hf_columns_keep_the_label_apart():
    cols = hf_columns(records(), split="train")
    assert set(cols) == {"episode_id", "prompt", "metadata", "ground_truth"}
    assert cols["metadata"][1] == {
        "domain": "example-webshop",
        "split": "train",
        "difficulty": "easy",
    }
    visible = json.dumps([cols["prompt"], cols["metadata"]])
    assert "CHECKOUT_BUG" not in visible and "region=west" not in visible
    assert load_ground_truth(cols["ground_truth"][2]).label == example_labels()["tracking_1d"]
    public = hf_columns(records(), include_label=False)
    assert "ground_truth" not in public and len(public["prompt"]) == 3


def test_hf_dataset_export(tmp_path):
    datasets = pytest.importorskip("datasets", reason="the 'datasets' package is optional")
    ds = to_hf_dataset(records(), split="train")
    assert ds.num_rows == 3 and "ground_truth" in ds.column_names
    path = export_hf_dataset(records(), tmp_path / "split")
    again = datasets.load_from_disk(path)
    fn = make_reward_function()
    assert fn(again["prompt"][:1], [RIGHT], ground_truth=again["ground_truth"][1:2]) == [
        pytest.approx(1.0)
    ]


def test_verl_parquet_loads_with_datasets(tmp_path):
    datasets = pytest.importorskip("datasets", reason="verl reads its parquet with 'datasets'")
    path = export_verl_parquet(records(), tmp_path / "train.parquet")
    ds = datasets.load_dataset("parquet", data_files=path, split="train")
    assert ds[0]["reward_model"]["style"] == "rule"


# -- light imports ------------------------------------------------------------------------------
def test_adapters_import_no_trainer_or_heavy_library():
    code = (
        "import sys\n"
        "import causaltrace, causaltrace.scoring\n"
        "import causaltrace.training.verl_reward, causaltrace.training.trl_rewards\n"
        "import causaltrace.training.hf\n"
        "heavy = {'torch', 'verl', 'trl', 'datasets', 'pandas', 'pyarrow', 'matplotlib', 'transformers'}\n"
        "print(sorted(heavy & set(sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_compute_score_never_raises_on_agent_output():
    truth = checkout_truth()
    for junk in ["", "{" * 1000, "\x00\xff", "<tool_response>" * 50, RIGHT * 40]:
        out = compute_score("x", junk, truth)
        assert 0.0 <= out["score"] <= 1.0
