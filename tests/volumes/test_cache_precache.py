"""Pre-caching volumes: local processes and Ray write the same entries, resume, and report
failures with their inputs."""

from __future__ import annotations

import sys
import uuid

import numpy as np
import pytest

from radharmony.errors import RadHarmonyError
from radharmony.volumes import Volume
from radharmony.volumes.cache import VolumeCache
from radharmony.volumes.precache import VolumeJob, pre_cache_volumes
from radharmony.volumes.presets import Preset, preset_array
from ray_fixture import ray_cluster  # noqa: F401  (the session fixture)

pytest.importorskip("blosc2")
SMALL = Preset("small", spacing=(2.0, 2.0, 2.0), size=(16, 24, 24))
AFFINE = np.array([[0, 0, 0.8, 0], [0, 0.8, 0, 0], [2.5, 0, 0, 0], [0, 0, 0, 1.0]])


class CountedLoader:
    """A picklable loader that leaves one marker file per call (counted across processes)."""

    def __init__(self, seed: int, markers, fail: bool = False):
        self.seed, self.markers, self.fail = seed, markers, fail

    def __call__(self) -> Volume:
        (self.markers / f"{self.seed}-{uuid.uuid4().hex}").touch()
        if self.fail:
            raise RadHarmonyError(f"volume {self.seed} is truncated", fix="download it again")
        array = np.random.default_rng(self.seed).integers(-1024, 1500, (12, 30, 28))
        return Volume.from_array(array.astype(np.int16), AFFINE)


def _jobs(tmp_path, n=3, fail=()):
    markers = tmp_path / "markers"
    markers.mkdir(exist_ok=True)
    jobs = []
    for i in range(n):
        f = tmp_path / f"ct{i}.nii.gz"
        f.write_bytes(bytes([i]))
        jobs.append(VolumeJob([str(f)], CountedLoader(i, markers, i in fail), {"reader": "x"}))
    return jobs, markers


def _calls(markers) -> int:
    return len(list(markers.iterdir()))


@pytest.mark.parametrize("num_workers", [0, 2])
def test_local_pre_cache_stores_everything_and_resumes(tmp_path, num_workers):
    jobs, markers = _jobs(tmp_path)
    cache = VolumeCache(tmp_path / "cache")
    report = pre_cache_volumes(cache, jobs, presets=[SMALL], num_workers=num_workers)
    assert (report.volumes, report.cached, report.skipped, report.failed) == (3, 3, 0, 0)
    assert _calls(markers) == 3 and len(list((tmp_path / "cache").rglob("*.b2nd"))) == 3
    assert len(list((tmp_path / "cache").rglob("*.raw"))) == 3       # the preset outputs
    again = pre_cache_volumes(cache, jobs, presets=[SMALL])
    assert again.skipped == 3 and _calls(markers) == 3
    got = preset_array(cache, SMALL, *jobs[1][:1], jobs[1].params, jobs[1].load)
    assert np.array_equal(got, SMALL.apply(jobs[1].load())) and _calls(markers) == 4


def test_failures_stop_the_run_or_are_collected(tmp_path):
    jobs, markers = _jobs(tmp_path, fail=(1,))
    cache = VolumeCache(tmp_path / "cache")
    with pytest.raises(RadHarmonyError, match=r"ct1.nii.gz could not be cached.*truncated"):
        pre_cache_volumes(cache, jobs)
    report = pre_cache_volumes(cache, jobs, keep_going=True)
    assert (report.cached, report.failed, report.ok) == (2, 1, False)
    assert report.first_failures[0]["inputs"] == [jobs[1].inputs[0]]
    assert "truncated" in report.first_failures[0]["detail"]
    with pytest.raises(RadHarmonyError, match="cache on disk"):
        pre_cache_volumes(VolumeCache(None, memory_bytes=1 << 20), jobs)


def test_ray_writes_the_same_entries(tmp_path, ray_cluster):  # noqa: F811
    from ray import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    try:
        jobs, markers = _jobs(tmp_path, fail=(2,))
        cache = VolumeCache(tmp_path / "cache")
        report = pre_cache_volumes(cache, jobs, presets=[SMALL], engine="ray", keep_going=True)
    finally:
        cloudpickle.unregister_pickle_by_value(sys.modules[__name__])
    assert (report.cached, report.failed) == (2, 1)
    local = VolumeCache(tmp_path / "local")
    pre_cache_volumes(local, jobs[:2], presets=[SMALL])
    ray_files = sorted(f.name for f in (tmp_path / "cache").rglob("*.*") if f.suffix in
                       (".b2nd", ".raw"))
    assert ray_files == sorted(f.name for f in (tmp_path / "local").rglob("*.*")
                               if f.suffix in (".b2nd", ".raw"))
    assert len(ray_files) == 4
    for name in ray_files:  # byte for byte
        assert next((tmp_path / "cache").rglob(name)).read_bytes() == \
            next((tmp_path / "local").rglob(name)).read_bytes()
