"""Where the Hydra configs come from: the engine's from its package (``pkg://causaltrace.conf``,
the apps' ``config_path``), each registered domain's from its own ``conf`` package, which the
search-path plugin (``hydra_plugins/causaltrace_searchpath``) appends for the causaltrace apps
and for no other Hydra app. A third-party domain ships its presets the same way."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from hydra import compose, initialize_config_dir, initialize_config_module
from hydra.errors import MissingConfigException

import causaltrace.conf
from causaltrace.apps.configs import register_search_path
from hydra_plugins.causaltrace_searchpath.causaltrace_searchpath import domain_conf_packages

ENGINE_CONF = os.path.dirname(causaltrace.conf.__file__)


@pytest.fixture(autouse=True)
def _plugin_registered():
    """As the apps do: an editable install hides the plugin from Hydra's scan of the
    ``hydra_plugins`` namespace (causaltrace/apps/configs.py); tests/install/test_wheel_install.py
    checks that Hydra finds it by itself in an installed wheel."""
    register_search_path()


def test_the_registered_domains_bring_their_conf_packages():
    assert domain_conf_packages() == [
        ("ads", "causaltrace_domains.ads.conf"),
        ("example", "causaltrace_domains.example.conf"),
        ("services", "causaltrace_domains.services.conf"),
    ]


def test_the_engine_module_composes_with_the_domains_presets():
    with initialize_config_module(config_module="causaltrace.conf", version_base="1.3"):
        cfg = compose("generate", overrides=["domain=services", "dataset=services_smoke"])
        assert cfg.domain.name == "services" and cfg.dataset.name == "services_smoke"
        assert cfg.verifier.snr == 1.0  # the engine's verifier/default
        cfg = compose("eval", overrides=["agent=random"])  # an engine agent, ads presets
        assert (cfg.agent.name, cfg.domain.preset, cfg.dataset.name) == (
            "random",
            "small",
            "ads_smoke",
        )


def test_the_engine_folder_given_as_a_directory_gets_the_domains_too():
    with initialize_config_dir(config_dir=ENGINE_CONF, version_base="1.3"):
        cfg = compose("eval", overrides=["agent=services_teacher", "domain=services"])
    assert cfg.agent.name == "services_teacher" and cfg.domain.name == "services"


def test_the_apps_find_the_domains_configs_from_any_folder(tmp_path):
    """Run from outside the repository: in an editable install Hydra's scan of the
    ``hydra_plugins`` namespace misses the plugin, and the apps register it themselves."""
    args = ["domain=services", "dataset=services_smoke", "--cfg", "job"]
    done = subprocess.run(
        [sys.executable, "-m", "causaltrace.apps.generate", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "name: services_smoke" in done.stdout and "name: services\n" in done.stdout


def test_other_hydra_apps_are_left_alone(tmp_path):
    (tmp_path / "app.yaml").write_text("defaults:\n  - domain: ads\n  - _self_\nx: 1\n")
    with (
        initialize_config_dir(config_dir=str(tmp_path), version_base="1.3"),
        pytest.raises(MissingConfigException),
    ):
        compose("app")


def test_a_third_party_domain_ships_its_presets(tmp_path):
    """An installed package registering a domain under ``causaltrace.domains``, with a ``conf``
    package of its own, is a new option of the engine's groups; none of the engine's files
    changes. The package here is installed by putting it and its dist-info on the path."""
    package = tmp_path / "acme_domain"
    for folder in ("conf/domain", "conf/dataset"):
        (package / folder).mkdir(parents=True)
    (package / "__init__.py").write_text("class AcmeDomain:\n    pass\n")
    (package / "conf" / "__init__.py").write_text("")
    (package / "conf" / "domain" / "acme.yaml").write_text("name: acme\nshops: 3\n")
    (package / "conf" / "dataset" / "acme_small.yaml").write_text(
        "name: acme_small\nsplit: small\nseed: 1\nn_episodes: 4\n"
    )
    info = tmp_path / "acme_domain-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-domain\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[causaltrace.domains]\nacme = acme_domain:AcmeDomain\n")
    # A fresh interpreter: entry points and imported packages are not those of this process.
    code = """
from hydra import compose, initialize_config_module
from causaltrace.apps.configs import register_search_path
from hydra_plugins.causaltrace_searchpath.causaltrace_searchpath import domain_conf_packages
print(dict(domain_conf_packages())["acme"])
register_search_path()
with initialize_config_module(config_module="causaltrace.conf", version_base="1.3"):
    cfg = compose("generate", overrides=["domain=acme", "dataset=acme_small"])
print(cfg.domain.shops, cfg.dataset.name, cfg.verifier.snr)
"""
    path = [str(tmp_path), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:2] == ["acme_domain.conf", "3 acme_small 1.0"]
