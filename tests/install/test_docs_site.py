"""The documentation site builds in strict mode (broken links, missing anchors, missing snippet
files and unresolved API references fail it), and its API reference shows the docstrings of the
public objects, rendered from the code.

Skipped only where MkDocs is not installed and CAUSALTRACE_REQUIRE_DOCS is unset (CI installs
the docs packages through the dev extra)."""

from __future__ import annotations

import html
import importlib.util
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

if importlib.util.find_spec("mkdocs") is None and not os.environ.get("CAUSALTRACE_REQUIRE_DOCS"):
    pytest.skip('MkDocs is not installed (pip install -e ".[docs]")', allow_module_level=True)


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    assert time.perf_counter() - started < 60, "the docs build should stay well under a minute"
    return out


def _text(path: Path) -> str:
    """A page's visible text (tags dropped, entities decoded, whitespace collapsed; tags are
    dropped without a space, so highlighted code reads as written)."""
    raw = path.read_text(encoding="utf-8")
    raw = re.sub(r"<(script|style)\b.*?</\1>", " ", raw, flags=re.S)
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", raw)).split())


def _section(path: Path, anchor: str) -> str:
    """The visible text of one API object's entry, from its heading to the next object's."""
    raw = path.read_text(encoding="utf-8")
    start = raw.find(f'id="{anchor}"')
    assert start >= 0, f"{path.relative_to(path.parents[2])}: no entry {anchor}"
    end = raw.find('class="doc doc-heading"', raw.find("</h", start))  # the next entry
    chunk = raw[start : end if end > 0 else None]
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", chunk)).split())


def _first_line(obj) -> str:
    """The docstring's first line, as the page shows it (RST ``code`` becomes `code`; a role
    such as :class:`~a.b.C` shows its target as code, C alone after a ~)."""
    line = obj.__doc__.strip().splitlines()[0]
    line = re.sub(r":\w+:`~[\w.]*?(\w+)`", r"\1", line)
    line = re.sub(r":\w+:`([^`]*)`", r"\1", line)
    return " ".join(line.replace("``", "").replace("`", "").split())


@pytest.mark.parametrize(
    ("page", "qualname"),
    [
        ("causaltrace", "causaltrace.Panel"),
        ("causaltrace", "causaltrace.SCM"),
        ("causaltrace", "causaltrace.Domain"),
        ("causaltrace", "causaltrace.load_domain"),
        ("causaltrace", "causaltrace.counterfactual_from_observations"),
        ("engine", "causaltrace.episodes.verify.Statistic"),
        ("engine", "causaltrace.datasets.job.Job"),
        ("scoring", "causaltrace.scoring.CompositeReward"),
        ("scoring", "causaltrace.scoring.score_output"),
        ("env", "causaltrace.env.DiagnosisSession"),
        ("training", "causaltrace.training.trl_env.make_trl_environment"),
        ("tools", "causaltrace.tools.ToolRuntime"),
        ("eval", "causaltrace.eval.evaluate"),
        ("serve", "causaltrace.serve.SessionHost"),
        ("training", "causaltrace.training.recipe"),
    ],
)
@pytest.mark.slow
def test_api_reference_renders_docstrings(site, page, qualname):
    module_name, _, attr = qualname.rpartition(".")
    try:
        obj = getattr(importlib.import_module(module_name), attr)
    except AttributeError:  # a module, documented as a whole
        obj = importlib.import_module(qualname)
    shown = _section(site / "api" / page / "index.html", qualname)
    assert _first_line(obj) in shown, f"{qualname}'s docstring is not on api/{page}"


def _signature(path: Path, anchor: str) -> str:
    """The raw HTML of one API entry's signature block (``separate_signature``)."""
    raw = path.read_text(encoding="utf-8")
    start = raw.find(f'id="{anchor}"')
    assert start >= 0, f"no entry {anchor}"
    block = raw.find('class="doc-signature', start)
    assert block >= 0 and block < raw.find('class="doc doc-contents', start), anchor
    return raw[block : raw.find("</pre>", block)]


def test_api_reference_shows_signatures(site):
    shown = _section(site / "api" / "causaltrace" / "index.html", "causaltrace.load_domain")
    assert "load_domain(name: str, config: Mapping[str, Any] | None = None) -> Domain" in shown


@pytest.mark.parametrize(
    ("page", "anchor", "annotated"),
    [
        ("causaltrace", "causaltrace.load_domain", "name: str"),
        ("causaltrace", "causaltrace.parse_slice", "panel: Panel | None = None"),
        ("eval", "causaltrace.eval.evaluate", "concurrency: int = 4"),
        ("agents", "causaltrace.agents.Agent.end_episode", "error: str"),
    ],
)
def test_api_signatures_show_their_types(site, page, anchor, annotated):
    """mkdocs.yml's show_signature_annotations: each signature, in its own code block, shows
    the parameters' types; signature_crossrefs: a type documented on the site links to it."""
    block = _signature(site / "api" / page / "index.html", anchor)
    text = " ".join(html.unescape(re.sub(r"<[^>]+>", "", block)).split())
    assert annotated in text, text


def test_api_signature_types_link_to_their_entries(site):
    block = _signature(site / "api" / "causaltrace" / "index.html", "causaltrace.load_domain")
    assert 'href="#causaltrace.Domain">Domain</a>' in block, block


def test_pages_are_built_from_their_sources(site):
    index = _text(site / "index.html")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "A model in ten lines" in readme and "A model in ten lines" in index
    tutorial = _text(site / "tutorial-new-domain" / "index.html")
    domain = (ROOT / "docs" / "tutorial" / "shop_domain.py").read_text(encoding="utf-8")
    for line in ("class ShopEvidence:", 'Dimension("store", STORES)', "def scripted_agent():"):
        assert line in tutorial
    assert "class ShopDomain(Domain):" in domain and "--8<--" not in tutorial
    for page in ("concepts", "architecture", "domain-ads", "baselines", "serving", "training"):
        assert (site / page / "index.html").exists()


def test_sphinx_roles_in_docstrings_show_as_code(site):
    """Docstrings cross-reference with reStructuredText roles; the site shows the target as code
    (docs/hooks/sphinx_roles.py), never the role's markup."""
    pages = sorted((site / "api").rglob("index.html"))
    assert pages
    leftovers = [
        p.parent.name for p in pages if re.search(r":(class|func|mod|meth):<code>", _text(p))
    ]
    assert leftovers == []
    agents = (site / "api" / "agents" / "index.html").read_text(encoding="utf-8")
    assert "<code>DiagnosisSession</code>" in agents  # :class:`~causaltrace.env.DiagnosisSession`
