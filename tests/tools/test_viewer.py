"""The viewer: its data model, its HTTP surface, and the page in a real headless Chromium.

The stub dataset below is a real BaseRadiologicalDataset (images through the default pipeline,
boxes through the Letterbox) with labels, boxes by two annotators and X-Raydar-style
``report_spans``, so every part of the page has something to show. It is not registered.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import ClassVar

import numpy as np
import pandas as pd
import pytest

from radharmony.table.harmonizer import BaseHarmonizer
from radharmony.data.dataset import BaseRadiologicalDataset
from radharmony.errors import RadHarmonyError
from radharmony.fake import synthetic_cxr, write_png
from radharmony.spec import DatasetSpec
from radharmony.viewer import make_server, report_sections
from radharmony.viewer.app import ViewerApp, clean_spans

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
LABELS = ("Nodule", "Effusion", "Cardiomegaly")
VIEWS = ("PA", "AP", "LATERAL", None)
REPORT = ("INDICATION:\nCough for two weeks.\n\nFINDINGS:\nA small nodule in the right upper "
          "lobe. Small left pleural effusion.\n\nIMPRESSION:\nNodule; effusion.")
N = 12


def _span(text: str, phrase: str, label: str) -> dict:
    start = text.index(phrase)
    return {"label": label, "start": start, "end": start + len(phrase)}


class StubHarmonizer(BaseHarmonizer):
    spec: ClassVar[DatasetSpec] = DatasetSpec(
        key="stubxr", title="Stub X-ray set", label_cols=LABELS, extra_cols=("site",),
        outputs=frozenset({"cls", "report", "bbox"}), box_units="pixel")


class StubDataset(BaseRadiologicalDataset):
    harmonizer_class = StubHarmonizer

    def add_outputs(self, index, sample, box):
        super().add_outputs(index, sample, box)
        sample["report_spans"] = self.harmonized_df["report_spans"].iat[index]


def stub_table(root: Path) -> pd.DataFrame:
    """12 images; Nodule positive on rows 0, 3, 6, 9; row 0 has boxes by annotators R1, R2."""
    rng = np.random.default_rng(0)
    rows = []
    for i in range(N):
        rel = f"p{i // 2}/img{i}.png"
        write_png(root / rel, synthetic_cxr(200, 160, rng=rng, bits=8))
        labels = {"Nodule": 1.0 if i % 3 == 0 else 0.0,
                  "Effusion": -1.0 if i == 1 else (1.0 if i % 4 == 0 else np.nan),
                  "Cardiomegaly": np.nan}
        boxes = []
        if i == 0:
            boxes = [{"label": "Nodule", "annotator": "R1", "x_min": 20, "y_min": 30,
                      "x_max": 60, "y_max": 70},
                     {"label": "Nodule", "annotator": "R1", "x_min": 90, "y_min": 40,
                      "x_max": 120, "y_max": 80},
                     {"label": "Effusion", "annotator": "R2", "x_min": 30, "y_min": 120,
                      "x_max": 140, "y_max": 190}]
        spans = [_span(REPORT, "small nodule", "Nodule"),
                 _span(REPORT, "left pleural effusion", "Effusion")] if i % 2 == 0 else []
        rows.append({"patient_id": f"p{i // 2}", "study_id": f"s{i}", "image_path": rel,
                     "view_position": VIEWS[i % 4], "report": REPORT if i != 5 else None,
                     **labels, "site": f"site-{i % 3}", "boxes": boxes, "report_spans": spans})
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def stub(tmp_path_factory) -> StubDataset:
    root = tmp_path_factory.mktemp("stubxr")
    return StubDataset(root, harmonized_df=stub_table(root), output_cls=True,
                       output_report=True, output_bbox=True, cache_dir=None)


def serving(srv):
    """Yield ``srv`` serving on a daemon thread, then shut it (a fixture's body)."""
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    try:
        yield srv
    finally:
        srv.shutdown()
        srv.server_close()


@pytest.fixture(scope="module")
def server(stub):
    yield from serving(make_server([stub], port=0, page_size=5))


def _get(url: str, *, headers: dict | None = None, method: str = "GET"):
    req = urllib.request.Request(url, headers=headers or {}, method=method)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.headers.get("Content-Type"), r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type"), e.read()


# -- the data model -------------------------------------------------------------------------------
def test_report_sections_give_body_offsets():
    secs = report_sections(REPORT)
    assert [s["title"] for s in secs] == ["INDICATION", "FINDINGS", "IMPRESSION"]
    assert REPORT[secs[0]["start"]:secs[0]["end"]] == "Cough for two weeks."
    assert REPORT[secs[2]["start"]:secs[2]["end"]] == "Nodule; effusion."
    free = report_sections("No header here.\nFINDINGS: clear.")
    assert free == [{"title": None, "start": 0, "end": 15},
                    {"title": "FINDINGS", "start": 26, "end": 32}]
    assert report_sections(None) == []


def test_clean_spans_drops_spans_outside_the_report():
    spans = [{"label": "B", "start": 5, "end": 9}, {"label": "A", "start": 0, "end": 3},
             {"label": "C", "start": 8, "end": 99}, {"label": "D", "start": 4, "end": 4},
             {"start": 1, "end": 2}]
    assert clean_spans(spans, report="0123456789") == [{"label": "A", "start": 0, "end": 3},
                                                {"label": "B", "start": 5, "end": 9}]


def test_filters_and_paging(stub):
    app = ViewerApp([stub], page_size=5)
    assert app.samples()["total"] == N
    nodule = app.samples(label="Nodule")
    assert nodule["total"] == 4
    assert [it["index"] for it in nodule["items"]] == [0, 3, 6, 9]
    assert all("Nodule" in it["positives"] for it in nodule["items"])
    pa = app.samples(view="PA")
    assert [it["index"] for it in pa["items"]] == [0, 4, 8]
    both = app.samples(label="Nodule", view="AP")  # rows 1, 5, 9 are AP; 9 has Nodule
    assert [it["index"] for it in both["items"]] == [9]
    missing = app.samples(view="(missing)")
    assert [it["index"] for it in missing["items"]] == [3, 7, 11]
    page2 = app.samples(offset=5, limit=5)
    assert [it["index"] for it in page2["items"]] == [5, 6, 7, 8, 9]
    with pytest.raises(RadHarmonyError, match="Unknown label 'Nodul'"):
        app.samples(label="Nodul")


def test_sample_json_has_boxes_labels_and_spans(stub):
    app = ViewerApp([stub])
    s = app.sample(split="stubxr", index=0)
    assert s["sample_id"] == "stubxr:p0/img0"
    assert app.sample(sample_id="stubxr:p0/img0") == s
    assert (s["width"], s["height"]) == (224, 224)
    assert [b["annotator"] for b in s["boxes"]] == ["R1", "R1", "R2"]
    # 200 x 160 source -> 224 x 179 content, 22 px padding left and right (Letterbox)
    scale = 224 / 200
    assert s["boxes"][0]["x_min"] == pytest.approx(20 * scale + 22, abs=0.6)
    assert s["boxes"][0]["y_min"] == pytest.approx(30 * scale, abs=0.6)
    values = {lab["name"]: lab["value"] for lab in app.sample(index=1)["labels"]}
    assert values == {"Nodule": 0.0, "Effusion": -1.0, "Cardiomegaly": None}
    assert [sp["label"] for sp in s["report_spans"]] == ["Nodule", "Effusion"]
    sp = s["report_spans"][0]
    assert s["report"][sp["start"]:sp["end"]] == "small nodule"
    assert [sec["title"] for sec in s["sections"]] == ["INDICATION", "FINDINGS", "IMPRESSION"]
    assert s["fields"] == {"site": "site-0"}
    assert app.sample(index=5)["report"] is None


def test_png_is_the_preprocessed_image(stub):
    import cv2

    png = ViewerApp([stub]).image_png(index=2)
    img = cv2.imdecode(np.frombuffer(png, np.uint8), cv2.IMREAD_UNCHANGED)
    assert img.shape == (224, 224) and img.dtype == np.uint8
    expected = ((stub[2]["img"].float().numpy()[0] + 1) * 127.5).round()
    assert np.abs(img.astype(np.float32) - expected).max() <= 1


def test_unreadable_image_is_reported_not_fatal(tmp_path):
    df = stub_table(tmp_path)
    (tmp_path / df["image_path"][2]).unlink()
    ds = StubDataset(tmp_path, harmonized_df=df, output_report=True, output_bbox=True,
                     cache_dir=None)
    s = ViewerApp([ds]).sample(index=2)
    assert "does not exist" in s["image_error"]
    assert s["report"] == REPORT and s["boxes"] == []


# -- HTTP -----------------------------------------------------------------------------------------
def test_http_routes(server):
    status, ctype, body = _get(server.url)
    assert status == 200 and ctype.startswith("text/html") and b"viewer.js" in body
    meta = json.loads(_get(server.url + "api/meta")[2])
    assert meta["splits"][0]["labels"] == list(LABELS)
    status, _, body = _get(server.url + "api/samples?label=Nodule&limit=2")
    assert status == 200 and json.loads(body)["total"] == 4
    status, ctype, body = _get(server.url + "image.png?id=stubxr:p1/img3")
    assert status == 200 and ctype == "image/png" and body.startswith(b"\x89PNG")
    status, _, body = _get(server.url + "api/sample?index=99")
    assert status == 404 and b"out of range" in body
    assert _get(server.url + "api/sample?index=abc")[0] == 400


def test_report_labels_with_deciding_phrase(server):
    s = json.loads(_get(server.url + "api/sample?index=0")[2])
    labels = {lab["name"]: lab for lab in s["report_labels"]}
    eff = labels["Pleural Effusion"]
    assert eff["value"] == 1.0 and eff["cue"] is None
    assert s["report"][eff["mention"]["start"]:eff["mention"]["end"]] == "pleural effusion"
    assert eff["sentence"] == "Small left pleural effusion."
    lesion = labels["Lung Lesion"]
    assert s["report"][lesion["mention"]["start"]:lesion["mention"]["end"]] == "nodule"
    assert "Pneumonia" not in labels  # nothing said about it
    assert json.loads(_get(server.url + "api/sample?index=5")[2])["report_labels"] == []


def test_report_label_cue_offsets():
    from radharmony.viewer.app import report_label_evidence

    text = "FINDINGS:\nNo pneumothorax. Possible small effusion."
    ev = {e["name"]: e for e in report_label_evidence(text)}
    ptx, eff = ev["Pneumothorax"], ev["Pleural Effusion"]
    assert ptx["value"] == 0.0 and text[ptx["cue"]["start"]:ptx["cue"]["end"]] == "No"
    assert eff["value"] == -1.0 and text[eff["cue"]["start"]:eff["cue"]["end"]] == "Possible"
    assert eff["cue_kind"] == "uncertain" and eff["rule"].startswith("mentions.tsv:")
    assert report_label_evidence(None) == []


@pytest.mark.parametrize("path", ["static/../cli.py", "static/%2e%2e/app.py",
                                  "static/viewer.js/../../app.py", "../../etc/passwd",
                                  "image.png?id=../../etc/passwd", "api/sample?id=p0/img0.png",
                                  "static/app.py"])
def test_no_path_traversal(server, path):
    status, _, body = _get(server.url + path)
    assert status == 404, body
    assert b"import" not in body and b"root:" not in body


def test_read_only_and_loopback_only(server, stub):
    assert _get(server.url + "api/meta", method="POST")[0] == 501
    assert _get(server.url + "api/meta", headers={"Host": "evil.example:80"})[0] == 403
    assert _get(server.url + "api/meta", headers={"Host": "localhost:1"})[0] == 200
    with pytest.raises(RadHarmonyError, match="allow_remote=True"):
        make_server([stub], host="0.0.0.0", port=0)


def test_cross_site_requests_are_refused(server):
    base = server.url.split(server.token)[0]  # the origin, without the per-run token
    assert server.token and len(server.token) >= 16 and server.token in server.url
    for path in ("api/meta", "image.png?id=stubxr:p1/img3", "api/sample?id=stubxr:p1/img3",
                 "api/sample?id=stubxr:nope", ""):
        status, _, body = _get(base + path)
        assert status == 403 and b"stubxr" not in body, path
    status, _, body = _get(server.url + "image.png?id=stubxr:p1/img3",
                           headers={"Sec-Fetch-Site": "cross-site"})
    assert status == 403 and not body.startswith(b"\x89PNG")
    assert _get(server.url + "api/meta", headers={"Sec-Fetch-Site": "same-site"})[0] == 403
    for site in ("same-origin", "none"):
        assert _get(server.url + "api/meta", headers={"Sec-Fetch-Site": site})[0] == 200
    req = urllib.request.Request(server.url + "image.png?id=stubxr:p1/img3")
    with urllib.request.urlopen(req, timeout=30) as r:
        assert r.headers.get("Cross-Origin-Resource-Policy") == "same-origin"
    page = _get(server.url)[2]
    assert b'src="static/viewer.js"' in page  # relative: the page carries the token


def test_an_unexpected_error_answers_500_not_a_dropped_connection(server, monkeypatch):
    def boom(**where):
        raise OSError(40, "Too many levels of symbolic links")
    monkeypatch.setattr(server.app, "image_png", boom)
    status, ctype, body = _get(server.url + "image.png?index=0")
    assert status == 500 and ctype == "application/json" and b"OSError" in body


# -- the page in a real browser -------------------------------------------------------------------
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
                  "--window-size=1300,900")


@pytest.fixture()
def browser(tmp_path):
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver_path = shutil.which("chromedriver") or (
        "/usr/bin/chromedriver" if os.path.exists("/usr/bin/chromedriver") else None)
    if chromium is None or driver_path is None:
        pytest.skip("chromium and chromedriver are not installed (make test installs Debian's "
                    "chromium and chromium-driver)")
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path / 'chromium-profile'}")
    driver = webdriver.Chrome(options=options,
                              service=webdriver.ChromeService(executable_path=driver_path))
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


def test_page_in_headless_chromium(server, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    wait = WebDriverWait(browser, 30)
    browser.get(server.url + "?split=stubxr&index=0")
    wait.until(lambda d: d.execute_script("return document.body.dataset.ready === '1'"))
    # the list is paged (page size 5 of 12)
    assert len(browser.find_elements(By.CSS_SELECTOR, "#list li")) == 5
    assert "1\u20135 of 12" in browser.find_element(By.ID, "status").text
    # the image renders
    wait.until(lambda d: d.execute_script(
        "const i = document.getElementById('image'); return i.complete && i.naturalWidth > 0"))
    assert browser.execute_script("return document.getElementById('image').naturalWidth") == 224
    assert "stubxr:p0/img0" in browser.find_element(By.ID, "sample-id").text
    # boxes coloured by label; toggling annotator R1 hides its two boxes only
    r1 = browser.find_elements(By.CSS_SELECTOR, "#overlay rect[data-annotator='R1']")
    r2 = browser.find_elements(By.CSS_SELECTOR, "#overlay rect[data-annotator='R2']")
    assert len(r1) == 2 and len(r2) == 1
    assert all(r.is_displayed() for r in r1 + r2)
    assert r1[0].get_attribute("stroke") != r2[0].get_attribute("stroke")
    browser.find_element(By.CSS_SELECTOR, "#annotators input[data-annotator='R1']").click()
    assert not any(r.is_displayed() for r in r1)
    assert r2[0].is_displayed()
    browser.find_element(By.CSS_SELECTOR, "#annotators input[data-annotator='R1']").click()
    assert all(r.is_displayed() for r in r1)
    # report sections with spans highlighted by category
    titles = [h.text for h in browser.find_elements(By.CSS_SELECTOR, "#report h3")]
    assert titles == ["INDICATION", "FINDINGS", "IMPRESSION"]
    marks = browser.find_elements(By.CSS_SELECTOR, "#report mark.span")
    assert [(m.get_attribute("data-label"), m.text) for m in marks] == [
        ("Nodule", "small nodule"), ("Effusion", "left pleural effusion")]
    labels = [c.get_attribute("data-label") for c in
              browser.find_elements(By.CSS_SELECTOR, "#labels .chip.positive")]
    assert labels == ["Nodule", "Effusion"]
    ARTIFACTS.mkdir(exist_ok=True)
    assert browser.save_screenshot(str(ARTIFACTS / "viewer.png"))
    # a label filter narrows the list
    Select(browser.find_element(By.ID, "label")).select_by_value("Nodule")
    wait.until(lambda d: d.find_element(By.ID, "list").get_attribute("data-total") == "4")
    ids = [li.get_attribute("data-index") for li in
           browser.find_elements(By.CSS_SELECTOR, "#list li")]
    assert ids == ["0", "3", "6", "9"]
    assert "label=Nodule" in browser.current_url
    # paging and addressing by sample_id
    Select(browser.find_element(By.ID, "label")).select_by_value("")
    wait.until(lambda d: d.find_element(By.ID, "list").get_attribute("data-total") == "12")
    browser.find_element(By.ID, "next-page").click()
    wait.until(lambda d: "6\u201310 of 12" in d.find_element(By.ID, "status").text)
    browser.get(server.url + "?id=stubxr:p4/img9")
    wait.until(lambda d: d.execute_script("return document.body.dataset.ready === '1'"))
    assert "stubxr:p4/img9" in browser.find_element(By.ID, "sample-id").text
    assert "(10 of 12" in browser.find_element(By.ID, "sample-id").text
