"""Dataset generation: the same bytes whatever the number of workers, resume after a kill,
disjoint splits, the test split's composition, lazy and materialized episodes alike."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from omegaconf import OmegaConf

import causaltrace.conf
import causaltrace_domains.ads.conf
from causaltrace import load_domain
from causaltrace.core.seeds import episode_seed_sequence, split_key
from causaltrace.datasets.generation import Job, run
from causaltrace.datasets.reading import dataset_domain, load_labels, open_episode, rebuild_episode
from causaltrace.datasets.storage import DatasetLayout
from causaltrace.episodes.change_shares import attribute_changes
from causaltrace.episodes.composition import assignments
from causaltrace.errors import CausalTraceError

# The README's smoke split (its config, the default verifier) at half its size: 12 episodes in
# three shards of 4, enough for two workers, a kill between shards and a resume; half the
# generation time of these tests (each generates the split once or more).
N_SMOKE = 12
SMOKE = [
    "domain=ads_small",
    "dataset=ads_smoke",
    "progress=false",
    f"dataset.n_episodes={N_SMOKE}",
    f"dataset.composition.total={N_SMOKE}",
    "dataset.composition.sliced=8",
    "dataset.composition.two_d=3",
    "dataset.shard_size=4",
]
# The tests of the machinery (resume, rays, lazy rebuilds, partial writes) read no share: they
# run on the smoke split made with the committed splits' verifier (alert_only), a third of the
# default verifier's cost (it attributes every change of every accepted episode); the default
# verifier's own bytes are checked across workers by test_one_and_two_workers_write_the_same_bytes.
FAST = ("verifier=alert_only",)
ENGINE_CONF = os.path.dirname(causaltrace.conf.__file__)  # generate.yaml, verifier/...
ADS_CONF = os.path.dirname(causaltrace_domains.ads.conf.__file__)  # the ads presets


def generate_cli(out_dir: Path, *overrides: str, multirun: bool = False, wait: bool = True):
    args = [
        sys.executable,
        "-m",
        "causaltrace.apps.generate",
        *(["-m"] if multirun else []),
        *SMOKE,
        f"out_dir={out_dir}",
        *overrides,
    ]
    if not wait:
        return subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    done = subprocess.run(args, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def dataset_files(root: Path) -> dict[str, bytes]:
    """Every file of a dataset except Hydra's own run logs."""
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".hydra" not in p.parts
    }


@pytest.fixture(scope="module")
def one_worker(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("one") / "ds"
    generate_cli(out)
    return out


@pytest.fixture(scope="module")
def fast_worker(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("fast") / "ds"
    generate_cli(out, *FAST)
    return out


@pytest.mark.slow
def test_one_and_two_workers_write_the_same_bytes(one_worker, tmp_path):
    two = tmp_path / "two"
    generate_cli(two, "launcher=joblib", "num_workers=2", "worker_index=0,1", multirun=True)
    a, b = dataset_files(one_worker), dataset_files(two)
    assert a.keys() == b.keys()
    assert [k for k in a if a[k] != b[k]] == []
    assert "manifest.json" in a


@pytest.mark.slow
def test_resume_after_kill_mid_shard(fast_worker, tmp_path):
    out = tmp_path / "killed"
    proc = generate_cli(out, *FAST, wait=False)
    done_dir = out / "done"
    deadline = time.time() + 300
    while time.time() < deadline and not (done_dir.exists() and any(done_dir.iterdir())):
        time.sleep(0.05)
    time.sleep(0.3)  # well inside the next shard (a shard of 4 takes several seconds)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    finished = len(list(done_dir.iterdir()))
    assert 1 <= finished < 3, "the kill should land before the last shard"
    assert not (out / "manifest.json").exists()
    generate_cli(out, *FAST)
    assert dataset_files(out) == dataset_files(fast_worker)


def test_manifest_records_config_and_checksums(one_worker):
    import hashlib
    import json

    manifest = json.loads((one_worker / "manifest.json").read_text())
    assert manifest["n_episodes"] == N_SMOKE and manifest["split"] == "smoke"
    assert manifest["config"]["domain"]["preset"] == "small"
    for shard in manifest["shards"]:
        for rel, digest in shard["files"].items():
            assert hashlib.sha256((one_worker / rel).read_bytes()).hexdigest() == digest


def test_public_files_hold_no_label_or_seed(one_worker):
    layout = DatasetLayout(one_worker)
    labels = layout.all_labels()
    assert len(labels) == N_SMOKE and len({row["episode_id"] for row in labels}) == N_SMOKE
    names = None
    for row in layout.all_index():
        assert set(row) == {"episode_id", "prompt"}
        files = sorted(p.name for p in layout.episode_dir(row["episode_id"]).iterdir())
        names = names or files
        assert files == names  # the same files in every episode, whatever its cause
        for text in ("strength", "dataset_seed", '"onset"'):
            assert text not in row["prompt"]


@pytest.mark.slow
def test_lazy_and_materialized_episodes_are_byte_identical(fast_worker, tmp_path):
    lazy = tmp_path / "lazy"
    generate_cli(lazy, *FAST, "dataset.materialize=false")
    assert not (lazy / "public" / "episodes").exists()
    for episode in ("ads_smoke-000000", "ads_smoke-000006", "ads_smoke-000011"):
        rebuilt = open_episode(lazy, episode, cache_dir=tmp_path / "cache")
        stored = open_episode(fast_worker, episode)
        assert dataset_files(rebuilt) == dataset_files(stored), episode


def test_frozen_split_loads_the_same_after_the_generator_changes(one_worker, monkeypatch):
    before = dataset_files(open_episode(one_worker, "ads_smoke-000005"))

    def changed_generator(*args, **kwargs):
        raise AssertionError("opening a frozen episode must not run the generator")

    monkeypatch.setattr("causaltrace.datasets.reading.build_episode", changed_generator)
    monkeypatch.setattr("causaltrace.datasets.reading.build_visible", changed_generator)
    monkeypatch.setattr("causaltrace_domains.ads.domain.AdsDomain.render", changed_generator)
    assert dataset_files(open_episode(one_worker, "ads_smoke-000005")) == before


def test_splits_are_disjoint_by_construction():
    keys = {split_key(s) for s in ("train", "validation", "test", "smoke")}
    assert len(keys) == 4
    a = episode_seed_sequence(7, "train", 0, 0).generate_state(4)
    b = episode_seed_sequence(7, "test", 0, 0).generate_state(4)
    c = episode_seed_sequence(7, "train", 0, 1).generate_state(4)
    assert not (a == b).all() and not (a == c).all()


@pytest.mark.slow
def test_split_indices_do_not_overlap_in_data(tmp_path):
    """Same seed and index, different split: different episodes."""
    train, test = tmp_path / "train", tmp_path / "test"
    generate_cli(
        train,
        *FAST,
        "dataset.split=train",
        "dataset.n_episodes=4",
        "dataset.composition.total=4",
        "dataset.composition.sliced=2",
        "dataset.composition.two_d=1",
    )
    generate_cli(
        test,
        *FAST,
        "dataset.split=test",
        "dataset.n_episodes=4",
        "dataset.composition.total=4",
        "dataset.composition.sliced=2",
        "dataset.composition.two_d=1",
    )
    for i in range(4):
        # One dataset name, two splits: the same ids, the episodes of two split seeds.
        a = (
            train / "public" / "episodes" / f"ads_smoke-{i:06d}" / "perf_daily.parquet"
        ).read_bytes()
        b = (
            test / "public" / "episodes" / f"ads_smoke-{i:06d}" / "perf_daily.parquet"
        ).read_bytes()
        assert a != b


def test_ads_test_composition_is_trace():
    cfg = OmegaConf.load(os.path.join(ADS_CONF, "dataset", "ads_test.yaml"))
    scm = load_domain("ads").scm
    plan = assignments(
        scm,
        OmegaConf.to_container(cfg.composition),
        split=cfg.split,
        dataset_seed=cfg.seed,
        n_episodes=cfg.n_episodes,
    )
    assert len(plan) == 235
    orders = Counter(a.slice_order for a in plan)
    assert orders[1] + orders[2] == 164 and orders[2] == 49 and orders[0] == 71
    per_cause = Counter(a.cause for a in plan)
    assert set(per_cause) == set(scm.intervention_points)
    assert max(per_cause.values()) - min(per_cause.values()) <= 4  # as even as the quotas allow


@pytest.mark.parametrize(
    ("section", "key", "message"),
    [
        ("dataset", "n_episode", "unknown key(s) ['n_episode']"),
        ("verifier", "snr_threshold", "unknown key(s) ['snr_threshold']"),
    ],
)
def test_malformed_config_names_the_key(section, key, message, tmp_path):
    cfg = OmegaConf.to_container(OmegaConf.load(os.path.join(ENGINE_CONF, "generate.yaml")))
    cfg["domain"] = {"name": "ads", "preset": "small"}
    cfg["dataset"] = OmegaConf.to_container(
        OmegaConf.load(os.path.join(ADS_CONF, "dataset", "ads_smoke.yaml"))
    )
    cfg["verifier"] = {}
    cfg["out_dir"] = str(tmp_path)
    cfg[section][key] = 1
    with pytest.raises(CausalTraceError) as info:
        Job.from_config(cfg)
    assert message in str(info.value)


def test_unknown_domain_key_is_named(tmp_path):
    cfg = {
        "out_dir": str(tmp_path),
        "domain": {"name": "ads", "preset": "small", "dayz": 3},
        "dataset": {"name": "x", "split": "x", "seed": 1, "n_episodes": 1},
    }
    with pytest.raises(CausalTraceError, match=r"unknown key\(s\) \['dayz'\]"):
        run(Job.from_config(cfg), show_progress=False)


@pytest.mark.slow
@pytest.mark.ray
def test_ray_tasks_write_the_same_bytes(fast_worker, tmp_path):
    pytest.importorskip("ray", reason="the Ray path needs the 'ray' extra (CI installs it)")
    out = tmp_path / "ray"
    generate_cli(out, *FAST, "executor=ray", "num_workers=2", "ray.num_cpus=2")
    a, b = dataset_files(fast_worker), dataset_files(out)
    assert a.keys() == b.keys() and [k for k in a if a[k] != b[k]] == []


def test_frozen_split_without_tables_rebuilds_or_fails_loudly(one_worker, tmp_path, monkeypatch):
    """A materialized split shipped without its tables (manifest, index, specs and labels only)
    rebuilds each episode and checks it against the frozen checksums."""
    import shutil

    shipped = tmp_path / "shipped"
    shutil.copytree(one_worker, shipped, ignore=shutil.ignore_patterns("episodes"))
    rebuilt = open_episode(shipped, "ads_smoke-000004")
    assert dataset_files(rebuilt) == dataset_files(one_worker / "public/episodes/ads_smoke-000004")

    from causaltrace_domains.ads.domain import AdsDomain

    original = AdsDomain.task_prompt
    monkeypatch.setattr(AdsDomain, "task_prompt", lambda self, t: original(self, t) + " ")
    with pytest.raises(CausalTraceError, match=r"prompt.txt.*generator changed"):
        open_episode(shipped, "ads_smoke-000007")


@pytest.mark.slow
def test_partial_writes_of_a_killed_shard_are_cleared(fast_worker, tmp_path):
    """A kill in the middle of an atomic write leaves a temporary file beside its target; the
    re-run of that shard removes it (and the manifest's writer removes a killed manifest
    write's), so the finished dataset has no extra file."""
    import shutil

    out = tmp_path / "partial"
    shutil.copytree(fast_worker, out, ignore=shutil.ignore_patterns(".hydra"))
    (out / "done" / "shard-00001.json").unlink()
    (out / "manifest.json").unlink()
    stale = [
        out / "private" / "labels" / ".shard-00001.jsonl.abc123.tmp",
        out / "public" / "episodes" / "ads_smoke-000005" / ".perf_daily.parquet.x1.tmp",  # shard 1
        out / ".manifest.json.k9x2.tmp",  # a kill while the last worker wrote the manifest
    ]
    for path in stale:
        path.write_text("half a file")
    generate_cli(out, *FAST)
    assert not any(path.exists() for path in stale)
    assert dataset_files(out) == dataset_files(fast_worker)


@pytest.mark.slow
def test_concurrent_lazy_opens_see_a_complete_episode(fast_worker, tmp_path, monkeypatch):
    """Rollouts of one prompt open the same lazy episode at once. An opener that arrives while
    another is still writing must get the complete file set, never a half-written directory:
    the rebuild is renamed into place whole. Here the second opener arrives after the first has
    written one file; both see every file, and no staging directory is left."""
    from causaltrace.datasets import reading, storage

    lazy = tmp_path / "lazy"
    generate_cli(lazy, *FAST, "dataset.materialize=false")
    cache = tmp_path / "cache"
    expected = dataset_files(fast_worker / "public/episodes/ads_smoke-000002")
    seen = []
    real_write = storage.atomic_write_bytes

    def write_then_let_another_opener_in(path, data):
        real_write(path, data)
        if not seen:  # once: a second opener arrives mid-write
            seen.append(None)
            seen.append(dataset_files(open_episode(lazy, "ads_smoke-000002", cache_dir=cache)))

    monkeypatch.setattr(storage, "atomic_write_bytes", write_then_let_another_opener_in)
    first = dataset_files(reading.open_episode(lazy, "ads_smoke-000002", cache_dir=cache))
    assert seen[1] == expected and first == expected
    assert sorted(p.name for p in cache.iterdir()) == ["ads_smoke-000002"]


def test_table_bytes_are_what_pandas_writes():
    """Episode tables are written by pyarrow directly, byte-identical to pandas' to_parquet
    (frozen splits were checksummed with it), for every column kind the domains render:
    categoricals, datetimes, strings, ints, floats with NaN."""
    import io

    import pandas as pd

    from causaltrace.datasets.storage import table_bytes

    frame = pd.DataFrame(
        {
            "date": pd.to_datetime(["2026-01-01", "2026-01-02", "2026-01-02"]).astype(
                "datetime64[s]"
            ),
            "campaign": pd.Categorical(["a", "b", "a"], categories=["a", "b", "c"]),
            "competitor": ["you", "x", "y"],
            "clicks": [1, 2, 3],
            "share": [0.5, float("nan"), 0.25],
        }
    )
    buffer = io.BytesIO()
    frame.to_parquet(buffer, engine="pyarrow", compression="zstd", index=False)
    assert table_bytes(frame) == buffer.getvalue()


def test_a_pandas_patch_release_is_not_a_generator_change(tmp_path):
    """A pandas release renames only the version in a Parquet file's metadata (ads_test's
    frozen files, written by pandas 3.1.1, differed from a 3.1.2 rebuild in nothing else).
    ``written_by`` writes the metadata as the recorded libraries did: with the running
    versions it changes no byte, with other versions it names them and keeps the data
    (reading.open_episode and split_check write rebuilds this way; tests/apps's committed
    splits read through it)."""
    import io
    import json

    import pandas as pd
    import pyarrow
    import pyarrow.parquet as pq

    from causaltrace.datasets.storage import table_bytes

    frame = pd.DataFrame({"campaign": pd.Categorical(["a", "b"]), "clicks": [1, 2]})
    running = {"pandas": pd.__version__, "pyarrow": pyarrow.__version__}
    assert table_bytes(frame, running) == table_bytes(frame)
    other = table_bytes(frame, {"pandas": "0.0.1", "pyarrow": "0.0.2"})
    assert other != table_bytes(frame)
    metadata = json.loads(pq.read_schema(io.BytesIO(other)).metadata[b"pandas"])
    assert metadata["pandas_version"] == "0.0.1" and metadata["creator"]["version"] == "0.0.2"
    assert pd.read_parquet(io.BytesIO(other)).equals(
        pd.read_parquet(io.BytesIO(table_bytes(frame)))
    )


def _leaves(value, path=""):
    if isinstance(value, dict):
        return {
            k: v for key, sub in value.items() for k, v in _leaves(sub, f"{path}/{key}").items()
        }
    return {path: value}


def test_labels_hold_every_change_that_moved_the_page(one_worker):
    """With the default verifier every accepted label records each background change's share of
    each shown alert: none explains 0.10 of one (in the alert's direction), the signal causes
    make at least half of the paged one with the background counted, and the shares rebuild
    from the episode's spec alone (a sample of three episodes, every world simulated again)."""
    labels = load_labels(one_worker)
    assert labels
    for episode_id, label in labels.items():
        record = label["extra"]["change_shares"]
        for change in record["background"].values():
            assert max(change["shares"].values(), default=0.0) < 0.10, (episode_id, change)
        assert max(map(abs, record["residual"].values())) <= 0.05
        if label["group"] != "no-signal":
            paged = record["alerts"][0]
            causes = [label, *label.get("also", [])]
            assert sum(c["extra"]["alert_shares"][paged] for c in causes) >= 0.5
    domain = dataset_domain(one_worker)
    for episode_id in sorted(labels)[:3]:
        again = attribute_changes(domain, rebuild_episode(one_worker, episode_id)).to_dict()
        recorded = labels[episode_id]["extra"]["change_shares"]
        assert _leaves(again) == pytest.approx(_leaves(recorded), abs=1e-12)
