"""The mixture viewer (``radharmony mix view``): its row-group index, its HTTP surface and the
page in a real headless Chromium, over small mixtures written by hand (view_fixtures.py)."""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from radharmony.errors import RadHarmonyError
from radharmony.mixture.records import record_id
from radharmony.viewer.mixture import MixtureApp, make_mixture_server
from radharmony.viewer.mixture_index import RecordIndex

import view_fixtures as vf

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
# browser: the headless Chromium fixture; serving and _get: the HTTP harness
from test_viewer import ARTIFACTS, _get, browser, serving  # noqa: E402,F401

GROUNDED = record_id("nih", "phrase_grounding", "g0")
TEMPORAL = record_id("rexgradient", "progression", "t0")
VQA = [record_id("rexgradient", "vqa_open", f"q{i}") for i in range(3)]


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    return vf.make_sources(tmp_path_factory.mktemp("sources"))


@pytest.fixture(scope="module")
def mixture(sources, tmp_path_factory):
    return vf.write_mixture(tmp_path_factory.mktemp("mix") / "out", sources,
                            vf.make_records(sources))


@pytest.fixture(scope="module")
def server(mixture):
    yield from serving(make_mixture_server(mixture, port=0, page_size=4, dataset_viewers={
        "nih_cxr14": "http://127.0.0.1:9/tok/"}))


# -- the index ------------------------------------------------------------------------------------
def test_pages_filter_by_task_source_split(mixture):
    index = RecordIndex(mixture)
    assert (index.n, len(index.group_rows)) == (13, 4)
    vqa = index.page(task="vqa_open")
    assert vqa["total"] == 3 and [it["record_id"] for it in vqa["items"]] == VQA
    assert [it["row"] for it in vqa["items"]] == [2, 6, 9]
    page = index.page(offset=3, limit=3)  # crosses the first row group's end (rows 0-3)
    assert [it["row"] for it in page["items"]] == [3, 4, 5] and page["total"] == 13
    assert page["items"][2]["record_id"] == GROUNDED
    valid = index.page(split="valid")
    assert valid["total"] == 1
    assert valid["items"][0]["record_id"] == record_id("nih", "report_generation", "r3")
    both = index.page(source="nih", split="train", offset=1, limit=2)
    assert both["total"] == 7 and [it["row"] for it in both["items"]] == [1, 3]
    with pytest.raises(RadHarmonyError, match="Unknown task 'vqa'"):
        index.page(task="vqa")


def test_a_filter_skips_row_groups_by_statistics_and_ids_read_one_column(sources, tmp_path):
    recs = sorted(vf.make_records(sources), key=lambda r: r["task"])  # tasks in runs
    index = RecordIndex(vf.write_mixture(tmp_path / "out", sources, recs, row_group_size=3))
    reads = []

    def spy(real):
        def read(g, columns=None, **kw):
            reads.append((g, tuple(columns or ())))
            return real(g, columns=columns, **kw)
        return read
    index.file.read_row_group = spy(index.file.read_row_group)
    index._filter_file.read_row_group = spy(index._filter_file.read_row_group)
    # sorted: finding_labels rows 0-2, phrase_grounding 3, progression 4-5, report 6-9, vqa
    # 10-12; row groups of 3: only group 1 (rows 3-5) can hold progression
    page = index.page(task="progression")
    assert [it["row"] for it in page["items"]] == [4, 5] and page["total"] == 2
    assert sorted({g for g, _ in reads}) == [1] and ("task" in reads[0][1])
    reads.clear()
    assert index.row_of(recs[7]["record_id"]) == 7
    assert reads == [(g, ("record_id",)) for g in range(3)]  # stops at the group holding it


def test_record_json_boxes_and_renderings(mixture):
    app = MixtureApp(mixture)
    g = app.record(record_id=GROUNDED)
    assert g["task"] == "phrase_grounding" and g["fields"]["boxes"][0]["box"] == vf.BOX
    # 320 x 200 original shown at 224 x 140 (scale 0.7, no padding)
    assert [(i["width"], i["height"]) for i in g["images"]] == [(224, 140)]
    assert g["boxes"] == [
        {"kind": "fields", "label": "nodule", "box": pytest.approx([140, 28, 196, 84])},
        {"kind": "target", "label": "nodule", "box": pytest.approx([140, 28, 196, 84])}]
    assert g["rendered"] == {"id": GROUNDED, "image": "nih/wide/grounded.png", "conversations": [
        {"from": "human", "value": "<image>\nWhere is the nodule?"},
        {"from": "gpt", "value": g["target"]}]}
    chat = app.record(record_id=GROUNDED, fmt="hf_chat")["rendered"]
    assert chat["messages"] == [
        {"role": "user", "content": [{"type": "image"}, {"type": "text", "text":
                                     "Where is the nodule?"}]},
        {"role": "assistant", "content": [{"type": "text", "text": g["target"]}]}]
    assert chat["images"] == ["nih/wide/grounded.png"]
    # a format that leaves the record out says why
    assert app.record(record_id=GROUNDED, fmt="r2gen")["rendered"] == {
        "skipped": "not report generation"}
    assert g["source_row"]["dataset"] == "nih_cxr14" and g["source_row"]["sample_id"] == \
        "nih_cxr14:g0"
    t = app.record(record_id=TEMPORAL)
    assert t["prior"]["study_id"] == "study-before-0" and t["prior"]["days"] == 30
    assert len(t["prior"]["images"]) == 2 and len(t["images"]) == 1
    assert all(i["error"] is None for i in t["prior"]["images"])
    assert app.record(row=0)["prior"] is None


def test_cached_mixture_shows_the_letterboxed_square(sources, tmp_path):
    recs = vf.make_records(sources, mode="cache", size=224)
    out = vf.write_mixture(tmp_path / "out", sources, recs,
                           images={"mode": "cache", "size": 224})
    app = MixtureApp(out, size=512)  # the cache's size wins over the display size
    g = app.record(record_id=GROUNDED)
    assert [(i["width"], i["height"]) for i in g["images"]] == [(224, 224)]
    # 320 x 200 -> 224 x 140 content, 42 px padding above and below
    assert [b["box"] for b in g["boxes"]] == [pytest.approx([140, 70, 196, 126])] * 2
    import cv2

    png = app.image_png(record_id=GROUNDED)
    img = cv2.imdecode(np.frombuffer(png, np.uint8), cv2.IMREAD_UNCHANGED)
    assert img.shape == (224, 224) and img[:40].max() == 0 and img[42:182].max() > 0


@pytest.mark.parametrize("dialect", ["maira2", "chexagent", "radfact"])
@pytest.mark.parametrize("mode", ["original", "cache"])
def test_boxes_are_parsed_from_the_target_in_the_mixture_dialect(sources, tmp_path, dialect,
                                                                    mode):
    """The drawn box comes from the target text in the manifest's dialect, for the image the
    record points at: within one bin of the source box (at most 3.2 source px on 320 x 200);
    MAIRA-2 on the original sees only its centred 200 crop (x 60..260): the box is clipped."""
    recs = vf.make_records(sources, mode=mode, size=224, dialect=dialect)
    out = vf.write_mixture(tmp_path / "out", sources, recs, boxes=dialect,
                           images={"mode": mode, "size": 224} if mode == "cache" else None)
    g = MixtureApp(out).record(record_id=GROUNDED)
    fields, target = [b["box"] for b in g["boxes"] if b["kind"] == "fields"], \
        [b["box"] for b in g["boxes"] if b["kind"] == "target"]
    want = fields[0]
    if (dialect, mode) == ("maira2", "original"):  # drawn at the display's scale
        want = [v * fields[0][0] / 200 for v in (200, 40, 260, 120)]
    assert len(target) == 1 and target[0] == pytest.approx(want, abs=0.7 * 3.2 + 1e-6)


# -- HTTP -----------------------------------------------------------------------------------------
def test_http_routes(server):
    status, ctype, body = _get(server.url)
    assert status == 200 and ctype.startswith("text/html") and b"mixture.js" in body
    meta = json.loads(_get(server.url + "api/meta")[2])
    assert meta["records"] == 13 and meta["choices"]["split"] == ["train", "valid"]
    page = json.loads(_get(server.url + "api/records?task=vqa_open&limit=2")[2])
    assert page["total"] == 3 and [it["record_id"] for it in page["items"]] == VQA[:2]
    status, ctype, body = _get(server.url + f"record.png?id={TEMPORAL}&j=1&prior=1")
    assert status == 200 and ctype == "image/png" and body.startswith(b"\x89PNG")
    rec = json.loads(_get(server.url + f"api/record?id={GROUNDED}&format=hf_chat")[2])
    assert rec["rendered"]["messages"][1]["role"] == "assistant"
    assert rec["source_row"]["viewer_link"] == "http://127.0.0.1:9/tok/?id=nih_cxr14%3Ag0"
    assert _get(server.url + "api/records?offset=x")[0] == 400
    assert _get(server.url + f"api/record?id={GROUNDED}&format=jsonl")[0] == 400


def test_a_missing_record_is_a_clear_error(server):
    status, ctype, body = _get(server.url + "api/record?id=0123456789abcdef")
    assert status == 404 and ctype == "application/json"
    assert json.loads(body)["error"].startswith("No record '0123456789abcdef' in the mixture")
    assert b"Traceback" not in body
    assert _get(server.url + "record.png?id=nope")[0] == 404
    assert _get(server.url + "api/record?row=99")[0] == 404


def test_paths_outside_the_sources_are_refused(sources, tmp_path):
    outside = tmp_path / "secret.png"
    outside.write_bytes(Path(sources["nih"]["root"], sources["nih"]["images"][0]).read_bytes())
    link = Path(sources["nih"]["root"]) / "link-out.png"
    if not link.exists():
        os.symlink(outside, link)
    recs = vf.make_records(sources)[:3]
    recs[0]["image_paths"] = ["../../../secret.png"]
    recs[1]["image_paths"] = ["link-out.png"]
    recs[2]["source"] = "elsewhere"
    srv = make_mixture_server(vf.write_mixture(tmp_path / "out", sources, recs), port=0)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        for r in recs:
            status, _, body = _get(srv.url + f"record.png?id={r['record_id']}")
            assert status == 403 and not body.startswith(b"\x89PNG"), r["image_paths"]
        rec = json.loads(_get(srv.url + f"api/record?id={recs[0]['record_id']}")[2])
        assert rec["images"][0]["error"].startswith("Refusing image '../../../secret.png'")
        rec = json.loads(_get(srv.url + f"api/record?id={recs[2]['record_id']}")[2])
        assert "which mixture.json does not list" in rec["images"][0]["error"]
    finally:
        srv.shutdown()
        srv.server_close()


def test_token_loopback_and_read_only_rules(server, mixture):
    base = server.url.split(server.token)[0]
    assert _get(base + "api/meta")[0] == 403
    assert _get(server.url + "api/meta", method="POST")[0] == 501
    assert _get(server.url + "api/meta", headers={"Host": "evil.example:80"})[0] == 403
    assert _get(server.url + "api/meta", headers={"Sec-Fetch-Site": "cross-site"})[0] == 403
    assert _get(server.url + "static/../mixture.py")[0] == 404
    with pytest.raises(RadHarmonyError, match="allow_remote=True"):
        make_mixture_server(mixture, host="0.0.0.0", port=0)


def test_cli_arguments_match_the_dataset_viewer():
    import argparse

    from radharmony.viewer.mixture_cli import add_view_arguments

    p = add_view_arguments(argparse.ArgumentParser())
    args = p.parse_args(["OUT", "--port", "0", "--dataset-viewer", "nih_cxr14=http://h/t/"])
    assert (args.host, args.port, args.size, args.allow_remote, args.open) == \
        ("127.0.0.1", 0, 224, False, False)
    assert dict(args.dataset_viewer) == {"nih_cxr14": "http://h/t/"}
    with pytest.raises(SystemExit):
        p.parse_args(["OUT", "--port", "70000"])


# -- the page in a real browser -------------------------------------------------------------------
def _red_box(png: bytes) -> list[int]:
    """The bounding box [x0, y0, x1, y1] of the pure red pixels of a screenshot."""
    import cv2

    img = cv2.imdecode(np.frombuffer(png, np.uint8), cv2.IMREAD_COLOR)  # BGR
    b, g, r = (img[..., i].astype(int) for i in range(3))
    ys, xs = np.nonzero((r > 200) & (g < 80) & (b < 80))
    assert len(xs), "no red box drawn"
    return [int(xs.min()), int(ys.min()), int(xs.max()), int(ys.max())]


def test_mixture_page_in_headless_chromium(server, browser):  # noqa: F811
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    wait = WebDriverWait(browser, 30)
    browser.get(server.url)
    wait.until(lambda d: d.execute_script("return document.body.dataset.ready === '1'"))
    assert len(browser.find_elements(By.CSS_SELECTOR, "#list li")) == 4  # page size 4 of 13
    assert "1\u20134 of 13" in browser.find_element(By.ID, "status").text
    # filter by task
    Select(browser.find_element(By.ID, "task")).select_by_value("phrase_grounding")
    wait.until(lambda d: d.find_element(By.ID, "list").get_attribute("data-total") == "1")
    assert "task=phrase_grounding" in browser.current_url
    browser.find_element(By.CSS_SELECTOR, f"#list li[data-record-id='{GROUNDED}']").click()
    wait.until(lambda d: d.execute_script(
        "const i = document.querySelector('#images img'); return i && i.complete && "
        "i.naturalWidth > 0"))
    assert '"from": "gpt"' in browser.find_element(By.ID, "rendering").text
    # the drawn box is where the target says: 320 x 200 original, box (200,40)-(280,120),
    # shown at 448 x 280 CSS pixels (x1.4)
    shot = browser.find_element(By.CSS_SELECTOR, "#images .image-box").screenshot_as_png
    assert _red_box(shot) == pytest.approx([280, 56, 392, 168], abs=2)
    ARTIFACTS.mkdir(exist_ok=True)
    assert browser.save_screenshot(str(ARTIFACTS / "mixture_viewer.png"))
    link = browser.find_element(By.ID, "source-link")
    assert link.get_attribute("href") == "http://127.0.0.1:9/tok/?id=nih_cxr14%3Ag0"
    # a temporal record shows both studies
    Select(browser.find_element(By.ID, "task")).select_by_value("progression")
    wait.until(lambda d: d.find_element(By.ID, "list").get_attribute("data-total") == "2")
    browser.find_element(By.CSS_SELECTOR, f"#list li[data-record-id='{TEMPORAL}']").click()
    wait.until(lambda d: d.execute_script(
        "const i = document.querySelectorAll('#prior-images img'); return i.length === 2 && "
        "[...i].every((x) => x.complete && x.naturalWidth > 0)"))
    assert len(browser.find_elements(By.CSS_SELECTOR, "#images img")) == 1
    assert "study-before-0, 30 days earlier" in browser.find_element(By.ID, "prior-info").text
    # the format switch re-renders as HF chat messages
    Select(browser.find_element(By.ID, "format")).select_by_value("hf_chat")
    wait.until(lambda d: '"role": "assistant"' in d.find_element(By.ID, "rendering").text)
    # an unknown record id: a clear message on the page
    browser.get(server.url + "?id=0123456789abcdef")
    wait.until(lambda d: d.execute_script("return document.body.dataset.ready === '1'"))
    error = browser.find_element(By.ID, "error")
    assert error.is_displayed()
    assert error.text.startswith("No record '0123456789abcdef' in the mixture")
    assert not browser.find_element(By.ID, "record").is_displayed()


def test_run_view_prints_the_address_and_serves(mixture):
    import subprocess

    code = ("import argparse, sys; from radharmony.viewer.mixture_cli import add_view_arguments,"
            " run_view; p = add_view_arguments(argparse.ArgumentParser()); "
            "p.add_argument('--json', action='store_true'); sys.exit(run_view(p.parse_args()))")
    proc = subprocess.Popen([sys.executable, "-c", code, str(mixture), "--port", "0", "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    try:
        url = json.loads(proc.stdout.readline())["url"]
        assert url.startswith("http://127.0.0.1:") and url.endswith("/")
        assert json.loads(_get(url + "api/meta")[2])["records"] == 13
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    assert f"Serving the mixture {mixture} at {url} (read-only; Ctrl-C to stop)" in err
