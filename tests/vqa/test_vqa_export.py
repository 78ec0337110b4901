"""VQA questions as LLaVA conversations, through the study exporter's to_llava."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from radharmony.datasets.rexvqa import ReXVQATestDataset
from radharmony.datasets.vqa_rad import VQARADChestDataset
from radharmony.export import DeepImageWarning
from radharmony.export.study_formats import to_llava
from radharmony.fake.rexvqa import write_rexvqa
from radharmony.fake.vqa_rad import write_vqa_rad


def test_mcq_questions_with_options_in_the_prompt(tmp_path):
    ds = ReXVQATestDataset(write_rexvqa(tmp_path / "d", studies={"test": 4}), cache_dir=None)
    out = to_llava(ds, tmp_path / "vqa.json", flavor="onevision", progress=False)
    entries = json.loads((tmp_path / "vqa.json").read_text())
    df = ds.harmonized_df
    assert out["complete"] and out["num_studies"] == len(entries) == len(df)
    assert len(list((tmp_path / "vqa_images").glob("*.png"))) == \
        len({p for ps in df["image_paths"] for p in ps})
    e, row = entries[0], df.iloc[0]
    human, gpt = (t["value"] for t in e["conversations"])
    assert human.count("<image>") == len(row.image_paths) == len(e["image"])
    assert row.question in human and all(o in human for o in row.options)
    assert human.endswith("Answer with the option's letter from the given choices directly.")
    assert gpt == row.answer_letter and e["id"] == ds.sample_ids[0]
    assert all((tmp_path / f).is_file() for f in e["image"])


def test_resume_keeps_intact_parts_and_rewrites_one_whose_image_changed(tmp_path):
    ds = ReXVQATestDataset(write_rexvqa(tmp_path / "d", studies={"test": 6}), cache_dir=None)
    path = tmp_path / "vqa.json"
    first = to_llava(ds, path, shard_size=4, flavor="onevision", progress=False)
    entries, parts = json.loads(path.read_text()), tmp_path / "vqa_parts"
    assert len(first["shards"]) == -(-len(ds) // 4) >= 3
    assert sum(s["entries"] for s in first["shards"]) == len(entries) == len(ds)
    stamps = {s["name"]: (parts / s["name"]).stat().st_mtime_ns for s in first["shards"]}
    last = entries[-1]["image"][0]  # its part is the last one (and any other sharing it)
    users = {s["name"] for s in first["shards"]
             if any(last in e["image"] for e in json.loads((parts / s["name"]).read_text()))}
    good = (tmp_path / last).read_bytes()
    (tmp_path / last).write_bytes(b"changed")
    again = to_llava(ds, path, shard_size=4, flavor="onevision", progress=False)
    assert again["shards"] == first["shards"] and json.loads(path.read_text()) == entries
    rewritten = {n for n, t in stamps.items() if (parts / n).stat().st_mtime_ns != t}
    assert rewritten == users and len(users) < len(stamps)
    assert (tmp_path / last).read_bytes() == good


def test_open_questions_and_original_images(tmp_path):
    ds = VQARADChestDataset(write_vqa_rad(tmp_path / "d"), cache_dir=None)
    to_llava(ds, tmp_path / "rad.json", images="original", progress=False)  # LLaVA-1.5
    entries = json.loads((tmp_path / "rad.json").read_text())
    by_id = {e["question_id"]: e for e in entries}
    for row in ds.harmonized_df.itertuples():
        e = by_id[row.question_id]
        assert e["conversations"][1]["value"] == row.answer
        assert e["image"] == str(ds.base_image_dir / row.image_paths[0])
        assert "single word or phrase" in e["conversations"][0]["value"]


def _expected(ds):
    df = ds.harmonized_df
    return {sid: row for sid, row in zip(ds.sample_ids, df.itertuples())}


def test_parquet_one_row_per_question(tmp_path):
    import pyarrow.parquet as pq
    from datasets import load_dataset

    from radharmony.export.study_formats import to_parquet

    ds = ReXVQATestDataset(write_rexvqa(tmp_path / "d", studies={"test": 4}), cache_dir=None)
    manifest = to_parquet(ds, tmp_path / "pq", shard_size=5, progress=False)
    files = sorted(str(p) for p in (tmp_path / "pq").glob("*.parquet"))
    assert len(files) == len(manifest["shards"]) == -(-len(ds) // 5) and manifest["complete"]
    table = pq.read_table(files).to_pylist()
    want = _expected(ds)
    assert [r["sample_id"] for r in table] == list(ds.sample_ids)
    for r in table:
        row = want[r["sample_id"]]
        assert (r["question_id"], r["question"], r["answer"], r["answer_letter"],
                r["explanation"], r["task"], r["category"], r["subcategory"]) == \
            (row.question_id, row.question, row.answer, row.answer_letter, row.explanation,
             row.task, row.category, row.subcategory)
        assert r["options"] == list(row.options) and len(r["options"]) > 1
        assert r["image_paths"] == list(row.image_paths)
        assert len(r["images"]) == len(row.image_paths) and r["images"][0]["bytes"][:4] == \
            b"\x89PNG"
    hf = load_dataset("parquet", data_files=files, split="train")
    assert hf.features["images"].feature.__class__.__name__ == "Image"
    first = hf[0]
    assert first["question"] == table[0]["question"] and first["options"] == table[0]["options"]
    assert first["images"][0].size == (ds.pipeline.size, ds.pipeline.size)
    again = to_parquet(ds, tmp_path / "pq", shard_size=5, progress=False)  # resumes: kept
    assert [s["sha256"] for s in again["shards"]] == [s["sha256"] for s in manifest["shards"]]


def test_webdataset_one_sample_per_question(tmp_path):
    import tarfile

    from radharmony.export.study_formats import to_study_webdataset

    ds = ReXVQATestDataset(write_rexvqa(tmp_path / "d", studies={"test": 3}), cache_dir=None)
    with pytest.warns(DeepImageWarning, match=r"4 of 4 shards hold 16-bit images"):
        to_study_webdataset(ds, tmp_path / "wds", shard_size=4, images="original",
                            progress=False)
    members = {}
    for shard in sorted((tmp_path / "wds").glob("*.tar")):
        with tarfile.open(shard) as tar:
            for m in tar.getmembers():
                members[m.name] = tar.extractfile(m).read()
    metas = [json.loads(v) for k, v in members.items() if k.endswith(".json")]
    assert sorted(m["sample_id"] for m in metas) == sorted(ds.sample_ids)
    want = _expected(ds)
    for m in metas:
        key = m["key"]
        assert "." not in key and ":" not in key  # WebDataset groups by the first dot
        row = want[m["sample_id"]]
        assert m["question"] == row.question and m["answer_letter"] == row.answer_letter
        assert m["options"] == list(row.options)
        for j, rel in enumerate(row.image_paths):
            name = f"{key}.{j}{Path(rel).suffix.lower()}"
            assert name in m["images"]
            assert members[name] == (ds.base_image_dir / rel).read_bytes()


@pytest.fixture(scope="module")
def diff(tmp_path_factory):
    from radharmony.datasets.medical_diff_vqa import MedicalDiffVQADataset
    from radharmony.fake.medical_diff_vqa import write_medical_diff_vqa

    root = write_medical_diff_vqa(tmp_path_factory.mktemp("diff"))
    return MedicalDiffVQADataset(root, cache_dir=None)


def _reference(ds):
    """sample id -> (ref_study_id, ref_image_paths) of the difference questions (several)."""
    df = ds.harmonized_df
    out = {sid: (r, list(p)) for sid, r, p in zip(ds.sample_ids, df["ref_study_id"],
                                                 df["ref_image_paths"]) if p is not None}
    assert 2 <= len(out) < len(df)
    return out


def test_llava_difference_questions_carry_the_reference_images(diff, tmp_path):
    to_llava(diff, tmp_path / "d.json", images="original", flavor="onevision", progress=False)
    refs = _reference(diff)
    for e in json.loads((tmp_path / "d.json").read_text()):
        human = e["conversations"][0]["value"]
        if e["id"] not in refs:
            assert e["ref_image"] == [] and "Reference" not in human
            assert human.count("<image>") == len(e["image"]) == 1
            continue
        ref_study, ref_paths = refs[e["id"]]
        want = [str(diff.base_image_dir / p) for p in ref_paths]
        assert e["ref_image"] == want and e["image"][-len(want):] == want
        assert e["ref_study_id"] == ref_study and len(e["image"]) == 1 + len(want)
        current, reference = human.split("Reference (prior) study:\n")
        assert current == "Current study:\n<image>\n"
        assert reference.count("<image>") == len(want)


def test_parquet_and_webdataset_write_the_reference_images(diff, tmp_path):
    import tarfile

    import pyarrow.parquet as pq

    from radharmony.export.study_formats import to_parquet, to_study_webdataset

    refs = _reference(diff)
    to_parquet(diff, tmp_path / "pq", shard_size=7, progress=False)
    rows = pq.read_table(sorted(map(str, (tmp_path / "pq").glob("*.parquet")))).to_pylist()
    assert len(rows) == len(diff)
    for r in rows:
        ref_study, ref_paths = refs.get(r["sample_id"], (r["ref_study_id"], []))
        assert r["ref_study_id"] == ref_study and r["ref_image_paths"] == ref_paths
        assert len(r["ref_images"]) == len(ref_paths)
        for j, (img, rel) in enumerate(zip(r["ref_images"], ref_paths)):
            assert img["bytes"][:4] == b"\x89PNG" and img["path"].endswith(f"/ref{j}.png")
            # the reference image is the prior study's, not the question's own
            assert rel not in r["image_paths"]
    to_study_webdataset(diff, tmp_path / "wds", shard_size=7, images="original",
                        progress=False)
    members = {}
    for shard in sorted((tmp_path / "wds").glob("*.tar")):
        with tarfile.open(shard) as tar:
            members.update({m.name: tar.extractfile(m).read() for m in tar.getmembers()})
    metas = [json.loads(v) for k, v in members.items() if k.endswith(".json")]
    assert len(metas) == len(diff)
    for m in metas:
        _, ref_paths = refs.get(m["sample_id"], (None, []))
        assert m["ref_image_paths"] == ref_paths
        assert m["ref_images"] == [f"{m['key']}.ref{j}.jpg" for j in range(len(ref_paths))]
        for name, rel in zip(m["ref_images"], ref_paths):
            assert members[name] == (diff.base_image_dir / rel).read_bytes()
