"""The 3-D trainers' formats (``ct-chat``, ``m3d``, ``radfm``, ``hf-chat`` with volumes) on a
mixture built from CT-RATE and RSNA PE replicas: every file read back by a reader doing what
the trainer's loader does (``volume_readers``), the preset's geometry in the manifest, the same
bytes with worker processes."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest

from radharmony.errors import RadHarmonyError
from radharmony.fake import make_fake
from radharmony.mixture import build, export_mixture
from radharmony.mixture.formats.ct3d import export_volumes, radfm_text
from radharmony.volumes.presets import Preset

from volume_readers import read_ct_chat, read_hf_video, read_m3d, read_radfm

#: CT-CLIP's preset made small (the same kind of geometry: zoom to a spacing, crop or pad)
SMALL_CT_CLIP = Preset("ct_clip", spacing=(3.0, 1.5, 1.5), convention="zoom", size=(8, 16, 16),
                       out=(-1.0, 1.0), clip_first=True, pad=-1.0)


@pytest.fixture(scope="module")
def mixture(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("ct-mixture")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ct = make_fake("ct_rate_train", base / "ct_rate")["base_image_dir"]
        pe = make_fake("rsna_pe", base / "rsna_pe")["base_image_dir"]
        spec = {"name": "ct", "seed": 3, "valid": 0.3, "sources": [
            {"dataset": "ct_rate_train", "root": str(ct), "split": "train",
             "tasks": {"ct_report_findings": "all", "ct_finding_question": "random:6"}},
            {"dataset": "rsna_pe", "root": str(pe), "tasks": {"ct_exam_question": "all"}}]}
        build(spec, base / "mix", progress=False)
    return base / "mix"


def test_m3d_captions_vqa_and_volumes(mixture, tmp_path):
    s = export_mixture(mixture, "m3d", tmp_path / "m3d.json", progress=False)
    got = read_m3d(tmp_path / "m3d.json", tmp_path / "volumes")
    # six CT-RATE studies' findings (one volume each), six finding questions, 13 PE questions
    assert sum(map(len, got["captions"].values())) == 6 and len(got["vqa"]) == 6 + 13
    assert s["entries"] == 25 and s["volumes"]["written"] == got["volumes"] == 6 + 3
    pe = [r for r in got["vqa"] if r["Question Type"] == "ct_exam_question"]
    # every exam question has its choices as options and its answer's letter
    assert pe and all(r["Answer Choice"] and r["Choice A"] for r in pe)
    chronicity = [r for r in pe if "acute, chronic, or" in r["Question"]]
    assert [r["Choice A"] for r in chronicity][:1] == ["chronic"]
    m = json.loads((tmp_path / "volumes.json").read_text())
    assert m["preset"]["size"] == [32, 256, 256] and m["preset"]["orientation"] == "SPL"
    assert m["preset"]["intensity"]["window"] == "minmax"
    v = next(iter(m["volumes"].values()))
    assert v["shape"] == [1, 32, 256, 256] and len(v["spacing_mm"]) == 3


def test_ct_chat_nifti_or_encoder_arrays(mixture, tmp_path):
    s = export_volumes(mixture, "ct-chat", tmp_path / "a" / "train.json", preset=SMALL_CT_CLIP,
                       progress=False)
    got = read_ct_chat(tmp_path / "a" / "train.json", tmp_path / "a" / "volumes")
    assert len(got) == s["entries"] == 25
    assert {g["shape"] for g in got} == {(8, 16, 16)}
    assert got[0]["image"].endswith(".nii.gz")
    m = json.loads((tmp_path / "a" / "volumes.json").read_text())
    assert m["preset"]["spacing_mm"] == [3.0, 1.5, 1.5]
    assert m["preset"]["intensity"] == {"window": "hu", "lo": -1000.0, "hi": 1000.0,
                                        "out": [-1.0, 1.0], "clip": True, "pad": -1.0}
    export_volumes(mixture, "ct-chat", tmp_path / "b" / "train.json", preset=SMALL_CT_CLIP,
                   volumes="npy", progress=False)
    arrays = read_ct_chat(tmp_path / "b" / "train.json", tmp_path / "b" / "volumes")
    assert {g["shape"] for g in arrays} == {(1, 8, 16, 16)}


def test_radfm_volumes_and_image_tokens(mixture, tmp_path):
    export_mixture(mixture, "radfm", tmp_path / "radfm.json", split="train", progress=False)
    shapes = read_radfm(tmp_path / "radfm.json", tmp_path / "volumes")
    # CT-RATE's 12 slices stay 12; RSNA PE's 10 round down to 8
    assert shapes and {s[3] for s in shapes} == {8, 12}
    assert radfm_text("Q").endswith("<image31></image>Q")


def test_hf_chat_with_volumes_as_videos(mixture, tmp_path):
    export_mixture(mixture, "hf-chat", tmp_path / "train.jsonl", progress=False)
    counts = read_hf_video(tmp_path / "train.jsonl", tmp_path / "volumes")
    assert len(counts) == 25 and set(counts) == {32}  # the m3d preset's 32 slices


def test_the_same_bytes_with_worker_processes(mixture, tmp_path):
    one = export_volumes(mixture, "m3d", tmp_path / "a" / "m.json", progress=False)
    two = export_volumes(mixture, "m3d", tmp_path / "b" / "m.json", workers=2, progress=False)
    assert one["volumes"]["written"] == two["volumes"]["written"]
    for name in ("m.json", "m_vqa.csv"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    a = sorted((tmp_path / "a" / "volumes").rglob("*.npy"))
    assert [p.name for p in a] == [p.name for p in sorted((tmp_path / "b" / "volumes")
                                                          .rglob("*.npy"))]
    assert np.array_equal(np.load(a[0]), np.load(str(a[0]).replace("/a/", "/b/")))


def test_unknown_options_are_refused(mixture, tmp_path):
    with pytest.raises(RadHarmonyError, match="volumes"):
        export_volumes(mixture, "m3d", tmp_path / "m.json", volumes="nifti")
    with pytest.raises(RadHarmonyError, match="split"):
        export_volumes(mixture, "m3d", tmp_path / "m.json", split="test")


def test_the_command_line_writes_a_3d_format(mixture, tmp_path):
    from radharmony.cli.main import main

    assert main(["mix", "export", str(mixture), "--format", "m3d", "--to",
                 str(tmp_path / "m.json"), "--split", "valid", "--quiet"]) == 0
    got = read_m3d(tmp_path / "m.json", tmp_path / "volumes")
    assert got["captions"]["train"] == [] and got["volumes"] > 0


def test_the_2d_formats_leave_volume_records_out(mixture, tmp_path):
    for fmt, dest in (("llava", "l.json"), ("r2gen", "annotation.json")):
        s = export_mixture(mixture, fmt, tmp_path / dest, progress=False)
        assert s["entries"] == 0 and s["skipped"] == {
            "a volume (written by ct-chat, m3d, radfm or hf-chat alone)": 25}


def test_the_same_bytes_on_ray(mixture, tmp_path):
    pytest.importorskip("ray")
    export_volumes(mixture, "m3d", tmp_path / "a" / "m.json", progress=False)
    s = export_volumes(mixture, "m3d", tmp_path / "b" / "m.json", engine="ray", workers=2,
                       progress=False)
    assert s["volumes"]["written"] == 9
    for name in ("m.json", "m_vqa.csv"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    for a in sorted((tmp_path / "a" / "volumes").rglob("*.npy")):
        assert np.array_equal(np.load(a), np.load(str(a).replace("/a/", "/b/")))
