"""radharmony.audit on an NIH replica with varied images and planted copies and faults: every
planted pair found and nothing else, straddling counted independently, flags, exclusions and
the datasets' exclude=, family joins across datasets, the hash's robustness and its banding."""

from __future__ import annotations

import warnings

import cv2
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from radharmony.audit import AuditError, audit
from radharmony.audit.hashing import MAX_DISTANCE, hamming, near_pairs, phash, small_image
from radharmony.errors import RadHarmonyError, RowsDroppedWarning
from radharmony.fake.duplicates import (altered_copy, plant_copies, plant_problems, revary,
                                        varied_cxr)
from radharmony.fake.nih import write_nih
from radharmony.registry import get_dataset_class

NIH = get_dataset_class("nih_cxr14")


@pytest.fixture(scope="module")
def replica(tmp_path_factory):
    root = write_nih(tmp_path_factory.mktemp("nih"), n_patients=30, size=360)
    ds = NIH(root, cache_dir=None)
    files = [ds.image_file(i) for i in range(len(ds))]
    revary(files, seed=1)
    planted = plant_copies(files[:-4], 6, seed=2, exact=2)
    problems = plant_problems(files, seed=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = audit(ds, progress=False, workers=2)
    return root, ds, files, planted, problems, report


def test_every_planted_pair_is_found_and_nothing_else(replica):
    _, ds, _, planted, _, r = replica
    ids = ds.sample_ids
    truth = {tuple(sorted((ids[a], ids[b]))) for a, b in planted}
    got = {tuple(sorted(p)) for p in zip(r.pairs["a"], r.pairs["b"])}
    assert got == truth
    exact = {tuple(sorted((ids[a], ids[b]))) for a, b in planted[6:]}
    assert {tuple(sorted(p)) for p in zip(r.pairs["a"], r.pairs["b"])
            if r.pairs.set_index(["a", "b"]).loc[p, "kind"] == "exact"} == exact
    assert (r.pairs.loc[r.pairs["kind"] == "near", "distance"] <= MAX_DISTANCE).all()


def test_straddling_equals_an_independent_count(replica):
    _, ds, _, planted, _, r = replica
    df = ds.harmonized_df
    split = dict(zip(df["sample_id"], df["split"]))
    patient = dict(zip(df["sample_id"], df["patient_id"]))
    ids = ds.sample_ids
    want_split = sum(split[ids[a]] != split[ids[b]] for a, b in planted)
    want_patient = sum(patient[ids[a]] != patient[ids[b]] for a, b in planted)
    s = r.summary()
    assert (s["straddling_split"], s["straddling_patient"]) == (want_split, want_patient)
    assert want_split > 0


def test_planted_faults_are_flagged_and_kept(replica):
    _, ds, files, _, problems, r = replica
    flags = {(s, f) for s, f in zip(r.flags["sample_id"], r.flags["flag"])}
    for flag, i in problems.items():
        assert (ds.sample_ids[i], flag) in flags, flag
    small = {ds.sample_ids[i] for i, f in enumerate(files)
             if (im := cv2.imread(str(f), cv2.IMREAD_UNCHANGED)) is not None
             and min(im.shape[:2]) < 200}
    assert {s for s, f in flags if f == "tiny"} == small  # resized copies are small too
    assert {f for _, f in flags} == {"tiny", "blank", "inverted", "unreadable"}
    assert {f for s, f in flags if f in ("blank", "inverted", "unreadable")} and \
        len({s for s, f in flags if f in ("blank", "inverted")}) == 2
    assert len(r.images) == len(ds)  # nothing dropped


def test_exclusions_and_the_datasets_exclude(replica, tmp_path):
    root, ds, _, planted, problems, r = replica
    ex = r.exclusions()
    ids = ds.sample_ids  # of each pair, the later row in audit order goes
    assert ex == sorted(ids[max(a, b)] for a, b in planted)
    path = r.write_exclusions(tmp_path / "x.txt", flags=("unreadable",))
    text = path.read_text().splitlines()
    assert text[0].startswith("#") and len(text) == len(planted) + 2
    with pytest.warns(RowsDroppedWarning, match=rf"left out {len(planted) + 1} of {len(ds)}"):
        kept = NIH(root, cache_dir=None, exclude=path)
    assert len(kept) == len(ds) - len(planted) - 1
    assert not set(kept.sample_ids) & set(text[1:])
    train, val = kept.get_datasets(3)
    assert len(train) + len(val) == len(kept)
    assert len(NIH(root, cache_dir=None, exclude=["other:id"])) == len(ds)  # foreign ids: no-op
    with pytest.raises(RadHarmonyError, match="exclude= must name sample ids"):
        NIH(root, cache_dir=None, exclude=[1, 2])
    strad = r.exclusions(straddling_only=True)
    assert set(strad) <= set(ex)


def test_family_members_in_one_audit_share_patients(replica):
    root, ds, _, _, _, _ = replica
    google = get_dataset_class("nih_cxr14_google")(root, cache_dir=None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = audit([ds, google], progress=False)
    same = r.pairs[r.pairs["same_file"]]
    assert len(same) == len(google)  # every Google row names an NIH file
    assert not same["straddles_patient"].any()  # joined: one patient, not two
    assert r.family_joins["family"].tolist() == ["nih_cxr14"]
    assert r.images["path"].nunique() == len(ds)  # each file read once


def test_audit_refuses_what_is_not_a_dataset():
    with pytest.raises(AuditError, match="needs radharmony datasets"):
        audit([object()])


# -- the hash ------------------------------------------------------------------------------------
def test_hash_survives_copies_not_flips():
    rng = np.random.default_rng(5)
    for _ in range(20):
        img = varied_cxr(300, 260, rng=rng)
        h = phash(small_image(img))
        ok, buf = cv2.imencode(".jpg", altered_copy(img, rng), [cv2.IMWRITE_JPEG_QUALITY, 60])
        copy = phash(small_image(cv2.imdecode(buf, 0)))
        flipped = phash(small_image(img[:, ::-1].copy()))
        other = phash(small_image(varied_cxr(300, 260, rng=rng)))
        assert hamming(h, copy) <= MAX_DISTANCE
        assert hamming(h, flipped) > 2 * MAX_DISTANCE
        assert hamming(h, other) > MAX_DISTANCE


@settings(max_examples=30, deadline=None, derandomize=True)
@given(n=st.integers(2, 300), seed=st.integers(0, 10**6), close=st.integers(0, 40),
       flips=st.integers(0, 15))
def test_banding_finds_what_all_pairs_finds(n, seed, close, flips):
    rng = np.random.default_rng(seed)
    hashes = rng.integers(0, 256, (n, 32), dtype=np.uint8)
    for _ in range(min(close, n // 2)):  # neighbours within 15 bits: always share a band
        a, b = rng.choice(n, 2, replace=False)
        bits = np.unpackbits(hashes[a])
        bits[rng.choice(256, flips, replace=False)] ^= 1
        hashes[b] = np.packbits(bits)
    i, j, d = near_pairs(hashes, max_distance=15)
    a, b = np.triu_indices(n, 1)
    dist = hamming(hashes[a], hashes[b])
    want = {(x, y) for x, y, z in zip(a, b, dist) if z <= 15}
    assert set(zip(i.tolist(), j.tolist())) == want
    assert (d == hamming(hashes[i], hashes[j])).all()


def test_sides_of_a_merge_are_audited_as_splits(replica):
    from radharmony import merge

    _, ds, _, planted, _, r = replica
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        train, val = merge([ds]).get_datasets(3, seed=1)
        sides = audit({"train": train, "val": val}, progress=False)
    side = {**dict.fromkeys(train.sample_ids, "train"), **dict.fromkeys(val.sample_ids, "val")}
    ids = ds.sample_ids
    assert sides.summary()["pairs"] == r.summary()["pairs"]
    assert sides.summary()["straddling_split"] == sum(side[ids[a]] != side[ids[b]]
                                                      for a, b in planted)
    assert set(sides.images["split"]) == {"train", "val"}
    assert set(sides.labels["source"]) == {"nih_cxr14"}
