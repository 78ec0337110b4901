"""The audit page: its numbers equal counts made here from the tables, it renders in headless
Chromium with every section (screenshot kept in test-artifacts/), and `radharmony audit`."""

from __future__ import annotations

import html
import json
import re
import warnings

import pytest

from radharmony.audit import audit
from radharmony.cli.main import main
from radharmony.fake.duplicates import plant_copies, plant_problems, revary
from radharmony.fake.nih import write_nih
from radharmony.registry import get_dataset_class
from radharmony.vocabulary import derive_findings
from test_viewer import ARTIFACTS, browser  # noqa: F401  (the headless Chromium fixture)

SECTIONS = ("summary", "labels", "demographics", "views", "duplicates", "flags", "families")


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    root = write_nih(tmp_path_factory.mktemp("nih"), n_patients=24, size=300)
    nih = get_dataset_class("nih_cxr14")(root, cache_dir=None)
    google = get_dataset_class("nih_cxr14_google")(root, cache_dir=None)
    files = [nih.image_file(i) for i in range(len(nih))]
    revary(files, seed=1)
    plant_copies(files[:-4], 3, seed=2, exact=1)
    plant_problems(files, seed=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = audit([nih, google], progress=False)
    out = tmp_path_factory.mktemp("page") / "audit.html"
    report.to_html(out)
    return root, nih, google, report, out


def cells(text: str) -> dict[str, str]:
    return {html.unescape(k): v.replace(",", "") for k, v in
            re.findall(r'data-key="([^"]+)">([^<]*)<', text)}


def test_page_numbers_equal_an_independent_count(page):
    _, nih, google, report, out = page
    got = cells(out.read_text())
    for ds in (nih, google):
        df = ds.harmonized_df
        key = ds.spec.key
        for split, part in df.groupby("split"):
            assert int(got[f"counts|{key}|{split}|images"]) == len(part)
            assert int(got[f"counts|{key}|{split}|patients"]) == part["patient_id"].nunique()
        for view, n in df["view"].value_counts().items():
            assert int(got[f"views|{key}|{view}"]) == n
        for sex, n in df["sex"].value_counts().items():
            assert int(got[f"sex|{key}|{sex}"]) == n
    df = nih.harmonized_df  # NIH's Effusion is exact to pleural_effusion: 1 / 0 as is
    for split, part in df.groupby("split"):
        assert int(got[f"labels|nih_cxr14|{split}|pleural_effusion|positive"]) == \
            int((part["Effusion"] == 1).sum())
        assert int(got[f"labels|nih_cxr14|{split}|pleural_effusion|unknown"]) == 0
    g = derive_findings(google.harmonized_df, google.spec)  # Google: 4 findings, rest unknown
    for split, idx in google.harmonized_df.groupby("split").groups.items():
        assert int(got[f"labels|nih_cxr14_google|{split}|pneumothorax|unknown"]) == \
            int(g.loc[idx, "pneumothorax"].isna().sum())
    flags = report.flags.merge(report.images[["sample_id", "source"]], on="sample_id")
    for (src, flag), n in flags.groupby(["source", "flag"]).size().items():
        assert int(got[f"flags|{src}|{flag}|images"]) == n
    assert int(got["families|nih_cxr14|nih_cxr14, nih_cxr14_google|shared_patients"]) == \
        google.harmonized_df["patient_id"].nunique()
    same = report.pairs[report.pairs["same_file"]]
    assert len(same) == len(google)


def test_page_is_self_contained(page):
    text = page[4].read_text()
    assert "<script" not in text and "http://" not in text and "https://" not in text
    assert all(f'<section id="{s}">' in text for s in SECTIONS)
    assert text.count('class="pair"') >= 4 and 'data-flag="inverted"' in text


def test_page_in_headless_chromium(page, browser):  # noqa: F811
    from selenium.webdriver.common.by import By

    browser.get(page[4].as_uri())
    for sid in SECTIONS:
        sec = browser.find_element(By.ID, sid)
        browser.execute_script("arguments[0].scrollIntoView()", sec)
        assert sec.is_displayed() and sec.find_element(By.TAG_NAME, "h2").text
    images = browser.find_elements(By.TAG_NAME, "img")
    assert len(images) > 10
    assert all(browser.execute_script("return arguments[0].complete && "
                                      "arguments[0].naturalWidth > 0", i) for i in images)
    pairs = browser.find_elements(By.CSS_SELECTOR, "#duplicates .pair")
    assert pairs and all(len(p.find_elements(By.TAG_NAME, "img")) == 2 for p in pairs)
    browser.execute_script("window.scrollTo(0, 0)")
    ARTIFACTS.mkdir(exist_ok=True)
    assert browser.save_screenshot(str(ARTIFACTS / "audit.png"))
    assert (ARTIFACTS / "audit.png").stat().st_size > 20_000


def test_cli_audit_writes_page_and_exclusions(page, tmp_path, capsys):
    root = page[0]
    code = main(["audit", "nih_cxr14", "nih_cxr14_google", "--root", f"nih_cxr14={root}",
                 "--root", f"nih_cxr14_google={root}", "--html", str(tmp_path / "a.html"),
                 "--exclusions", str(tmp_path / "x.txt"), "--exclude-flags", "unreadable",
                 "--json", "-q"])
    out = json.loads(capsys.readouterr().out)
    assert code == 1  # planted copies straddle patients, one file is unreadable
    assert out["pairs"] == page[3].summary()["pairs"]
    assert out["flags"] == page[3].summary()["flags"] and out["flags"]["unreadable"] >= 1
    ids = (tmp_path / "x.txt").read_text().splitlines()[1:]
    assert len(ids) == out["excluded"] and (tmp_path / "a.html").stat().st_size > 10_000
    assert main(["audit", "nih_cxr14", "--root", f"nih_cxr14={root}", "--exclude-flags",
                 "ugly", "-q"]) == 2
