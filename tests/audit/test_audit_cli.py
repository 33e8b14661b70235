"""``causaltrace-audit`` end to end on a tiny example-domain dataset: it writes report.md and
its figures; a bad input (no such dataset, an unknown domain, a dataset of another domain) is
one clear error line and a non-zero exit (the style of tests/apps/test_hardening_cli.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from causaltrace.datasets.generation import Job, run

PROG = "causaltrace-audit"


def audit(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "causaltrace.apps.audit", *args, "progress=false"],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "HYDRA_FULL_ERROR": ""},
    )


def one_line_error(done: subprocess.CompletedProcess) -> str:
    assert done.returncode != 0, done.stdout[-2000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr[-3000:]
    assert lines[0].startswith(f"{PROG}: error: "), lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("audit") / "ds"
    job = Job.from_config(
        {
            "out_dir": str(out),
            "domain": {"name": "example"},
            "dataset": {
                "name": "tiny",
                "split": "tiny",
                "seed": 5,
                "n_episodes": 24,
                "shard_size": 12,
                "composition": {"kind": "prior"},
            },
            "verifier": {},
        }
    )
    run(job, 0, 1, False)
    return out


@pytest.mark.slow
def test_audit_writes_the_report_and_figures(dataset, tmp_path):
    out = tmp_path / "report"
    before = sorted(p.relative_to(dataset) for p in dataset.rglob("*"))
    done = audit("domain=example", f"dataset={dataset}", f"out={out}")
    assert done.returncode == 0, done.stderr[-3000:]
    text = (out / "report.md").read_text(encoding="utf-8")
    # the exact command, then every section
    assert f"causaltrace-audit domain=example dataset={dataset} out={out} progress=false" in text
    for heading in (
        "## Summary",
        "## 1. Oracle ceiling",
        "## 2. Distinguishability",
        "## 3. Channels: measured vs declared",
        "## 4. Leakage probe",
        "## 5. Shortcut probe",
        "## 6. Difficulty curves",
        "## 7. Per-cause rule probe",
        "## 8. Learned probe",
    ):
        assert heading in text, heading
    # the oracle's ceilings per dataset, the set ceiling on concurrent episodes beside them
    header = "| dataset | cause accuracy | FullAttr@1 | set ceiling | set ceiling, concurrent |"
    assert header in text
    assert "| tiny |" in text.split(header)[1].split("\n\n")[0]
    for figure in ("oracle_confusion.png", "graph_separation.png", "channels.png"):
        data = (out / figure).read_bytes()
        assert data.startswith(b"\x89PNG") and f"]({figure})" in text
    assert list(out.glob("curve_*.png"))
    # the audit reads the dataset and writes nothing into it
    assert sorted(p.relative_to(dataset) for p in dataset.rglob("*")) == before


@pytest.mark.slow
def test_episodes_option_limits_the_audit(dataset, tmp_path):
    # learned=false: the episode limit is what is read here (the learned probe, on by default,
    # runs in the test above and in tests/audit/test_audit_learned.py)
    done = audit(
        "domain=example", f"dataset={dataset}", f"out={tmp_path}", "episodes=8", "learned=false"
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Episodes audited: 8 of tiny" in (tmp_path / "report.md").read_text()


@pytest.mark.slow
def test_unknown_dataset_path_is_one_line(tmp_path):
    line = one_line_error(audit("domain=example", f"dataset={tmp_path}/nope", f"out={tmp_path}"))
    assert "nope: no such dataset directory" in line


def test_unknown_domain_is_one_line(dataset, tmp_path):
    line = one_line_error(audit("domain=nosuch", f"dataset={dataset}", f"out={tmp_path}"))
    assert "nosuch" in line


@pytest.mark.slow
def test_dataset_of_another_domain_is_one_line(dataset, tmp_path):
    line = one_line_error(audit("domain=ads", f"dataset={dataset}", f"out={tmp_path}"))
    assert "generated with domain 'example', not 'ads'" in line


@pytest.mark.slow
def test_missing_dataset_is_one_line(tmp_path):
    line = one_line_error(audit("domain=example", f"out={tmp_path}"))
    assert "no dataset given" in line
