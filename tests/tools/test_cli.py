"""The ``radharmony`` command end to end on fake datasets in the real on-disk format."""

from __future__ import annotations

import radharmony
import json
import os
import re
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import pandas as pd
import pytest

from radharmony import cli
from radharmony.cli import commands
from radharmony.table.harmonizer import BaseHarmonizer
from radharmony.datasets.rexgradient import ReXGradientValidDataset, ReXGradientValidHarmonizer
from radharmony.fake import make_fake

REPO = Path(__file__).resolve().parents[2]
COMMANDS = ["list", "info", "harmonize", "validate", "cache", "view", "demo"]


@pytest.fixture(scope="module")
def rex(tmp_path_factory) -> Path:
    """A ReXGradient replica (train/valid/test); returns the image root (``deid_png``)."""
    return Path(make_fake("rexgradient_valid", tmp_path_factory.mktemp("rex"))["base_image_dir"])


@pytest.fixture()
def damaged(rex, tmp_path) -> tuple[Path, dict]:
    """A copy of the replica with one valid-split image missing, one truncated and one a
    symlink to a file outside the image root."""
    root = tmp_path / "copy"
    shutil.copytree(rex.parent, root, symlinks=True)
    images = root / "deid_png"
    df = ReXGradientValidHarmonizer(base_image_dir=images).harmonize()
    missing, truncated, escaping = df["image_path"][0], df["image_path"][1], df["image_path"][2]
    (images / missing).unlink()
    data = (images / truncated).read_bytes()
    (images / truncated).write_bytes(data[:200])
    outside = tmp_path / "outside.png"
    shutil.copy(images / escaping, outside)
    (images / escaping).unlink()
    (images / escaping).symlink_to(outside)
    return images, {"missing": missing, "undecodable": truncated, "unsafe_path": escaping}


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def run_json(capsys, *argv: str):
    code, out, err = run(capsys, *argv, "--json")
    return code, json.loads(out), err


# -- help, usage, entry points --------------------------------------------------------------------
@pytest.mark.parametrize("command", [None, *COMMANDS])
def test_help_everywhere(capsys, command):
    with pytest.raises(SystemExit) as exc:
        cli.main([command, "--help"] if command else ["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: radharmony")
    if command in ("info", "harmonize", "validate", "cache", "view"):
        assert "--root DIR" in out and "--json" in out


@pytest.mark.parametrize("argv", [
    [], ["frobnicate"], ["info", "rexgradient_valid"], ["validate", "x", "--root", "r",
                                                         "--workers", "-1"],
    ["view", "x", "--root", "r", "--port", "70000"], ["list", "--bogus"]])
def test_argparse_usage_errors_exit_2(capsys, argv):
    with pytest.raises(SystemExit) as exc:
        cli.main(argv)
    assert exc.value.code == 2
    assert "usage: radharmony" in capsys.readouterr().err


def test_semantic_usage_errors_exit_2(capsys, rex, tmp_path):
    code, _, err = run(capsys, "info", "rexgradient_vaild", "--root", rex)
    assert code == 2 and "did you mean 'rexgradient_valid'" in err
    code, _, err = run(capsys, "harmonize", "rexgradient", "--root", rex, "--out",
                       tmp_path / "t.csv")
    assert code == 2 and "one file per split" in err and "--out FOLDER" in err
    code, _, err = run(capsys, "harmonize", "rexgradient_valid", "--root", rex, "--out",
                       tmp_path / "t.csv", "--format", "parquet")
    assert code == 2 and "--format parquet" in err and "t.csv" in err
    code, _, err = run(capsys, "harmonize", "rexgradient_valid", "--root", rex, "--out",
                       tmp_path / "t.xlsx")
    assert code == 2 and ".parquet or .csv" in err
    code, _, err = run(capsys, "info", "rexgradient", "--root", rex, "--csv-path", "x.json")
    assert code == 2 and "--csv-path names one metadata file" in err
    code, _, err = run(capsys, "view", "rexgradient_valid", "--root", rex, "--host", "0.0.0.0")
    assert code == 2 and "--allow-remote" in err


def test_errors_as_json(capsys, tmp_path):
    code, payload, err = run_json(capsys, "info", "nope", "--root", tmp_path)
    assert code == 2 and payload["ok"] is False
    assert payload["error"]["type"] == "RegistryError" and "nope" in payload["error"]["found"]
    code, payload, err = run_json(capsys, "info", "rexgradient_valid", "--root", tmp_path)
    assert code == 1 and payload["error"]["type"] == "MetadataNotFoundError"
    assert "valid_metadata_view_position.json" in err


def test_entry_points():
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["scripts"]["radharmony"] == "radharmony.cli:main"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    res = subprocess.run([sys.executable, "-m", "radharmony", "--version"], env=env,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and res.stdout.strip().startswith("radharmony ")


# -- list / info / harmonize ----------------------------------------------------------------------
def test_list(capsys):
    code, rows, _ = run_json(capsys, "list")
    assert code == 0
    by_key = {r["key"]: r for r in rows}
    train = by_key["rexgradient_train"]
    assert train["expected"] == {"images": 238_968, "studies": 140_000, "patients": 95_716}
    assert train["outputs"] == ["bbox", "report"] and train["family"] == "rexgradient"
    assert set(train["splits"]) == {"rexgradient_train", "rexgradient_valid", "rexgradient_test"}
    assert "Non-Commercial" in train["access"]
    code, out, _ = run(capsys, "list")
    assert code == 0 and "rexgradient_valid" in out and "238,968" in out


def test_info_matches_the_table(capsys, rex):
    df = ReXGradientValidHarmonizer(base_image_dir=rex).harmonize()
    code, results, _ = run_json(capsys, "info", "rexgradient_valid", "--root", rex)
    assert code == 0 and len(results) == 1
    info = results[0]
    assert (info["images"], info["studies"], info["patients"]) == (
        len(df), df["study_id"].nunique(), df["patient_id"].nunique())
    assert info["expected"]["images"] == 17_007
    assert sum(info["view_positions"].values()) == len(df)
    assert info["view_positions"].get("(missing)", 0) == df["view_position"].isna().sum()
    assert info["reports"]["with_report"] == df["report"].notna().sum()
    assert info["labels"] == {}
    code, results, _ = run_json(capsys, "info", "rexgradient", "--root", rex)
    assert [r["key"] for r in results] == ["rexgradient_test", "rexgradient_train",
                                           "rexgradient_valid"]
    code, out, _ = run(capsys, "info", "rexgradient_valid", "--root", rex)
    assert code == 0 and re.search(rf"^  images +{len(df)} +\(full release: 17,007\)$", out,
                                   re.M)


def test_info_label_prevalence():
    from radharmony.spec import DatasetSpec

    spec = DatasetSpec(key="t", title="t", label_cols=("A",))
    df = pd.DataFrame({"patient_id": ["1", "1", "2", "3"], "study_id": ["a", "b", "c", "d"],
                       "image_path": list("wxyz"), "view_position": ["PA", None, "PA", "AP"],
                       "report": ["r", None, " ", "r"], "A": [1.0, -1.0, float("nan"), 0.0]})
    info = commands.table_info(df, spec=spec)
    assert info["labels"]["A"] == {"positive": 1, "negative": 1, "uncertain": 1, "missing": 1,
                                   "prevalence": 0.25}
    assert info["view_positions"] == {"PA": 2, "(missing)": 1, "AP": 1}
    assert info["reports"] == {"with_report": 2, "coverage": 0.5}
    assert (info["studies"], info["patients"]) == (4, 3)


def test_harmonize_parquet_and_csv(capsys, rex, tmp_path):
    df = ReXGradientValidHarmonizer(base_image_dir=rex).harmonize()
    code, result, _ = run_json(capsys, "harmonize", "rexgradient_valid", "--root", rex,
                               "--out", tmp_path / "valid.parquet")
    assert code == 0 and result["rows"] == len(df)
    loaded = radharmony.load_harmonizer(tmp_path / "valid.parquet").harmonize()
    pd.testing.assert_frame_equal(loaded, df)
    code, out, _ = run(capsys, "harmonize", "rexgradient_valid", "--root", rex, "--out",
                       tmp_path / "sub" / "valid.csv")
    assert code == 0 and f"Wrote {len(df)} rows" in out
    back = pd.read_csv(tmp_path / "sub" / "valid.csv")
    assert list(back.columns) == list(df.columns)
    assert back["image_path"].tolist() == df["image_path"].tolist()


def test_harmonize_a_family_writes_every_split_named_by_key(capsys, rex, tmp_path):
    """``harmonize rexgradient --out FOLDER``: one file per split, FOLDER/<key>.parquet (or
    .csv with --format csv), each what that split's harmonizer gives."""
    code, results, _ = run_json(capsys, "harmonize", "rexgradient", "--root", rex, "--out",
                                tmp_path / "tables")
    keys = radharmony.families()["rexgradient"]
    assert code == 0 and [r["key"] for r in results] == keys
    assert sorted(p.name for p in (tmp_path / "tables").iterdir()) == \
        sorted(f"{k}.parquet" for k in keys)
    for r in results:
        want = radharmony.get_harmonizer_class(r["key"])(base_image_dir=rex).harmonize()
        pd.testing.assert_frame_equal(radharmony.load_harmonizer(r["out"]).harmonize(), want)
        assert r["rows"] == len(want) > 0
    code, out, _ = run(capsys, "harmonize", "rexgradient", "--root", rex, "--out",
                       tmp_path / "csv", "--format", "csv", "-q")
    assert code == 0 and out.count("Wrote") == len(keys)
    assert (tmp_path / "csv" / "rexgradient_test.csv").is_file()
    code, result, _ = run_json(capsys, "harmonize", "rexgradient_valid", "--root", rex,
                               "--out", tmp_path / "one")  # a folder for one split too
    assert code == 0 and result["out"] == str(tmp_path / "one" / "rexgradient_valid.parquet")


def test_harmonize_help_says_what_a_family_does(capsys):
    with pytest.raises(SystemExit):
        cli.main(["harmonize", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "dataset family" in out and "<key>.parquet" in out and "not a family" not in out


# -- validate -------------------------------------------------------------------------------------
def test_validate_clean_replica(capsys, rex):
    code, reports, err = run_json(capsys, "validate", "rexgradient", "--root", rex, "--images")
    assert code == 0, reports
    assert [r["ok"] for r in reports] == [True, True, True]
    assert all(r["checked"] == r["rows"] > 0 for r in reports)
    assert "validating rexgradient" in err  # progress on stderr, stdout stays pure JSON


@pytest.mark.parametrize("workers", [0, 2])
def test_validate_finds_each_problem(capsys, damaged, workers):
    images, bad = damaged
    code, (report,), _ = run_json(capsys, "validate", "rexgradient_valid", "--root", images,
                                  "--images", "--workers", workers, "--quiet")
    assert code == 1 and report["ok"] is False
    assert report["problems"] == {"missing": 1, "undecodable": 1, "unsafe_path": 1}
    for kind, path in bad.items():
        assert report["first"][kind][0]["image_path"] == path
    code, (report,), _ = run_json(capsys, "validate", "rexgradient_valid", "--root", images,
                                  "--quiet")  # without --images nothing is decoded
    assert code == 1 and report["problems"] == {"missing": 1, "unsafe_path": 1}
    code, out, _ = run(capsys, "validate", "rexgradient_valid", "--root", images, "-q")
    assert code == 1 and "PROBLEMS" in out and bad["missing"] in out


def test_validate_reports_unreadable_metadata(capsys, rex, tmp_path):
    broken = tmp_path / "valid_metadata_view_position.json"
    broken.write_text("{not json")
    code, (report,), _ = run_json(capsys, "validate", "rexgradient_valid", "--root", rex,
                                  "--csv-path", broken)
    assert code == 1 and report["problems"] == {"metadata": 1}
    detail = report["first"]["metadata"][0]["detail"]
    assert "invalid JSON" in detail and "line 1" in detail and str(broken) in detail


def test_validate_lists_escaping_and_duplicate_paths(capsys, rex, tmp_path):
    meta = rex.parent / "download" / "metadata" / "valid_metadata_view_position.json"
    raw = json.loads(meta.read_text())
    first, second = list(raw)[:2]
    raw[first]["ImagePath"][0] = "../deid_png/../../etc/passwd"
    raw[second]["ImagePath"][0] = raw[first]["ImagePath"][-1] = "/abs/x.png"
    edited = tmp_path / "valid_metadata_view_position.json"
    edited.write_text(json.dumps(raw))
    code, (report,), _ = run_json(capsys, "validate", "rexgradient_valid", "--root", rex,
                                  "--csv-path", edited)
    assert code == 1
    assert report["problems"]["unsafe_path"] == 3
    assert [p["image_path"] for p in report["first"]["unsafe_path"]] == [
        "../../etc/passwd", "/abs/x.png", "/abs/x.png"]


# -- cache ----------------------------------------------------------------------------------------
def test_cache_builds_every_entry(capsys, rex, tmp_path):
    n = len(ReXGradientValidHarmonizer(base_image_dir=rex).harmonize())
    cache = tmp_path / "cache"
    code, (report,), err = run_json(capsys, "cache", "rexgradient_valid", "--root", rex,
                                    "--cache-dir", cache, "--workers", 2)
    assert code == 0 and (report["images"], report["cached"], report["failed"]) == (n, n, 0)
    assert "caching" in err

    def packed():  # every image in a pack (what CachedLoader reads), no loose entry left
        ds = ReXGradientValidDataset(base_image_dir=rex, cache_dir=cache)
        _, pack_of, _ = ds.image_cache.locate(ds.cache_keys())
        return bool((pack_of >= 0).all()) and not list(cache.rglob("*.rhc"))

    assert packed()
    packs = sorted(p.stat().st_mtime_ns for p in cache.rglob("*.rhp"))
    code, (report,), _ = run_json(capsys, "cache", "rexgradient_valid", "--root", rex,
                                  "--cache-dir", cache, "-q")
    assert code == 0 and packed()
    assert sorted(p.stat().st_mtime_ns for p in cache.rglob("*.rhp")) == packs  # nothing rebuilt


def test_cache_reports_failures(capsys, damaged, tmp_path):
    images, bad = damaged
    code, (report,), _ = run_json(capsys, "cache", "rexgradient_valid", "--root", images,
                                  "--cache-dir", tmp_path / "c", "-q")
    assert code == 1 and report["failed"] == 3
    details = " ".join(f["detail"] for f in report["first_failures"])
    assert "does not exist" in details and "outside base_image_dir" in details


# -- demo and view --------------------------------------------------------------------------------
def test_demo_forwards_to_demo_main(capsys, monkeypatch):
    import radharmony.demo

    seen = []
    monkeypatch.setattr(radharmony.demo, "main", lambda argv: seen.append(argv) or 0)
    assert run(capsys, "demo", "--out", "x")[0] == 0
    assert seen == [["--out", "x"]]
    monkeypatch.setattr(radharmony.demo, "main", lambda argv: 3)
    assert run(capsys, "demo")[0] == 3


def test_view_serves_the_dataset(rex):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", "radharmony", "view", "rexgradient",
                             "--root", str(rex), "--port", "0", "--json"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        started = json.loads(proc.stdout.readline())
        url = started["url"]
        assert url.startswith("http://127.0.0.1:")
        with urllib.request.urlopen(url + "api/meta", timeout=30) as r:
            meta = json.load(r)
        assert [s["key"] for s in meta["splits"]] == started["keys"] == [
            "rexgradient_test", "rexgradient_train", "rexgradient_valid"]
        with urllib.request.urlopen(url + "api/sample?split=rexgradient_valid&index=0",
                                    timeout=30) as r:
            sample = json.load(r)
        assert sample["sample_id"].startswith("rexgradient_valid:")
        assert sample["width"] == 224 and sample["image_error"] is None
        with urllib.request.urlopen(url + "image.png?split=rexgradient_valid&index=0",
                                    timeout=30) as r:
            assert r.read(8) == b"\x89PNG\r\n\x1a\n"
    finally:
        proc.terminate()
        proc.wait(timeout=30)
