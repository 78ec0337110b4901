"""The Ray engine: pre-caching and export on a local Ray cluster write the same bytes as the
local engine (cache entries, packs, shards, manifest), resume, and report failures with their
sample ids; a dataset whose rows live under several roots (a merged dataset) works throughout.
One local Ray cluster (2 CPUs) serves every test here (``ray_fixture``)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from radharmony.data.dataset import BaseRadiologicalDataset
from radharmony.data.precache import pre_cache
from radharmony.errors import ImageReadError, RadHarmonyError
from radharmony.export import ExportError, decode_sample, to_webdataset
from radharmony.fake.images import synthetic_cxr, write_png
from radharmony.imaging.pipeline import DefaultTransform
from radharmony.spec import DatasetSpec
from ray_fixture import ray_cluster  # noqa: F401  (the session fixture)

SPEC = DatasetSpec(key="merged_demo", title="Two sources under their own roots",
                   extra_cols=("source",), outputs=frozenset({"report"}), root_col="source")
#: (source, relative path, height, width): nested folders, both orientations, 13 images
IMAGES = [("alpha", f"p{i}/s{i}/img{i}.png", 96 + 8 * i, 120) for i in range(7)] + \
         [("beta", f"files/{i:03d}.png", 140, 100 + 6 * i) for i in range(6)]


class MergedDemo(BaseRadiologicalDataset):
    """Rows of two sources, each under its own root, with a ``source`` output."""

    def add_outputs(self, index, sample, letterbox):
        super().add_outputs(index, sample, letterbox)
        sample["source"] = self.harmonized_df[SPEC.root_col].iat[index]


def write_roots(base: Path) -> dict[str, Path]:
    rng = np.random.default_rng(7)
    roots = {"alpha": base / "alpha_root", "beta": base / "beta_root" / "png"}
    for source, rel, h, w in IMAGES:
        write_png(roots[source] / rel, synthetic_cxr(h, w, rng=rng))
    return roots


def merged(roots: dict[str, Path], cache_dir, **kw) -> MergedDemo:
    df = pd.DataFrame({"patient_id": [f"{s[0]}{i}" for i, (s, *_) in enumerate(IMAGES)],
                       "study_id": [f"st{i}" for i in range(len(IMAGES))],
                       "image_path": [rel for _, rel, _, _ in IMAGES],
                       "view_position": ["PA"] * len(IMAGES),
                       "report": [f"report {i}" for i in range(len(IMAGES))],
                       "source": [s for s, *_ in IMAGES]})
    return MergedDemo(None, harmonized_df=df, spec=SPEC, image_roots=roots,
                      cache_dir=cache_dir, output_report=True, dtype=torch.float32, **kw)


@pytest.fixture(scope="module", autouse=True)
def ship_this_module():
    """Ray workers cannot import this test module: send its classes (MergedDemo) by value, as
    cloudpickle does for a script's own classes."""
    try:
        from ray import cloudpickle
    except ImportError:  # the tests that need Ray skip
        yield
        return
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    yield
    cloudpickle.unregister_pickle_by_value(sys.modules[__name__])


@pytest.fixture(scope="module")
def roots(tmp_path_factory) -> dict[str, Path]:
    return write_roots(tmp_path_factory.mktemp("merged"))


@pytest.fixture(scope="module")
def broken_roots(tmp_path_factory) -> tuple[dict[str, Path], str]:
    """The same images with one truncated (sample id returned)."""
    roots = write_roots(tmp_path_factory.mktemp("merged_broken"))
    bad = roots["beta"] / IMAGES[9][1]
    bad.write_bytes(bad.read_bytes()[:200])
    return roots, "merged_demo:files/002"


def files_under(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (relative path -> bytes)."""
    return {str(p.relative_to(folder)): p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file()}


# -- pre-cache ------------------------------------------------------------------------------------
@pytest.mark.parametrize("shared_fs", [None, False])  # None: workers write (local cluster)
def test_ray_pre_cache_writes_the_local_pack_byte_for_byte(ray_cluster, roots, tmp_path,
                                                           shared_fs):
    local = pre_cache(merged(roots, tmp_path / "local"), progress=False)
    ds = merged(roots, tmp_path / "ray")
    if shared_fs is None:  # the dataset's own method, default batches
        assert ds.pre_cache(engine="ray", progress=False) == local.keys
    else:
        report = pre_cache(ds, engine="ray", progress=False, batch_size=4,
                           shared_fs=shared_fs)
        assert (report.images, report.cached, report.failed) == (13, 13, 0)
        assert report.keys == local.keys
    want, got = files_under(tmp_path / "local"), files_under(tmp_path / "ray")
    assert [k for k in want if k.endswith(".rhp")] and list(got) == list(want)
    assert all(got[k] == want[k] for k in want)
    for i in (0, 12):  # and what is read back is the sample
        assert torch.equal(ds[i]["img"], merged(roots, None)[i]["img"])


def test_failures_are_reported_and_loose_entries_match_byte_for_byte(ray_cluster,
                                                                     broken_roots, tmp_path):
    roots, bad_id = broken_roots
    local = pre_cache(merged(roots, tmp_path / "local"), progress=False, keep_going=True)
    ray_report = pre_cache(merged(roots, tmp_path / "ray"), engine="ray", progress=False,
                           keep_going=True, batch_size=3, shared_fs=False)
    assert (ray_report.images, ray_report.cached, ray_report.failed) == (13, 12, 1)
    assert ray_report.first_failures == local.first_failures
    assert ray_report.first_failures[0]["sample_id"] == bad_id
    assert "002.png" in ray_report.first_failures[0]["detail"]
    want, got = files_under(tmp_path / "local"), files_under(tmp_path / "ray")
    assert len([k for k in want if k.endswith(".rhc")]) == 12  # not packed: one failed
    assert got == want


def test_a_failure_without_keep_going_names_the_sample(ray_cluster, broken_roots, tmp_path):
    roots, bad_id = broken_roots
    with pytest.raises(ImageReadError, match=f"Sample {bad_id}"):
        pre_cache(merged(roots, tmp_path / "c"), engine="ray", progress=False, batch_size=2)


def test_resume_does_not_redo_finished_images(ray_cluster, broken_roots, tmp_path, capsys):
    roots, _ = broken_roots
    ds = merged(roots, tmp_path / "c")
    for i in range(5):  # finished earlier (e.g. an interrupted run)
        ds.load_image(i)
    before = {f: (f.stat().st_ino, f.stat().st_mtime_ns)
              for f in (tmp_path / "c").rglob("*.rhc")}
    assert len(before) == 5
    report = pre_cache(ds, engine="ray", keep_going=True, batch_size=4)
    assert (report.cached, report.failed) == (12, 1)
    assert "8/8" in capsys.readouterr().err  # 13 images - 5 cached = 8 submitted
    for f, ident in before.items():
        assert (f.stat().st_ino, f.stat().st_mtime_ns) == ident  # not rewritten
    assert len(list((tmp_path / "c").rglob("*.rhc"))) == 12


class FailsOnBeta(DefaultTransform):
    """A pipeline whose encode crashes (not a RadHarmonyError) on the 'beta' root's images."""

    def encode(self, path):
        if "beta_root" in str(path):
            raise RuntimeError("decoder crashed")
        return super().encode(path)


def test_a_crashed_task_fails_every_image_of_its_batch_by_sample_id(ray_cluster, roots,
                                                                   tmp_path):
    ds = merged(roots, tmp_path / "c", transform=FailsOnBeta())
    report = pre_cache(ds, engine="ray", progress=False, keep_going=True, batch_size=4)
    # batches [0:4] [4:8] [8:12] [12]: images 7-12 are beta's, so batches 2-4 crash whole
    assert (report.cached, report.failed) == (4, 9)
    assert [f["sample_id"] for f in report.first_failures] == list(ds.sample_ids[4:13])[:10]
    assert all("Ray task failed" in f["detail"] and "decoder crashed" in f["detail"]
               for f in report.first_failures)
    assert not list((tmp_path / "c").rglob("*.rhp"))  # nothing packed while images fail


def test_entries_a_worker_wrote_out_of_the_drivers_sight_stop_the_run(ray_cluster, roots,
                                                                      tmp_path, monkeypatch):
    from radharmony.imaging.cache import ImageCache

    ds = merged(roots, tmp_path / "c")
    monkeypatch.setattr(ImageCache, "has", lambda self, key: False)  # driver-side only
    with pytest.raises(RadHarmonyError, match="shared_fs=False"):
        pre_cache(ds, engine="ray", progress=False, shared_fs=True)


def test_engine_and_options_are_checked(roots, tmp_path):
    ds = merged(roots, tmp_path / "c")
    with pytest.raises(RadHarmonyError, match="engine must be one of"):
        pre_cache(ds, engine="spark")
    with pytest.raises(RadHarmonyError, match="need engine='ray'"):
        pre_cache(ds, address="auto")
    with pytest.raises(ExportError, match="engine must be one of"):
        to_webdataset(ds, tmp_path / "out", engine="dask")


def test_missing_ray_names_the_extra(roots, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    ds = merged(roots, tmp_path / "c")
    with pytest.raises(RadHarmonyError, match=r"radharmony\[ray\]"):
        pre_cache(ds, engine="ray", progress=False)
    with pytest.raises(RadHarmonyError, match=r"radharmony\[ray\]"):
        to_webdataset(ds, tmp_path / "out", engine="ray", progress=False)


# -- export ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("shared_fs", [None, False])
def test_ray_export_is_byte_identical_to_the_local_writer(ray_cluster, roots, tmp_path,
                                                          shared_fs):
    wds = pytest.importorskip("webdataset")
    ds = merged(roots, tmp_path / "cache")
    local = to_webdataset(ds, tmp_path / "local", shard_size=4, progress=False)
    on_ray = to_webdataset(merged(roots, tmp_path / "cache2"), tmp_path / "ray", shard_size=4,
                           progress=False, engine="ray", shared_fs=shared_fs)
    assert on_ray == local
    assert [s["count"] for s in local["shards"]] == [4, 4, 4, 1]
    want, got = files_under(tmp_path / "local"), files_under(tmp_path / "ray")
    assert list(got) == list(want) and all(got[k] == want[k] for k in want)
    urls = [str(tmp_path / "ray" / s["name"]) for s in on_ray["shards"]]
    back = [decode_sample(raw, dtype=torch.float32)
            for raw in wds.WebDataset(urls, shardshuffle=False, empty_check=False)]
    assert [b["source"] for b in back] == [s for s, *_ in IMAGES]
    for i in (0, 7, 12):
        ref = ds[i]
        assert list(back[i]) == list(ref) and torch.equal(back[i]["img"], ref["img"])
        assert (back[i]["sample_id"], back[i]["report"]) == (ref["sample_id"], ref["report"])


def test_ray_export_resumes_and_reports_failures(ray_cluster, broken_roots, tmp_path):
    roots, bad_id = broken_roots
    ds = merged(roots, None)
    with pytest.warns(Warning, match=bad_id):
        first = to_webdataset(ds, tmp_path / "out", shard_size=4, progress=False,
                              engine="ray", on_error="skip")
    assert [f["sample_id"] for f in first["failures"]] == [bad_id]
    kept = tmp_path / "out" / first["shards"][0]["name"]
    ident = (kept.stat().st_ino, kept.stat().st_mtime_ns)
    with pytest.raises(ExportError, match=bad_id):  # the failed shard is redone, fails again
        to_webdataset(ds, tmp_path / "out", shard_size=4, progress=False, engine="ray")
    assert (kept.stat().st_ino, kept.stat().st_mtime_ns) == ident  # intact shard kept


# -- the command line -----------------------------------------------------------------------------
def test_cache_and_export_commands_run_on_ray(ray_cluster, tmp_path, capsys):
    from radharmony import cli
    from radharmony.fake import write_xraydar

    root = write_xraydar(tmp_path / "x", n=5, sizes=(120, 100))
    code = cli.main(["cache", "xraydar_multimodal", "--root", str(root), "--cache-dir",
                     str(tmp_path / "cache"), "--engine", "ray", "--json", "-q"])
    out = capsys.readouterr().out
    assert code == 0 and '"engine": "ray"' in out and '"cached": 5' in out
    assert list((tmp_path / "cache").rglob("*.rhp"))
    code = cli.main(["export", "xraydar_multimodal", "--root", str(root), "-o",
                     str(tmp_path / "out"), "--shard-size", "2", "--engine", "ray", "-q"])
    assert code == 0 and "exported 5 samples in 3 shards" in capsys.readouterr().out
    assert cli.main(["export", "xraydar_multimodal", "--root", str(root), "-o",
                     str(tmp_path / "o2"), "--address", "auto", "-q"]) == 2
