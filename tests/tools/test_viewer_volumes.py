"""The viewer's volumes: three planes at their true aspect, windows, the mask overlay, boxes and
points on every plane they cross -- the data model, the HTTP routes (one plane's slice per
request, from the cache, never the volume) and the page in a real headless Chromium.

The planted fake is a real VolumeDataset over a gzip NIfTI written at test time (shape (D, H,
W) = (20, 30, 40), spacing 2.5 x 0.8 x 0.6 mm) whose ``annotations`` hook gives one box covering
voxels x 10..19, y 5..14, z 6..11 and one point at (30, 20, 15), and whose ``source_mask`` hook
labels voxels d 2..4, h 20..25, w 25..35 as 1. It is not registered.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import ClassVar

import cv2
import numpy as np
import pandas as pd
import pytest

from radharmony.data.volumes import VolumeDataset
from radharmony.fake.volumes import write_nifti
from radharmony.spec import DatasetSpec
from radharmony.table.harmonizer import BaseHarmonizer
from radharmony.viewer import make_server
from radharmony.viewer.app import NotFound, ViewerApp, ViewerError
from radharmony.viewer.volumes import (PALETTE, annotations_json, mask_rgba, parse_window,
                                       plane_slice, windowed)

from test_viewer import ARTIFACTS, _get, browser, serving  # noqa: F401  (the browser fixture)

SHAPE = (20, 30, 40)          # (D, H, W)
SPACING = (2.5, 0.8, 0.6)     # mm, (d, h, w)
BOX = (9.5, 4.5, 5.5, 19.5, 14.5, 11.5)   # voxels x 10..19, y 5..14, z 6..11
POINT = (30.0, 20.0, 15.0)


def planted_volume() -> np.ndarray:
    """int16 HU: voxel (d, h, w) = 10 * d + h - w (every voxel tells where it is)."""
    d, h, w = np.mgrid[0:SHAPE[0], 0:SHAPE[1], 0:SHAPE[2]]
    return (10 * d + h - w).astype(np.int16)


class StubVolumeHarmonizer(BaseHarmonizer):
    spec: ClassVar[DatasetSpec] = DatasetSpec(
        key="stubct", title="Stub CT set", label_cols=("Nodule",),
        outputs=frozenset({"cls", "report"}), row_unit="volume")


class StubVolumeDataset(VolumeDataset):
    harmonizer_class = StubVolumeHarmonizer

    def annotations(self, index: int) -> dict:
        if index != 0:
            return {}
        return {"boxes": np.array([BOX]), "box_labels": ["Nodule"],
                "points": np.array([POINT]), "point_labels": ["carina"]}

    def source_mask(self, index: int) -> np.ndarray:
        mask = np.zeros(SHAPE, np.uint8)
        mask[2:5, 20:26, 25:36] = 1
        return mask


def write_stub(root: Path) -> pd.DataFrame:
    """Two CTs as gzip NIfTI (RAS affine; canonical (D, H, W) is the file's (k, j, i))."""
    affine = np.diag([-SPACING[2], -SPACING[1], SPACING[0], 1.0])
    rows = []
    for i in range(2):
        write_nifti(root / f"p{i}" / "ct.nii.gz", planted_volume().transpose(2, 1, 0) + i,
                    affine)
        rows.append({"patient_id": f"p{i}", "study_id": f"s{i}",
                     "image_path": f"p{i}/ct.nii.gz", "view_position": None,
                     "report": "FINDINGS:\nA nodule in the right upper lobe.", "Nodule": 1.0})
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def stub(tmp_path_factory) -> StubVolumeDataset:
    root = tmp_path_factory.mktemp("stubct")
    return StubVolumeDataset(root, harmonized_df=write_stub(root), output_cls=True,
                             output_report=True, cache_dir=root / "cache")


@pytest.fixture(scope="module")
def server(stub):
    yield from serving(make_server([stub], port=0))


def _png(body: bytes) -> np.ndarray:
    return cv2.imdecode(np.frombuffer(body, np.uint8), cv2.IMREAD_UNCHANGED)


# -- the data model -------------------------------------------------------------------------------
def test_planes_are_oriented_as_radiologists_read_them():
    a = np.arange(2 * 3 * 4).reshape(2, 3, 4)  # (D, H, W)
    assert plane_slice(a, "axial", 1).tolist() == a[1].tolist()
    # coronal and sagittal: superior (the last d) at the top
    assert plane_slice(a, "coronal", 2).tolist() == [a[1, 2].tolist(), a[0, 2].tolist()]
    assert plane_slice(a, "sagittal", 3).tolist() == [a[1, :, 3].tolist(), a[0, :, 3].tolist()]
    with pytest.raises(ViewerError, match="Unknown plane"):
        plane_slice(a, "oblique", 0)


def test_windows_and_their_presets():
    hu = np.array([[-1350, -600, 150], [-160, 40, 240]], np.int16)
    # lung: -1350 .. 150 HU -> 0 .. 255 (255 / 1500 per HU); -160 -> 1190 * 0.17 = 202.3
    assert windowed(hu, -600, 1500).tolist() == [[0, 128, 255], [202, 236, 255]]
    # mediastinum: -160 .. 240 HU; 150 -> 310 * 0.6375 = 197.6
    assert windowed(hu, 40, 400).tolist() == [[0, 0, 198], [0, 128, 255]]
    assert parse_window({"window": "lung"}) == (-600.0, 1500.0)
    assert parse_window({"window": "mediastinum"}) == (40.0, 400.0)
    assert parse_window({"window": "bone"}) == (400.0, 1800.0)
    assert parse_window({"window": "custom", "level": "50", "width": "350"}) == (50.0, 350.0)
    assert parse_window({"level": "-500", "width": "1200"}) == (-500.0, 1200.0)
    with pytest.raises(ViewerError, match="Unknown window"):
        parse_window({"window": "brain"})
    with pytest.raises(ViewerError, match="width must be positive"):
        parse_window({"level": "0", "width": "0"})


def test_mask_colours_and_annotations_json():
    rgba = mask_rgba(np.array([[0, 1], [2, 13]]))
    assert rgba[0, 0].tolist() == [0, 0, 0, 0]
    assert rgba[0, 1].tolist() == [*PALETTE[0].tolist(), 110]
    assert rgba[1, 0].tolist() == [*PALETTE[1].tolist(), 110]
    assert rgba[1, 1].tolist() == [*PALETTE[0].tolist(), 110]  # 13 wraps to the first colour
    assert annotations_json(None) == {"boxes": [], "points": []}
    assert annotations_json({"boxes": np.array([BOX]), "box_labels": ["Nodule"]}) == {
        "boxes": [{"label": "Nodule", "box": list(BOX)}], "points": []}


def test_sample_json_has_the_planes_and_annotations_but_no_voxels(stub):
    app = ViewerApp([stub])
    s = app.sample(index=0)
    assert s["image_error"] is None
    v = s["volume"]
    assert v["shape"] == [20, 30, 40]
    assert v["spacing"] == pytest.approx(list(SPACING))
    assert v["planes"] == ["axial", "coronal", "sagittal"]
    assert v["windows"] == {"lung": [-600.0, 1500.0], "mediastinum": [40.0, 400.0],
                            "bone": [400.0, 1800.0]}
    assert v["has_mask"] is True
    assert v["boxes"] == [{"label": "Nodule", "box": list(BOX)}]
    assert v["points"] == [{"label": "carina", "point": list(POINT)}]
    assert (s["depth"], s["height"], s["width"]) == (20, 30, 40)
    assert s["fields"]["volume_shape"] == [20, 30, 40]
    assert [x["title"] for x in s["sections"]] == ["FINDINGS"]
    assert app.sample(index=1)["volume"]["boxes"] == []


def test_slices_come_from_the_cache_s_stored_array(stub):
    app = ViewerApp([stub])
    source = app.volume(index=0)
    assert type(source.array).__module__.startswith("blosc2")  # the cache entry, not numpy
    vol = planted_volume()
    # a window as wide as 2550 HU centred so that value v -> (v + 1275) / 10
    def png(plane, k):
        return _png(source.slice_png(plane, k, 0.0, 2550.0)).astype(int)

    assert png("axial", 7).tolist() == windowed(vol[7], 0, 2550).tolist()
    assert png("coronal", 4).tolist() == windowed(vol[::-1, 4, :], 0, 2550).tolist()
    assert png("sagittal", 9).tolist() == windowed(vol[::-1, :, 9], 0, 2550).tolist()
    assert png("coronal", 4).shape == (20, 40) and png("sagittal", 9).shape == (20, 30)
    with pytest.raises(NotFound, match="out of range for the sagittal plane"):
        source.slice_png("sagittal", 40, 0.0, 100.0)
    mask = _png(source.mask_png("axial", 3))  # BGRA from OpenCV
    assert mask.shape == (30, 40, 4)
    on = np.argwhere(mask[..., 3] > 0)
    assert (on.min(0).tolist(), on.max(0).tolist()) == ([20, 25], [25, 35])
    assert not _png(source.mask_png("axial", 5))[..., 3].any()


class IndexSpy:
    """Wraps an array and records every index it is read with."""

    def __init__(self, array):
        self.array, self.shape, self.reads = array, array.shape, []

    def __getitem__(self, index):
        self.reads.append(index)
        return self.array[index]


def test_a_page_reads_one_plane_at_a_time_never_the_volume(stub):
    app = ViewerApp([stub])
    source = app.volume(index=0)
    spy = source.array = IndexSpy(source.array)
    app.sample(index=0)  # the sample's JSON reads no voxel
    assert spy.reads == []
    for plane in ("axial", "coronal", "sagittal"):
        source.slice_png(plane, 5, 40.0, 400.0)
    full = slice(None)
    assert spy.reads == [(5, full, full), (full, 5, full), (full, full, 5)]


def test_http_slice_routes_send_one_plane_never_the_volume(server):
    base = server.url
    status, ctype, body = _get(base + "volume.png?split=stubct&index=0&plane=coronal&slice=3"
                               "&window=lung")
    assert (status, ctype) == (200, "image/png")
    assert _png(body).shape == (20, 40)
    assert len(body) < 20 * 40 + 1024  # one plane's pixels at most, not 24,000 voxels
    status, _, body = _get(base + "volume.png?split=stubct&index=0&plane=axial&slice=2"
                           "&level=-100&width=300")
    assert status == 200 and _png(body).shape == (30, 40)
    status, _, body = _get(base + "volume_mask.png?split=stubct&index=0&plane=sagittal&slice=30")
    assert status == 200 and _png(body).shape == (20, 30, 4)
    status, _, body = _get(base + "api/volume_mask_legend?split=stubct&index=0&plane=axial"
                           "&slice=3")
    assert status == 200 and json.loads(body) == [{"value": 1, "name": "1",
                                                   "colour": "#%02x%02x%02x" % (230, 25, 75)}]
    status, _, body = _get(base + "volume.png?split=stubct&index=0&plane=axial&slice=99")
    assert status == 404 and b"out of range" in body
    status, _, body = _get(base + "volume.png?split=stubct&index=0&plane=axial&slice=1"
                           "&window=brain")
    assert status == 400 and b"Unknown window" in body
    status, _, body = _get(base + "image.png?split=stubct&index=0")  # the list's thumbnail
    assert status == 200 and _png(body).shape == (30, 40)


# -- the page in a real browser -------------------------------------------------------------------
def _box_pixels(browser, plane: str, colour: str) -> list | None:
    """``[[row0, col0], [row1, col1]]``: the extent of ``colour``'s pixels on ``plane``'s
    canvas (None: none)."""
    return browser.execute_script("""
        const [plane, colour] = arguments;
        const c = document.querySelector(`canvas.plane[data-plane=${plane}]`);
        const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        const want = [1, 3, 5].map((i) => parseInt(colour.slice(i, i + 2), 16));
        let lo = null, hi = null;
        for (let y = 0; y < c.height; y++) for (let x = 0; x < c.width; x++) {
          const i = 4 * (y * c.width + x);
          if (d[i] === want[0] && d[i + 1] === want[1] && d[i + 2] === want[2]) {
            lo = lo ? [Math.min(lo[0], y), Math.min(lo[1], x)] : [y, x];
            hi = hi ? [Math.max(hi[0], y), Math.max(hi[1], x)] : [y, x];
          }
        }
        return lo ? [lo, hi] : null;""", plane, colour)


def _show(browser, wait, plane: str, k: int) -> None:
    browser.execute_script("""
        const s = document.querySelector(`input.slice[data-plane=${arguments[0]}]`);
        s.value = arguments[1]; s.dispatchEvent(new Event('input'));""", plane, k)
    wait.until(lambda d: d.execute_script(
        f"return document.querySelector('canvas.plane[data-plane={plane}]').dataset.slice")
        == str(k))


def test_three_planes_in_headless_chromium(server, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    wait = WebDriverWait(browser, 30)
    browser.get(server.url + "?split=stubct&index=0")
    wait.until(lambda d: d.execute_script("return document.body.dataset.ready === '1'"))
    assert "1\u20132 of 2 volumes" in browser.find_element(By.ID, "status").text
    assert not browser.find_element(By.ID, "volume-box").get_attribute("hidden")
    assert browser.find_element(By.ID, "image-box").get_attribute("hidden")
    canvases = {c.get_attribute("data-plane"): c for c in
                browser.find_elements(By.CSS_SELECTOR, "canvas.plane")}
    assert list(canvases) == ["axial", "coronal", "sagittal"]
    wait.until(lambda d: all(c.get_attribute("data-drawn") for c in canvases.values()))
    # each canvas at voxel resolution, shown at the true aspect ratio (spacing respected)
    sizes = {p: (int(c.get_attribute("width")), int(c.get_attribute("height")),
                 c.size["width"], c.size["height"]) for p, c in canvases.items()}
    assert sizes["axial"][:2] == (40, 30) and sizes["coronal"][:2] == (40, 20)
    assert sizes["sagittal"][:2] == (30, 20)
    for plane, mm in {"axial": (40 * 0.6, 30 * 0.8), "coronal": (40 * 0.6, 20 * 2.5),
                      "sagittal": (30 * 0.8, 20 * 2.5)}.items():
        w, h = sizes[plane][2:]
        assert w / h == pytest.approx(mm[0] / mm[1], rel=0.03), plane
    # the middle slices first; the box is drawn where the annotation says on every plane
    assert [canvases[p].get_attribute("data-slice") for p in canvases] == ["10", "15", "20"]
    colour = browser.find_element(By.CSS_SELECTOR, ".planes-legend span[data-label=Nodule]") \
        .get_attribute("data-colour")
    _show(browser, wait, "axial", 8)      # z 6..11 crosses 8
    _show(browser, wait, "coronal", 10)   # y 5..14 crosses 10
    _show(browser, wait, "sagittal", 15)  # x 10..19 crosses 15
    # axial: rows y 5..14, columns x 10..19
    assert _box_pixels(browser, "axial", colour) == [[5, 10], [14, 19]]
    # coronal: rows from superior: d 11..6 -> rows 19 - 11 .. 19 - 6; columns x 10..19
    assert _box_pixels(browser, "coronal", colour) == [[8, 10], [13, 19]]
    # sagittal: rows as coronal, columns y 5..14
    assert _box_pixels(browser, "sagittal", colour) == [[8, 5], [13, 14]]
    ARTIFACTS.mkdir(exist_ok=True)
    assert browser.save_screenshot(str(ARTIFACTS / "viewer_volume.png"))
    # a plane the box does not cross shows none
    _show(browser, wait, "axial", 12)
    assert _box_pixels(browser, "axial", colour) is None
    _show(browser, wait, "axial", 11)
    assert _box_pixels(browser, "axial", colour) == [[5, 10], [14, 19]]
    # the point (30, 20, 15): a cross on the planes through it
    _show(browser, wait, "axial", 15)
    assert _box_pixels(browser, "axial", "#ff0000") == [[18, 28], [22, 32]]
    _show(browser, wait, "sagittal", 30)
    assert _box_pixels(browser, "sagittal", "#ff0000") == [[2, 18], [6, 22]]
    # the mouse wheel steps the slice
    browser.execute_script("""
        document.querySelector('canvas.plane[data-plane=axial]').dispatchEvent(
            new WheelEvent('wheel', {deltaY: 100, bubbles: true, cancelable: true}));""")
    wait.until(lambda d: canvases["axial"].get_attribute("data-slice") == "16")
    assert browser.find_element(By.CSS_SELECTOR, "input.slice[data-plane=axial]") \
        .get_attribute("value") == "16"
    # window presets and a custom level / width
    assert canvases["axial"].get_attribute("data-window") == "mediastinum"
    Select(browser.find_element(By.CSS_SELECTOR, "select.window")).select_by_value("lung")
    wait.until(lambda d: canvases["axial"].get_attribute("data-window") == "lung")
    level = browser.find_element(By.CSS_SELECTOR, "input.level")
    assert level.get_attribute("value") == "-600"
    browser.execute_script("""
        const l = document.querySelector('input.level');
        l.value = '-100'; l.dispatchEvent(new Event('change'));""")
    wait.until(lambda d: canvases["axial"].get_attribute("data-window") == "-100/1500")
    # the mask overlay: coloured where the mask is, and toggled off
    _show(browser, wait, "axial", 3)
    red = tuple(PALETTE[0].tolist())
    mask_px = browser.execute_script("""
        const c = document.querySelector('canvas.plane[data-plane=axial]');
        const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        const px = (y, x) => Array.from(d.slice(4 * (y * c.width + x), 4 * (y * c.width + x) + 3));
        return [px(22, 30), px(5, 5)];""")
    assert mask_px[0][0] > mask_px[0][1] + 40  # tinted toward the label's red
    wait.until(lambda d: [c.text for c in d.find_elements(
        By.CSS_SELECTOR, ".mask-legend[data-plane=axial] span")] == ["1"])  # no names: values
    assert mask_px[1][0] == mask_px[1][1] == mask_px[1][2]  # gray outside the mask
    assert red[0] > red[1]
    browser.find_element(By.CSS_SELECTOR, "input.mask-toggle").click()
    wait.until(lambda d: canvases["axial"].get_attribute("data-mask") == "0")
    # clicking a plane moves the others there (the crosshair)
    browser.execute_script("""
        const c = document.querySelector('canvas.plane[data-plane=axial]');
        const r = c.getBoundingClientRect();
        c.dispatchEvent(new MouseEvent('click', {clientX: r.left + (12.5 / 40) * r.width,
                                                 clientY: r.top + (7.5 / 30) * r.height,
                                                 bubbles: true}));""")
    wait.until(lambda d: canvases["sagittal"].get_attribute("data-slice") == "12")
    wait.until(lambda d: canvases["coronal"].get_attribute("data-slice") == "7")
    # and the crosshair on each plane marks the other two slices (axial at d = 3)
    lines = browser.execute_script("""
        const out = {};
        for (const f of document.querySelectorAll('figure.plane-view')) {
          out[f.dataset.plane] = [f.querySelector('.crosshair.across').dataset.voxel,
                                  f.querySelector('.crosshair.down').dataset.voxel];
        }
        return out;""")
    assert lines == {"axial": ["7", "12"], "coronal": [str(19 - 3), "12"],
                     "sagittal": [str(19 - 3), "7"]}
    # the report and labels beside
    assert "nodule" in browser.find_element(By.ID, "report").text
    assert [c.get_attribute("data-label") for c in
            browser.find_elements(By.CSS_SELECTOR, "#labels .chip.positive")] == ["Nodule"]


def test_a_registered_dataset_s_mask_hook_is_the_overlay(tmp_path):
    """TotalSegmentator's replica (8 x 12 x 12 at 1.5 mm): its liver (label
    STRUCTURES.index("liver") + 1) lies at d 1..3, h 2..5, w 1..3."""
    from radharmony.datasets.totalsegmentator import STRUCTURES
    from radharmony.fake.totalsegmentator import write_totalsegmentator
    from radharmony.registry import get_dataset_class

    base = write_totalsegmentator(tmp_path / "ts", splits=("train",))
    ds = get_dataset_class("totalsegmentator")(base, cache_dir=tmp_path / "cache",
                                               output_mask=True)
    app = ViewerApp([ds])
    v = app.sample(index=0)["volume"]
    assert v["has_mask"] is True and v["shape"] == [8, 12, 12]
    assert v["spacing"] == pytest.approx([1.5, 1.5, 1.5])
    mask = _png(app.volume(index=0).mask_png("axial", 2))
    liver = PALETTE[STRUCTURES.index("liver") % len(PALETTE)][::-1]  # BGR from OpenCV
    on = np.argwhere((mask[..., :3] == liver).all(-1) & (mask[..., 3] > 0))
    assert (on.min(0).tolist(), on.max(0).tolist()) == ([2, 1], [5, 3])
    legend = app.volume(index=0).mask_legend("axial", 2)
    assert {m["name"] for m in legend} == {"liver"}  # the structure's name, its colour
    assert legend[0]["value"] == STRUCTURES.index("liver") + 1
    assert legend[0]["colour"] == "#%02x%02x%02x" % tuple(liver[::-1])
