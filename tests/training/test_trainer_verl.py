"""The verl tools driven through verl's own ``ToolAgentLoop`` (verl as installed; the model's
side is scripted, the agent loop, tool registry, tool-call parser and tokenization are
verl's): per-sample isolation of GRPO samples, per-sample budgets, release on every call, the
end of a trajectory closing its session, and the tool config rendered from the contract."""

from __future__ import annotations

import asyncio
import gc
import json
from pathlib import Path

import pytest
import yaml
from _training_support import hermes_call, require, small_dataset

verl = require("verl")

from causaltrace.datasets.reading import DatasetSource  # noqa: E402
from causaltrace.env.contract import ToolContract  # noqa: E402
from causaltrace.errors import CausalTraceError  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


pytestmark = [pytest.mark.train, pytest.mark.sandbox]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    return small_dataset(tmp_path_factory.mktemp("verl") / "ds")


@pytest.fixture(scope="module")
def tokenizer():
    require("trl")
    from causaltrace.training.tiny import build_tokenizer

    return build_tokenizer()


def _tools(dataset: Path, tmp_path: Path, **kw):
    from verl.tools.tool_registry import initialize_tools_from_config

    from causaltrace.training.export import write_verl_tools

    path = write_verl_tools(dataset, tmp_path / "tools.yaml", **kw)
    return initialize_tools_from_config(str(path))


class ScriptedServer:
    """The model: each trajectory (verl's request id) replays the next script, one assistant
    turn per ``generate`` call. Everything downstream of the tokens is verl's."""

    def __init__(self, tokenizer, scripts):
        self.tokenizer, self.scripts, self.by_request = tokenizer, list(scripts), {}

    async def generate(self, request_id, prompt_ids, sampling_params, **kwargs):
        from verl.workers.rollout.replica import TokenOutput

        if request_id not in self.by_request:
            self.by_request[request_id] = list(self.scripts.pop(0))
        text = self.by_request[request_id].pop(0)
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        return TokenOutput(token_ids=ids)


def _agent_loop(tokenizer, server, tools):
    from omegaconf import OmegaConf
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap, ToolListWrap
    from verl.experimental.agent_loop.tool_agent_loop import ToolAgentLoop

    config = OmegaConf.load(
        Path(verl.__file__).parent / "trainer/config/_generated_ppo_trainer.yaml"
    )
    rollout = config.actor_rollout_ref.rollout
    rollout.multi_turn.enable = True
    rollout.multi_turn.format = "hermes"
    rollout.multi_turn.max_tool_response_length = 4096
    rollout.prompt_length = rollout.response_length = 16384
    return ToolAgentLoop(
        trainer_config=DictConfigWrap(config),
        server_manager=server,
        tokenizer=tokenizer,
        processor=None,
        dataset_cls=None,
        data_config=DictConfigWrap(config.data),
        tools=ToolListWrap(tools),
    )


def _run_group(dataset, tmp_path, tokenizer, scripts, *, max_tool_calls):
    """One GRPO group: every script a sample of the same row (identical tools_kwargs)."""
    from causaltrace.training.records import dataset_records
    from causaltrace.training.verl_reward import verl_rows
    from causaltrace.training.verl_tools import REGISTRY

    source = DatasetSource(dataset)
    episode = source.episode_ids[0]
    row = verl_rows(dataset_records(source, [episode]))[0]
    tools = _tools(dataset, tmp_path, max_tool_calls=max_tool_calls)

    async def main():
        loop = _agent_loop(tokenizer, ScriptedServer(tokenizer, scripts), tools)
        outputs = await asyncio.gather(
            *(
                loop.run(
                    {},
                    raw_prompt=list(row["prompt"]),
                    tools_kwargs=row["extra_info"]["tools_kwargs"],
                )
                for _ in scripts
            )
        )
        texts = [tokenizer.decode(o.response_ids) for o in outputs]
        open_during = len(REGISTRY.sessions)
        del outputs
        gc.collect()
        await asyncio.sleep(0.2)  # the finalizers schedule the closes on this loop
        state = {
            "open_during": open_during,
            "open_after": len(REGISTRY.sessions),
            "closed": dict(REGISTRY.closed),
            "instances": sum(len(t._instances) for t in tools),
        }
        await REGISTRY.aclose()
        return texts, state

    return row, asyncio.run(main())


def test_grpo_samples_of_one_prompt_do_not_share_state(dataset, tmp_path, tokenizer):
    source = DatasetSource(dataset)
    label = source.label(source.episode_ids[0])
    answer = {"root_cause": label.cause, "slice": label.slice or ""}
    scripts = [
        [
            hermes_call("python", code="x = 41"),
            hermes_call("python", code="print(x + 1)"),
            hermes_call("submit", **answer),
            "Done.<|im_end|>",
        ],
        [
            hermes_call("python", code="print(x + 1)"),  # sample A's variable must not exist
            hermes_call("sql", query="SELECT 7 AS seven"),
            hermes_call("sql", query="SELECT 8"),
            hermes_call("sql", query="SELECT 9"),  # the 4th call: over this sample's budget
            hermes_call("sql", query="SELECT 10"),
            "Done.<|im_end|>",
        ],
        ["I cannot tell.<|im_end|>"],  # never calls a tool: no session is ever opened
    ]
    row, (texts, state) = _run_group(dataset, tmp_path, tokenizer, scripts, max_tool_calls=3)
    # Scripts go to trajectories in the order verl first asks for a turn: find each by its text.
    first, second, third = (
        next(t for t in texts if marker in t) for marker in ("x = 41", "SELECT 7", "cannot tell")
    )
    assert "Submission received" not in third
    assert "\n42\n" in first and "Submission received" in first
    assert "NameError: name 'x' is not defined" in second and "seven" in second
    assert "The episode is over: tool-call budget exhausted." in second
    assert second.count("The episode is over.") >= 1  # the call after the end
    assert "Submission received" not in second
    # Sessions close as they end (submit, budget), and every create was released.
    assert state["open_during"] == 0 and state["open_after"] == 0
    assert sorted(state["closed"].values()) == ["submitted", "tool-call budget exhausted"]
    assert state["instances"] == 0
    # The reward verl computes on the sample's own response: the submit call is found.
    from causaltrace.training.verl_reward import compute_score

    truth = row["reward_model"]["ground_truth"]
    assert compute_score("causaltrace", first, truth)["score"] == pytest.approx(1.0)
    assert compute_score("causaltrace", second, truth)["score"] < 0.5


def test_a_dropped_trajectory_closes_its_session(dataset, tmp_path, tokenizer):
    scripts = [[hermes_call("sql", query="SELECT 1 AS one"), "I give up.<|im_end|>"]]
    _, (texts, state) = _run_group(dataset, tmp_path, tokenizer, scripts, max_tool_calls=30)
    assert "one" in texts[0]
    # Neither submitted nor out of budget: only the end of the trajectory (verl dropping its
    # agent_data) can have closed it.
    assert state["open_after"] == 0
    assert list(state["closed"].values()) == ["trajectory finished"]


def test_tool_config_is_the_contract_as_verl_reads_it(dataset, tmp_path):
    tools = _tools(dataset, tmp_path)
    contract = ToolContract.for_dataset(dataset)
    assert [t.name for t in tools] == list(contract.names)
    for tool, schema in zip(tools, contract.openai()):
        # verl's pydantic schema, dumped as verl sends it to the chat template.
        assert tool.tool_schema.model_dump(exclude_unset=True, exclude_none=True) == schema


def test_committed_tool_config_matches_the_ads_contract():
    from causaltrace.scoring import AnswerSpace
    from causaltrace_domains.ads import AdsDomain

    committed = yaml.safe_load((ROOT / "causaltrace/conf/verl/causaltrace_tools.yaml").read_text())
    space = AnswerSpace.from_scm(AdsDomain().scm)
    rendered = ToolContract.for_space(space).verl_tool_config(
        "data/ads_train", retry_malformed_submit=True
    )
    assert json.loads(json.dumps(committed)) == json.loads(json.dumps(rendered))


def test_unsupported_verl_and_missing_episode_are_named_errors(dataset, tmp_path, monkeypatch):
    from causaltrace.training import verl_tools as adapter

    tools = _tools(dataset, tmp_path)
    with pytest.raises(CausalTraceError, match="episode_id"):
        asyncio.run(tools[0].create(create_kwargs={}))
    monkeypatch.setattr(adapter._verl, "__version__", "0.6.1")
    with pytest.raises(CausalTraceError, match=r"verl 0\.6\.1 is not supported"):
        adapter.VerlSqlTool({"dataset": str(dataset)}, None)


def test_a_call_that_raises_in_the_environment_is_a_tool_error(dataset, tmp_path, monkeypatch):
    """Issue 42: what the session host raises on a call (a bug, or bytes a worker forged)
    reaches verl as a named tool error, not an exception that fails the rollout step; the next
    call of the trajectory runs."""
    from causaltrace.training.verl_tools import REGISTRY

    sql = next(t for t in _tools(dataset, tmp_path) if t.name == "sql")
    kwargs = {"episode_id": DatasetSource(dataset).episode_ids[0], "rollout_key": "raises"}

    async def run():
        instance, _ = await sql.create(create_kwargs=kwargs)
        first, _, _ = await sql.execute(instance, {"query": "SELECT 41 + 1 AS answer"})
        real = REGISTRY.host.step

        async def broken(*args, **kw):
            raise OverflowError("cannot convert float infinity to integer")

        monkeypatch.setattr(REGISTRY.host, "step", broken)
        failed, reward, _ = await sql.execute(instance, {"query": "SELECT 1"})
        monkeypatch.setattr(REGISTRY.host, "step", real)
        after, _, _ = await sql.execute(instance, {"query": "SELECT 6 * 7 AS answer"})
        await sql.release(instance)
        await REGISTRY.aclose()
        return first.text, failed.text, reward, after.text

    first, failed, reward, after = asyncio.run(run())
    assert "42" in first and "42" in after
    assert failed.startswith("Error: the sql call failed in the environment (OverflowError)")
    assert reward == 0.0
