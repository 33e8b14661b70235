"""A split's identity is what it holds (its config and its episodes' checksums), not the hash of
the source that wrote it: a re-run or a resume with another generator fingerprint regenerates a
seed-free sample of the episodes from the config and each index alone, and goes on only if they
come out byte for byte (float rounding from the CPU's vector math aside, reported); otherwise
it refuses, naming the split, the first differing episode and file, and what to do. Nothing is
written by a check.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from causaltrace.core.files import DataFileError, json_load
from causaltrace.datasets import float_math, split_check
from causaltrace.datasets import job as job_module
from causaltrace.datasets.content import dataset_content
from causaltrace.datasets.float_math import portable_env, rounding_only
from causaltrace.datasets.generation import Job, run
from causaltrace.datasets.job import DatasetMismatchError
from causaltrace.datasets.split_check import check_existing, check_sample, sample_indices
from causaltrace.episodes import acceptance

ROOT = Path(__file__).resolve().parents[2]


def _config(out: Path) -> dict:
    return {
        "out_dir": str(out),
        "domain": {"name": "example", "days": 56},
        "dataset": {
            "name": "ex_identity",
            "split": "identity",
            "seed": 5,
            "n_episodes": 6,
            "shard_size": 3,
            "max_attempts": 80,
            "materialize": True,
            "composition": {"kind": "prior", "concurrent": 0.5},
        },
        "verifier": {},
    }


def files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("identity") / "ds"
    summary = run(Job.from_config(_config(out)), show_progress=False)
    assert summary["manifest_written"] and not summary["already_finished"]
    return out


@pytest.fixture
def copy(finished, tmp_path) -> Path:
    out = tmp_path / "ds"
    shutil.copytree(finished, out)
    return out


@pytest.fixture
def other_generator(monkeypatch):
    """This process's generator fingerprint differs from every recorded one (a refactor)."""
    real = job_module.generator_fingerprint

    def refactored(name):
        return {**real(name), "code_sha256": "f" * 64}

    monkeypatch.setattr(job_module, "generator_fingerprint", refactored)


# -- the sample --------------------------------------------------------------------------------
def test_the_sample_is_first_last_and_spread_evenly_without_a_seed():
    assert sample_indices(range(235)) == [0, 78, 156, 234]
    assert sample_indices(range(96)) == [0, 32, 63, 95]
    assert sample_indices([9, 3, 5]) == [3, 5, 9]  # all of them when there are few
    assert sample_indices(reversed(range(50, 150))) == sample_indices(range(50, 150))
    assert sample_indices([]) == []


# -- content ----------------------------------------------------------------------------------
def test_the_manifest_states_the_content_digest(finished):
    manifest = json_load(finished / "manifest.json")
    assert manifest["content_sha256"] == dataset_content(finished)
    assert "generator" in manifest  # provenance, kept


def test_the_digest_follows_the_content_not_the_code(copy):
    before = dataset_content(copy)
    labels = copy / "private" / "labels" / "shard-00001.jsonl"
    text = labels.read_text()
    labels.write_text(text.replace('"onset": ', '"onset": 1', 1))
    with pytest.raises(DataFileError, match="does not match the checksum"):
        dataset_content(copy)  # a row file is checked against its done record first
    labels.write_text(text)
    assert dataset_content(copy) == before


def test_a_manifest_config_reads_back_to_a_job(finished):
    for root in (finished, ROOT / "data" / "ads_hard", ROOT / "data" / "services_test"):
        config = json_load(root / "manifest.json")["config"]
        job = Job.from_record(root, config)
        assert job.config_record() == config
        assert job.identity()["config"] == config


# -- a finished split, another fingerprint ----------------------------------------------------
def test_a_finished_split_with_another_fingerprint_is_finished_and_untouched(copy, other_generator):
    before = files(copy)
    summary = run(Job.from_config(_config(copy)), show_progress=False)
    assert summary["already_finished"] and summary["attempts"] == 0 and summary["episodes"] == 0
    (check,) = summary["verified"]
    assert check["reproduces"] and check["episodes"] == [
        "example-ex_identity-000000",
        "example-ex_identity-000002",
        "example-ex_identity-000003",
        "example-ex_identity-000005",
    ]
    assert files(copy) == before  # the manifest keeps the generator that made the split
    assert summary["content_sha256"] == json_load(copy / "manifest.json")["content_sha256"]


def test_the_same_fingerprint_checks_nothing(finished, monkeypatch):
    def no_regeneration(*args, **kwargs):
        raise AssertionError("a split recorded with this generator is not regenerated")

    monkeypatch.setattr(split_check, "check_sample", no_regeneration)
    assert check_existing(Job.from_config(_config(finished))) == []


def test_a_generator_that_makes_other_bytes_is_refused_naming_episode_and_file(
    copy, other_generator, monkeypatch
):
    from causaltrace_domains.example.domain import ExampleDomain

    original = ExampleDomain.task_prompt
    monkeypatch.setattr(ExampleDomain, "task_prompt", lambda self, t: original(self, t) + " ")
    before = files(copy)
    with pytest.raises(DatasetMismatchError) as info:
        run(Job.from_config(_config(copy)), show_progress=False)
    message = str(info.value)
    assert f"{copy} (split ex_identity) holds a finished dataset made by another generator" in (
        message
    )
    assert (
        "example-ex_identity-000000 (index 0): public/index/shard-00000.jsonl: its row differs"
        in message
    )
    assert "prompt: recorded" in message
    assert f"generate into a new out_dir (e.g. out_dir={copy}_regenerated)" in message
    assert files(copy) == before


def test_a_changed_acceptance_is_a_difference_of_the_spec(copy, other_generator, monkeypatch):
    """The sample is regenerated, rejected attempts included, not rebuilt from its stored spec:
    a verifier that now rejects the attempt it accepted changes the episode, and the check
    names the spec row."""
    from causaltrace.datasets.reading import find_spec
    from causaltrace.episodes.verify import Verdict

    accepted = {
        f"example-ex_identity-{i:06d}": find_spec(copy, f"example-ex_identity-{i:06d}").attempt
        for i in range(6)
    }
    real = acceptance.verify_episode

    def stricter(domain, episode, verifier):
        if episode.spec.attempt == accepted[episode.spec.episode_id]:
            return Verdict(False, ("stricter",), {})
        return real(domain, episode, verifier)

    monkeypatch.setattr(acceptance, "verify_episode", stricter)
    check = check_sample(Job.from_config(_config(copy)))
    assert not check.reproduces and check.episodes == ("example-ex_identity-000000",)
    assert check.difference.file == "private/specs/shard-00000.jsonl"
    assert "attempt: recorded" in check.difference.what or "no attempt" in check.difference.what


def test_float_rounding_is_reported_and_anything_more_is_refused(
    copy, other_generator, monkeypatch
):
    real = acceptance.verifier_measurements

    def nudged(by):
        def measurements(label, verdict, typical):
            measured = real(label, verdict, typical)
            if measured["snr"] is not None:
                measured["snr"] = by(measured["snr"])
            return measured

        return measurements

    monkeypatch.setattr(acceptance, "verifier_measurements", nudged(lambda x: math.nextafter(x, 9)))
    job = Job.from_config(_config(copy))
    (check,) = check_existing(job)
    assert check.reproduces and not check.byte_for_byte
    assert "private/labels/shard-00000.jsonl (1 value" in check.rounding[0]
    assert "the same but for the last bits of float values" in check.describe()

    monkeypatch.setattr(acceptance, "verifier_measurements", nudged(lambda x: x * (1 + 1e-9)))
    with pytest.raises(DatasetMismatchError, match=r"private/labels/shard-00000\.jsonl: its row"):
        check_existing(job)


def test_rounding_only_counts_floats_and_nothing_else():
    a = {"x": [1.0, 0.2994861455952245], "s": "a", "n": 3}
    b = {"x": [1.0, 0.2994861455952247], "s": "a", "n": 3}
    count, worst = rounding_only(a, b)
    assert count == 1 and 0 < worst < 1e-15
    assert rounding_only(a, {**b, "s": "b"}) is None
    assert rounding_only(a, {**b, "n": 3.0}) is None  # an int that became a float
    assert rounding_only({"x": 1.0}, {"x": 1.0 + 1e-9}) is None
    assert rounding_only({"x": [1.0]}, {"x": [1.0, 2.0]}) is None
    assert rounding_only({"x": float("nan")}, {"x": float("nan")}) == (0, 0.0)


def test_portable_env_disables_only_the_vector_math_targets():
    env = portable_env({"PATH": "/bin", "NPY_DISABLE_CPU_FEATURES": "AVX512_SPR"})
    assert env["PATH"] == "/bin"
    tokens = env["NPY_DISABLE_CPU_FEATURES"].split()
    assert tokens[0] == "AVX512_SPR" and len(tokens) == len(set(tokens))
    assert all(t == "X86_V4" or t.startswith("AVX512") for t in tokens)
    # OpenBLAS's AVX2 kernels where the CPU has AVX2; a value the caller chose is kept
    has_avx2 = bool(float_math._dispatch()[1].get("AVX2"))
    assert env.get("OPENBLAS_CORETYPE") == ("Haswell" if has_avx2 else None)
    assert portable_env({"OPENBLAS_CORETYPE": "Zen"}).get("OPENBLAS_CORETYPE") == "Zen"


def test_the_command_runs_in_the_portable_env():
    """``python -m causaltrace.datasets.float_math CMD`` runs CMD with portable_env's variables
    (how the committed splits are generated); without a command it prints its usage and fails."""
    show = "import os; print(os.environ.get('OPENBLAS_CORETYPE'), os.environ.get('X_KEPT'))"
    done = subprocess.run(
        [sys.executable, "-m", "causaltrace.datasets.float_math", sys.executable, "-c", show],
        env={**os.environ, "X_KEPT": "yes"},
        capture_output=True,
        text=True,
        check=True,
    )
    expected = portable_env().get("OPENBLAS_CORETYPE")
    assert done.stdout.split() == [str(expected), "yes"]
    bare = subprocess.run(
        [sys.executable, "-m", "causaltrace.datasets.float_math"], capture_output=True, text=True
    )
    assert (
        bare.returncode == 2 and "usage: python -m causaltrace.datasets.float_math" in bare.stderr
    )


def _baseline_in(env: dict[str, str]) -> bool:
    code = "from causaltrace.datasets.float_math import has_baseline_vector_math as h; print(h())"
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    return done.stdout.strip() == "True"


def test_the_baseline_vector_math_is_on_unless_avx2_targets_are_off():
    cpu_has_avx2 = bool(float_math._dispatch()[1].get("AVX2"))
    # portable_env switches off only AVX-512 targets: the AVX2 baseline stays where the CPU has it
    assert _baseline_in(portable_env()) is cpu_has_avx2
    off = portable_env({**os.environ, "NPY_DISABLE_CPU_FEATURES": "X86_V3"})
    assert _baseline_in(off) is False


def test_a_damaged_row_file_is_named(copy, other_generator):
    stats = copy / "private" / "stats" / "shard-00000.json"
    stats.write_text(stats.read_text().replace('"attempts": ', '"attempts": 1', 1))
    with pytest.raises(DataFileError, match=rf"{stats} does not match the checksum"):
        run(Job.from_config(_config(copy)), show_progress=False)


# -- resuming with another fingerprint --------------------------------------------------------
def test_a_resume_with_another_fingerprint_finishes_the_same_bytes(finished, copy, other_generator):
    (copy / "manifest.json").unlink()
    (copy / "done" / "shard-00001.json").unlink()
    summary = run(Job.from_config(_config(copy)), show_progress=False)
    assert not summary["already_finished"] and summary["shards"] == [1]
    (check,) = summary["verified"]
    assert check["episodes"] == [
        "example-ex_identity-000000",
        "example-ex_identity-000001",
        "example-ex_identity-000002",
    ]
    done_again = json_load(copy / "done" / "shard-00001.json")
    assert done_again["generation"]["generator"]["code_sha256"] == "f" * 64
    old, new = files(finished), files(copy)
    assert {k for k in old if old[k] != new.get(k)} == {
        "done/shard-00001.json",  # the shard made now records this generator
        "manifest.json",  # ... and so does the manifest, whose content digest is the same
    }
    assert (
        json_load(copy / "manifest.json")["content_sha256"]
        == json_load(finished / "manifest.json")["content_sha256"]
    )


def test_a_resume_with_a_generator_that_makes_other_bytes_is_refused(
    copy, other_generator, monkeypatch
):
    from causaltrace_domains.example.domain import ExampleDomain

    (copy / "manifest.json").unlink()
    (copy / "done" / "shard-00001.json").unlink()
    original = ExampleDomain.task_prompt
    monkeypatch.setattr(ExampleDomain, "task_prompt", lambda self, t: original(self, t) + " ")
    with pytest.raises(DatasetMismatchError, match=r"holds done shards made by another generator"):
        run(Job.from_config(_config(copy)), show_progress=False)
    assert not (copy / "done" / "shard-00001.json").exists()


def test_the_summary_is_json(finished):
    summary = run(Job.from_config(_config(finished)), show_progress=False)
    assert json.loads(json.dumps(summary))["already_finished"] is True
