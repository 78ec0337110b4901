"""The errors a newcomer meets first: a wrong key, a missing dataset folder, a gated dataset's
missing file. Each says what is wrong, the nearest right thing, and where the data comes from."""

from __future__ import annotations

import pytest

import radharmony
from radharmony.cli import main
from radharmony.errors import DatasetFolderNotFoundError, MetadataNotFoundError, RegistryError


def test_a_wrong_key_suggests_the_nearest_first():
    with pytest.raises(RegistryError) as info:
        radharmony.get_dataset_class("nih_cx14")
    text = str(info.value)
    assert text.startswith("No dataset registered under key 'nih_cx14': did you mean 'nih_cxr14'")
    assert "Fix: use 'nih_cxr14'." in text and len(text) < 400


def test_a_wrong_key_on_the_command_line(capsys):
    assert main(["info", "chexpret", "--root", "."]) == 2
    err = capsys.readouterr().err
    assert "did you mean 'chexpert'" in err


def test_a_missing_folder_names_the_nearest_existing_one_and_the_source(tmp_path):
    (tmp_path / "NIH").mkdir()
    (tmp_path / "NIH" / "images_001").mkdir()
    with pytest.raises(DatasetFolderNotFoundError) as info:
        radharmony.get_dataset_class("nih_cxr14")(tmp_path / "NIH" / "images")
    text = str(info.value)
    assert f"folder {tmp_path / 'NIH' / 'images'} does not exist" in text
    assert f"the nearest existing one is {tmp_path / 'NIH'}, holding images_001" in text
    assert "docs/datasets/nih_cxr14.md" in text and "nihcc.app.box.com" in text
    assert isinstance(info.value, MetadataNotFoundError)  # older handlers still catch it


def test_a_gated_datasets_missing_file_says_where_it_comes_from(tmp_path):
    with pytest.raises(MetadataNotFoundError) as info:
        radharmony.get_dataset_class("mimic_cxr_jpg")(tmp_path)
    text = str(info.value)
    assert "mimic-cxr-2.0.0-metadata.csv.gz" in text
    assert "PhysioNet" in text and "credentialed" in text.lower()


def test_every_error_crosses_a_process_boundary_whole(tmp_path):
    """A worker process's error is pickled to the caller: the same class, message and
    attributes, whatever the subclass's constructor takes."""
    import pickle

    from radharmony.errors import RadHarmonyError

    errors = [RadHarmonyError("what", expected="e", found="f", fix="x"),
              MetadataNotFoundError("the metadata", [tmp_path / "a.csv"], fix="pass csv_path"),
              DatasetFolderNotFoundError("NIH ChestX-ray14", tmp_path / "nope", key="nih_cxr14")]
    for error in errors:
        back = pickle.loads(pickle.dumps(error))
        assert type(back) is type(error) and str(back) == str(error)
        assert back.__dict__ == error.__dict__
