"""One registry type for domains, agents and rewards: the same lookup, the same duplicate rule,
and nothing imported to list names."""

from __future__ import annotations

import subprocess
import sys

import pytest

from causaltrace.agents import AGENTS, Agent, make_agent, register_agent
from causaltrace.core.registry import DuplicateNameError, Registry, RegistryError, load_path
from causaltrace.episodes.domain import DOMAINS, DomainError, load_domain
from causaltrace.scoring.rewards import REWARDS, get_reward, register_reward, unregister_reward


class _Quiet(Agent):
    async def run(self, session, rng) -> None:  # pragma: no cover - never run here
        await session.finish("quiet")


def test_every_kind_uses_the_one_registry_type():
    assert all(isinstance(r, Registry) for r in (DOMAINS, AGENTS, REWARDS))
    assert (DOMAINS.group, AGENTS.group, REWARDS.group) == (
        "causaltrace.domains",
        "causaltrace.agents",
        "causaltrace.rewards",
    )


def test_listing_names_imports_no_agent_or_domain_module():
    """Names come from paths and entry-point metadata: nothing registered is imported."""
    code = (
        "import sys\n"
        "from causaltrace.agents import available_agents\n"
        "from causaltrace.episodes.domain import available_domains\n"
        "names = available_agents(), sorted(available_domains())\n"
        "loaded = [m for m in sys.modules if m.startswith(('causaltrace_domains',"
        " 'causaltrace.agents.openai_agent', 'causaltrace.agents.transformers_agent',"
        " 'causaltrace.agents.random_agent'))]\n"
        "print(names[0]); print(names[1]); print(loaded)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    agents, domains, loaded = out.stdout.strip().splitlines()
    assert "random" in agents and "teacher" in agents and "openai" in agents
    assert "ads" in domains and "services" in domains
    assert loaded == "[]"


def test_a_name_defined_twice_is_an_error_naming_both():
    # run time vs. an installed entry point
    with pytest.raises(DuplicateNameError, match=r"agent 'teacher' is already registered"):
        register_agent("teacher")(_Quiet)
    # run time vs. a built-in path
    with pytest.raises(DuplicateNameError, match=r"causaltrace.agents.random_agent:RandomAgent"):
        AGENTS.register("random", _Quiet)
    # domains and rewards follow the same rule
    with pytest.raises(DuplicateNameError, match="domain 'ads'"):
        DOMAINS.register("ads", "somewhere:Else")
    with pytest.raises(DuplicateNameError, match="reward 'format'"):
        register_reward("format")(lambda answer, label: 0.0)


def test_overwrite_replaces_on_purpose_and_unregister_forgets():
    registry: Registry[object] = Registry("thing")
    registry.register("a", 1)
    registry.register("a", 2, overwrite=True)
    assert registry.get("a") == 2
    registry.unregister("a")
    with pytest.raises(RegistryError, match=r"unknown thing 'a'"):
        registry.get("a")


def test_a_module_attr_path_works_as_a_name_and_as_a_registration():
    assert make_agent("causaltrace.agents.random_agent:RandomAgent").__class__.__name__ == (
        "RandomAgent"
    )
    domain = load_domain("causaltrace_domains.example:ExampleDomain")
    assert type(domain).__name__ == "ExampleDomain"
    register_agent("test_quiet_agent")(_Quiet)
    try:
        assert "test_quiet_agent" in AGENTS
        assert isinstance(make_agent("test_quiet_agent"), _Quiet)
    finally:
        AGENTS.unregister("test_quiet_agent")


def test_unknown_and_unloadable_names_say_what_is_wrong():
    with pytest.raises(RegistryError, match=r"unknown agent 'nobody'; registered agents: .*random"):
        make_agent("nobody")
    with pytest.raises(DomainError, match=r"cannot load domain 'no.such.module:X'"):
        load_domain("no.such.module:X")
    with pytest.raises(DomainError, match="not a Domain subclass"):
        load_domain("causaltrace.agents.random_agent:RandomAgent")
    with pytest.raises(RegistryError, match="not an Agent subclass"):
        make_agent("causaltrace_domains.example:ExampleDomain")
    with pytest.raises(ValueError, match="not a 'module:attr' path"):
        load_path("justaname")


def test_a_reward_registered_at_run_time_is_checked_and_listed():
    @register_reward("test_registry_bonus")
    def bonus(answer, label, *, amount: float = 0.5) -> float:
        """Toy: a constant bonus."""
        return amount

    try:
        spec = get_reward("test_registry_bonus")
        assert spec.params == {"amount": 0.5} and spec.description == "Toy: a constant bonus."
    finally:
        unregister_reward("test_registry_bonus")
    with pytest.raises(TypeError, match="positionally"):
        register_reward("test_registry_bad")(lambda answer: 0.0)
    assert "test_registry_bad" not in REWARDS
