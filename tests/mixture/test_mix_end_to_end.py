"""A mixture built from exact-format fakes, taken the whole way: ``radharmony mix export`` in
every trainer format read back by a reader that does what that trainer's loader does, ``mix
info --plot``, ``mix view``'s parser, and the training dataset over the built records."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from mix_replicas import replicas, spec_for  # noqa: F401 (replicas: a fixture)
from radharmony.cli.main import main
from radharmony.mixture import RECORDS_NAME, build
from trainer_readers import (read_energon, read_hf_chat, read_internvl, read_llama_factory,
                             read_llava, read_llava_rad, read_maira2, read_ms_swift,
                             read_onevision, read_r2gen)


@pytest.fixture(scope="module")
def mixture(replicas, tmp_path_factory):
    base = tmp_path_factory.mktemp("e2e")
    build(spec_for(replicas, cache_dir=base / "cache"), base / "out", progress=False)
    return base / "out"


def _export(out: Path, fmt: str, dest: Path, *extra: str) -> dict:
    assert main(["mix", "export", str(out), "--format", fmt, "--to", str(dest), "-q",
                 "--json", *extra]) == 0
    return dest


def test_every_format_of_a_built_mixture_is_read_by_its_trainer(mixture, tmp_path, capsys):
    """Cached images (8-bit PNGs): the trainers open them with PIL, which reads neither the
    VinDr DICOMs nor the 16-bit ReXGradient PNGs of the original files as they are."""
    records = pq.read_table(mixture / RECORDS_NAME).to_pylist()
    with_images = [r for r in records if r["image_paths"]]
    images = tmp_path / "images"

    def export(fmt: str, name: str) -> Path:
        return _export(mixture, fmt, tmp_path / name, "--images", "cache")

    llava = read_llava(export("llava", "llava.json"), images)
    assert llava and all(Path(f).is_file() for _, f in llava if f is not None)
    assert sum(f is None for _, f in llava) == len(records) - len(with_images)
    one = read_onevision(export("llava-onevision", "ov.json"), images)
    assert len(one) == len(records)
    assert sum(len(fs) for _, fs in one) == sum(len(r["image_paths"]) for r in records)
    rad = read_llava_rad(export("llava-rad", "rad.json"), images)
    assert rad and all(e["view"] in ("AP", "PA") for e, _ in rad)
    chat = read_hf_chat(export("hf-chat", "chat.jsonl"))
    assert len(chat) == len(records)
    assert all((images / f).is_file() for r in chat for f in r["images"])
    ann = read_r2gen(export("r2gen", "annotation.json"), images)
    reports = [r for r in records if r["family"] == "reports"]
    two = [r for r in reports if len(r["image_paths"]) >= 2]  # IU X-ray's loader reads two
    assert sum(len(v) for v in ann.values()) == len(two) < len(reports) and ann["train"]
    maira = read_maira2(export("maira2", "maira.jsonl"))
    assert maira and all((images / m["frontal"]).is_file() for m in maira)
    lf = export("llama-factory", "data.json")
    assert len(read_llama_factory(lf.parent, "test-mix")) == len(records)
    swift = read_ms_swift(export("ms-swift", "swift.jsonl"), images)
    assert len(swift) == len(records)
    intern = read_internvl(tmp_path / "intern_meta.json") if export(
        "internvl", "intern.jsonl") else None
    assert len(intern) == len(records)
    blend = read_energon(export("energon", "metadataset.yaml"))
    assert sum(len(rows) for parts in blend.values() for _, rows in parts) == len(records)
    capsys.readouterr()


def test_original_images_a_trainer_cannot_read_are_refused_or_warned(mixture, tmp_path, capsys):
    """Original files: a DICOM is refused before anything is written (PIL reads none), a
    source of 16-bit PNGs is warned of once (PIL's convert('RGB') clips them to white)."""
    from radharmony.export import DeepImageWarning, ExportError
    from radharmony.mixture.formats.common import Export
    from radharmony.mixture.records import read_manifest

    records = pq.read_table(mixture / RECORDS_NAME).to_pylist()
    first = {}
    for r in records:
        if r["image_paths"]:
            first.setdefault(r["source"], r["image_paths"][0])
    ex = Export(mixture, read_manifest(mixture), tmp_path / "x.json", images="original",
                image_folder=None, cache_dir=None, workers=None, engine="local", fmt="llava")
    with pytest.raises(ExportError, match=r"DICOM(.|\n)*--images cache"):
        ex.ref("vindr_cxr", first["vindr_cxr"])
    with pytest.warns(DeepImageWarning, match="16-bit PNGs"):
        ex.ref("rexgradient_train", first["rexgradient_train"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per source; 8-bit JPEGs pass
        ex.ref("rexgradient_train", first["rexgradient_train"])
        jpegs = [(s, f) for s, f in first.items() if f.endswith(".jpg")]
        assert jpegs, sorted(first)
        for source, path in jpegs:
            ex.ref(source, path)
    dest = tmp_path / "refused.json"
    capsys.readouterr()
    assert main(["mix", "export", str(mixture), "--format", "llava", "--to", str(dest),
                 "-q"]) == 1
    assert "--images cache" in capsys.readouterr().err and not dest.exists()


def test_cached_images_are_written_once_and_referenced_relative(mixture, tmp_path, capsys):
    dest = _export(mixture, "hf-chat", tmp_path / "c" / "train.jsonl", "--images", "cache",
                   "--split", "valid")
    summary = json.loads(capsys.readouterr().out)["result"]
    rows = read_hf_chat(dest)
    assert rows and all(r["images"] for r in rows if r["messages"][0]["content"][0]["type"] ==
                        "image")
    files = {p for r in rows for p in r["images"]}
    assert files and all((tmp_path / "c" / "images" / p).is_file() for p in files)
    assert summary["images"]["written"] == len(files)


def test_info_plots_and_view_parses(mixture, tmp_path, capsys):
    assert main(["mix", "info", str(mixture), "--plot", str(tmp_path / "mix.png"), "-q"]) == 0
    assert (tmp_path / "mix.png").read_bytes().startswith(b"\x89PNG")
    assert "total:" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exc:
        main(["mix", "view", "--help"])
    assert exc.value.code == 0 and "--dataset-viewer" in capsys.readouterr().out


def test_the_training_dataset_reads_the_built_records(mixture):
    import torch

    from radharmony.mixture import MixtureDataset, mixture_collate

    ds = MixtureDataset(mixture, split="train")
    batch = mixture_collate([ds[i] for i in range(min(6, len(ds)))])
    assert batch["img"].dtype == torch.float32 and batch["img"].shape[1:] == (1, 224, 224)
    assert int(batch["num_images"].sum()) == batch["img"].shape[0]
    assert float(batch["img"].min()) >= -1 and float(batch["img"].max()) <= 1
