"""``radharmony mix view`` on 3-D records: a record whose image names a volume (``.nii.gz``,
``.npy``, ``.b2nd`` -- a volume cache entry -- or a DICOM folder) shows the three planes the
dataset viewer shows, one plane's slice per request.

The records are written by hand over one source root holding the same planted volume four
ways (and a PNG): int16 ``(D, H, W)`` = (6, 8, 10), voxel (d, h, w) = 10 * d + h - w, spacing
2.0 x 0.5 x 0.5 mm.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest

from radharmony.errors import RadHarmonyError
from radharmony.fake.volumes import slice_positions, write_dicom_series, write_nifti
from radharmony.mixture.records import fields_json, record_id
from radharmony.viewer.mixture import MixtureApp, make_mixture_server
from radharmony.viewer.volumes import is_volume_file, windowed
from radharmony.volumes.cache import VolumeCache
from radharmony.volumes.volume import Volume

import view_fixtures as vf

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
from test_viewer import _get, browser, serving  # noqa: E402,F401

SHAPE, SPACING = (6, 8, 10), (2.0, 0.5, 0.5)
FILES = {"nii": "ct/a.nii.gz", "npy": "ct/b.npy", "b2nd": "ct/c.b2nd", "dicom": "ct/series",
         "png": "ct/d.png"}


#: a grounded CT record's fields (ct_detect_findings): a nodule box in source canonical voxels
#: (x 1..4 along W, y 2..5 along H, z 0..4 along D) on the planted volume's grid
GROUNDED = {"boxes3d": [[1.0, 2.0, 0.0, 4.0, 5.0, 4.0]], "box_labels": ["nodule"],
            "frame3d": {"source_affine": np.diag([*SPACING, 1.0]).tolist(),
                        "affine": np.diag([*SPACING, 1.0]).tolist(), "shape": list(SHAPE)}}


def planted() -> np.ndarray:
    d, h, w = np.mgrid[0:SHAPE[0], 0:SHAPE[1], 0:SHAPE[2]]
    return (10 * d + h - w).astype(np.int16)


def _rec(key: str, rel: str, *, fields=None) -> dict:
    return {"record_id": record_id("ct", "report_generation", key), "task": "report_generation",
            "family": "reports", "source": "ct", "dataset": "ct_rate_train",
            "source_split": "train", "split": "train", "patient_id": f"ct:p-{key}",
            "study_id": f"s-{key}", "sample_id": f"ct_rate_train:{key}", "image_paths": [rel],
            "views": [None], "prompt": "Describe the findings of the chest CT.",
            "target": "FINDINGS: clear lungs.", "prompt_variant": 0,
            "fields": fields_json(fields or {})}


@pytest.fixture(scope="module")
def mixture(tmp_path_factory):
    root = tmp_path_factory.mktemp("ctsource")
    vol = planted()
    affine = np.diag([-SPACING[2], -SPACING[1], SPACING[0], 1.0])  # RAS: (i, j, k) = (W, H, D)
    write_nifti(root / FILES["nii"], vol.transpose(2, 1, 0), affine)
    np.save(root / FILES["npy"], vol)
    cache = VolumeCache(root / "cache")
    lps = np.diag([*SPACING, 1.0])
    cache.get([root / FILES["npy"]], {"planted": 1}, lambda: Volume.from_array(vol, lps))
    entry = next((root / "cache").rglob("*.b2nd"))
    shutil.copy(entry, root / FILES["b2nd"])
    # axial DICOM: rows toward P, columns toward L, slices 2 mm toward S: canonical as stored
    write_dicom_series(root / FILES["dicom"], vol + 1024, spacing=(0.5, 0.5),
                       positions=slice_positions(SHAPE[0], step=2.0))
    cv2.imwrite(str(root / FILES["png"]), np.full((8, 10), 128, np.uint8))
    records = [_rec("nii", FILES["nii"]), _rec("npy", FILES["npy"], fields={"spacing": SPACING}),
               _rec("b2nd", FILES["b2nd"]), _rec("dicom", FILES["dicom"]),
               _rec("png", FILES["png"]), _rec("boxed", FILES["nii"], fields=GROUNDED),
               _rec("other_grid", FILES["nii"],
                    fields={**GROUNDED, "frame3d": {**GROUNDED["frame3d"],
                                                    "shape": [12, 8, 10]}})]
    sources = {"ct": {"dataset": "ct_rate_train", "root": str(root.resolve()), "images": []}}
    return vf.write_mixture(tmp_path_factory.mktemp("mix") / "out", sources, records)


@pytest.fixture(scope="module")
def server(mixture):
    yield from serving(make_mixture_server(mixture, port=0))


def test_what_names_a_volume(tmp_path):
    (tmp_path / "series").mkdir()
    assert [is_volume_file(n, tmp_path / n) for n in
            ("a.nii", "a.NII.GZ", "a.npy", "a.b2nd", "series", "a.png", "a.dcm", "a.npz")] \
        == [True, True, True, True, True, False, False, False]


@pytest.mark.parametrize("key", ["nii", "npy", "b2nd", "dicom"])
def test_a_volume_record_has_three_planes(mixture, key):
    app = MixtureApp(mixture)
    rec = app.record(record_id=record_id("ct", "report_generation", key))
    [item] = rec["images"]
    assert item["error"] is None and rec["boxes"] == []
    assert item["volume"]["shape"] == [6, 8, 10]
    assert item["volume"]["spacing"] == pytest.approx(list(SPACING))
    assert (item["height"], item["width"]) == (8, 10)
    png = app.volume_png({"plane": "coronal", "slice": "3", "level": "0", "width": "255"},
                         record_id=rec["record_id"])
    got = cv2.imdecode(np.frombuffer(png, np.uint8), cv2.IMREAD_UNCHANGED)
    assert got.tolist() == windowed(planted()[::-1, 3, :], 0, 255).tolist()


def test_an_image_record_stays_an_image(mixture):
    app = MixtureApp(mixture)
    rid = record_id("ct", "report_generation", "png")
    [item] = app.record(record_id=rid)["images"]
    assert item["volume"] is None and (item["width"], item["height"]) == (224, 179)
    with pytest.raises(RadHarmonyError, match="is not a volume"):
        app.volume_png({"plane": "axial", "slice": "0"}, record_id=rid)


def test_volume_route_sends_one_plane(server):
    rid = record_id("ct", "report_generation", "b2nd")
    status, ctype, body = _get(server.url + f"record_volume.png?id={rid}&j=0&plane=sagittal"
                               "&slice=4&window=bone")
    assert (status, ctype) == (200, "image/png")
    assert cv2.imdecode(np.frombuffer(body, np.uint8), cv2.IMREAD_UNCHANGED).shape == (6, 8)
    status, _, body = _get(server.url + f"record_volume.png?id={rid}&j=0&plane=axial&slice=6")
    assert status == 404 and b"out of range" in body
    rec = json.loads(_get(server.url + f"api/record?id={rid}")[2])
    assert rec["images"][0]["volume"]["planes"] == ["axial", "coronal", "sagittal"]


def test_mix_view_shows_volume_records_in_chromium(server, browser):
    from selenium.webdriver.support.ui import WebDriverWait

    wait = WebDriverWait(browser, 30)
    rid = record_id("ct", "report_generation", "nii")
    browser.get(server.url + f"?id={rid}")
    wait.until(lambda d: d.execute_script("return document.body.dataset.ready === '1'"))
    wait.until(lambda d: d.execute_script(
        "return document.querySelectorAll('#images canvas.plane[data-drawn]').length === 3"))
    sizes = browser.execute_script("""
        return Array.from(document.querySelectorAll('#images canvas.plane')).map((c) =>
            [c.dataset.plane, c.width, c.height, c.dataset.slice]);""")
    assert sizes == [["axial", 10, 8, "3"], ["coronal", 10, 6, "4"], ["sagittal", 8, 6, "5"]]


def test_a_grounded_ct_record_shows_its_boxes_on_the_planes(mixture):
    """A record's ``boxes3d`` reach the three planes (drawn by planes.js as the dataset viewer
    draws a dataset's boxes) when the volume shown is the grid they lie on; on another grid
    they are not drawn, and the page says why."""
    app = MixtureApp(mixture)
    vol = app.record(record_id=record_id("ct", "report_generation", "boxed"))["images"][0]
    assert vol["volume"]["boxes"] == [{"label": "nodule", "box": [1.0, 2.0, 0.0, 4.0, 5.0, 4.0]}]
    other = app.record(record_id=record_id("ct", "report_generation", "other_grid"))
    assert other["images"][0]["volume"]["boxes"] == []
    assert "[12, 8, 10] grid" in other["images"][0]["volume"]["boxes_note"]
    plain = app.record(record_id=record_id("ct", "report_generation", "nii"))["images"][0]
    assert plain["volume"]["boxes"] == [] and "boxes_note" not in plain["volume"]


def test_mix_view_draws_a_records_3d_box_in_chromium(server, browser):
    """The nodule box crosses axial slices 0..4: the axial plane shown first (slice 3) shows
    the box's colour where the planted volume has none."""
    from selenium.webdriver.support.ui import WebDriverWait

    wait = WebDriverWait(browser, 30)
    browser.get(server.url + f"?id={record_id('ct', 'report_generation', 'boxed')}")
    wait.until(lambda d: d.execute_script("return document.body.dataset.ready === '1'"))
    wait.until(lambda d: d.execute_script(
        "return document.querySelectorAll('#images canvas.plane[data-drawn]').length === 3"))
    green = browser.execute_script("""
        const c = document.querySelector('#images canvas.plane[data-plane="axial"]');
        const px = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        let n = 0;
        for (let i = 0; i < px.length; i += 4) if (px[i + 1] > 200 && px[i] < 60) n += 1;
        return n;""")
    assert green > 0
