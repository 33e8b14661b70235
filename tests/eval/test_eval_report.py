"""The HTML report of an evaluation run, rendered in headless Chromium (Debian's ``chromium``
package, required; CI installs it): the page is not blank, lists every episode, opens an episode's
transcript beside its label, and shows hostile agent text as text."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("openai", reason="the report test runs the openai agent")

from _eval_support import (
    StubServer,
    call,
    completion,
    dataset_dir,
    run_openai,
    scripted,
    submit_call,
)

from causaltrace.env import DatasetSource

HOSTILE = '<img src=x onerror="document.title=\'pwned\'"></script><b id="injected">bold</b>'
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1280,900",
]


pytestmark = pytest.mark.sandbox


def chromium_binary() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None and os.path.exists("/usr/bin/chromium"):
        found = "/usr/bin/chromium"
    if found is None:  # a hard requirement, like bubblewrap: CI installs it in .ci/run
        pytest.fail("Chromium not found: apt-get install -y chromium (Debian's package)")
    return found


def chromium(url: str, tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    profile = tmp_path / f"profile-{len(list(tmp_path.glob('profile-*')))}"
    return subprocess.run(
        [chromium_binary(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args, url],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    """A run with a correct, a wrong and a failed episode, and hostile text in a transcript."""
    source = DatasetSource(dataset_dir())
    ids = source.episode_ids
    out = tmp_path_factory.mktemp("report") / "run"

    def script(ep, turn, request):
        if ep == ids[2]:
            return 503, {"error": {"message": "server restarting"}}
        if turn == 0:
            return completion(
                HOSTILE,
                [call("sql", {"query": "SELECT 'a</script>b' AS s"})],
                reasoning_content="compare the weeks",
            )
        if turn == 1:
            return completion(None, [call("python", {"code": "print(perf_daily.shape)"})])
        if ep == ids[1]:
            return completion(None, [call("submit", {"root_cause": "NO_ANOMALY", "slice": ""})])
        return completion("Submitting.", [submit_call(source, ep)])

    with StubServer(scripted(source, script)) as server:
        run_openai(server, source, out, ids[:3], retries=1)
    return out


def test_report_is_self_contained(run_dir):
    page = (run_dir / "report.html").read_text()
    assert "http://" not in page.replace("http://www.w3.org", "")
    assert "https://" not in page and "<link" not in page and 'src="http' not in page
    assert "data:image/png;base64," in page  # the confusion matrix is inlined
    assert HOSTILE not in page  # agent text is never inserted raw


@pytest.mark.chromium
def test_report_renders_in_chromium(run_dir, tmp_path):
    ids = DatasetSource(dataset_dir()).episode_ids[:3]
    url = (run_dir / "report.html").resolve().as_uri()
    dom = chromium(url, tmp_path, "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    html = dom.stdout
    assert 'data-ready="1"' in html  # the script ran to the end
    for ep in ids:
        assert f'data-ep="{ep}"' in html
    assert "3 of 3 episodes" in html

    episode = chromium(f"{url}#ep={ids[0]}", tmp_path, "--dump-dom").stdout
    assert 'id="episode-view" class="hidden"' not in episode
    assert "msg assistant" in episode and "label (oracle)" in episode
    assert "SELECT 'a&lt;/script&gt;b' AS s" in episode  # a tool call, shown as text
    assert "&lt;img src=x onerror=" in episode and '<b id="injected">' not in episode
    assert "<title>pwned" not in episode

    shot = tmp_path / "episode.png"
    done = chromium(f"{url}#ep={ids[0]}", tmp_path, f"--screenshot={shot}")
    assert done.returncode == 0 and shot.exists(), done.stderr[-2000:]
    import matplotlib.image as mpimg

    pixels = mpimg.imread(shot)[..., :3]
    assert pixels.shape[:2] == (900, 1280)
    assert float(pixels.std()) > 0.08  # a blank page has (almost) no variance
    # the header bar is dark, the page below it light: the layout is there
    assert pixels[:30].mean() < 0.35 and pixels[100:].mean() > 0.7
    keep = os.environ.get("CAUSALTRACE_KEEP_SCREENSHOT")
    if keep:
        shutil.copy(shot, keep)


def test_metrics_and_summary_of_the_run(run_dir):
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["counts"] == {**metrics["counts"], "episodes": 3, "errors": 1}
    overall = metrics["metrics"]["overall"]
    assert overall["full_attr_at_1"]["value"] == pytest.approx(1 / 3)
    assert overall["parse_rate"]["value"] == pytest.approx(2 / 3)
    confusion = metrics["confusion"]
    assert np.asarray(confusion["counts"]).sum() == 3 and "(no answer)" in confusion["predicted"]
    summary = (run_dir / "summary.md").read_text()
    for heading in ("## Overall", "## By cause group", "## By cause", "FullAttr@1", "2D slice"):
        assert heading in summary
