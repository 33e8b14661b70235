"""Every committed split still rebuilds: a sample of its episodes (the first, the last and two
spread evenly between, :func:`~causaltrace.datasets.split_check.sample_indices`) regenerated
from the manifest's config and each episode's index alone, byte for byte (prompt, spec, label
and statistics rows, the frozen table checksums of a materialized split, and the rebuild from
the stored spec that reading a lazy split does).

This is what lets a refactor of the engine or a domain go in without restamping the committed
manifests: the generator fingerprint they record is provenance, and ``causaltrace-generate``
over a split accepts another fingerprint when this same check passes. When this test fails, the
change alters what the committed splits hold: the failure names the first differing episode
and file; either the change is a bug, or the splits are regenerated on purpose (into new
directories, then moved in).

Each split is checked in a process whose numpy computes float math with the C library's
functions (``float_math.portable_env``): the committed splits were made so, and on a CPU with
AVX-512 numpy's own vector math would move the last bits of a few label values. On a CPU
without AVX2 the sample must reproduce to float rounding, not byte for byte
(``float_math.has_baseline_vector_math``). Two splits are checked at a time (the machine's two
cores).
"""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from causaltrace.datasets.float_math import portable_env

ROOT = Path(__file__).resolve().parents[2]
SPLITS = sorted(p for p in (ROOT / "data").iterdir() if (p / "manifest.json").exists())

CHECK = """
import json, sys, time
from causaltrace.core.files import json_load
from causaltrace.datasets.float_math import has_baseline_vector_math
from causaltrace.datasets.job import Job
from causaltrace.datasets.split_check import check_sample
root = sys.argv[1]
started = time.perf_counter()
job = Job.from_record(root, json_load(root + "/manifest.json")["config"])
check = check_sample(job)
print(json.dumps({**check.to_dict(), "avx2": has_baseline_vector_math(),
                  "seconds": time.perf_counter() - started}))
"""


def _check(split: Path) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", CHECK, str(split)],
        capture_output=True,
        text=True,
        timeout=600,
        env=portable_env(),
        cwd=ROOT,
    )
    if done.returncode != 0:
        return {"error": done.stderr[-3000:]}
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def checks() -> dict[str, dict]:
    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip((p.name for p in SPLITS), pool.map(_check, SPLITS), strict=True))


def test_every_committed_split_is_checked():
    names = {p.name for p in SPLITS}
    assert {"ads_test", "ads_easy", "ads_medium", "ads_hard", "ads_expert"} <= names
    assert "services_test" in names


@pytest.mark.slow
@pytest.mark.parametrize("split", SPLITS, ids=lambda p: p.name)
def test_a_sample_of_the_split_rebuilds_byte_for_byte(checks, split):
    result = checks[split.name]
    assert "error" not in result, result.get("error")
    assert len(result["episodes"]) == 4, result
    assert result["difference"] is None, (
        f"{split.name} no longer rebuilds: {result['difference']} (regenerated "
        f"{', '.join(result['episodes'])}). The change alters what this committed split holds."
    )
    if result["avx2"]:  # the vector math the splits were made with: every byte
        assert result["float_rounding"] == [], result["description"]
        assert result["byte_for_byte"]
    # Without AVX2 (x86-64-v2) the rows differ only in floats' last bits, within
    # FLOAT_TOLERANCE (rounding_only): reproduces, the assertion above on `difference`.
