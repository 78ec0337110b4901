"""The contract every registered dataset satisfies, run on its fake replica."""

from __future__ import annotations

import inspect
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

import radharmony
from radharmony.data.dataset import BaseRadiologicalDataset
from radharmony.imaging.pipeline import DefaultTransform
from radharmony.table.harmonizer import BaseHarmonizer
from radharmony.errors import UnsupportedOutputWarning
from radharmony.fake import make_fake
from radharmony.spec import REQUIRED_COLUMNS
from radharmony.table.schema import validate

KEYS = radharmony.list_datasets()
#: every output_* flag of the base dataset
OUTPUT_FLAGS = ("cls", "mask", "report", "bbox", "reg", "grade", "side")


@pytest.fixture(scope="module", params=KEYS)
def case(request, tmp_path_factory):
    key = request.param
    root = tmp_path_factory.mktemp(key)
    kwargs = make_fake(key, root / "data")
    cls = radharmony.get_dataset_class(key)
    ds = cls(**kwargs, cache_dir=root / "cache", dtype=torch.float32)
    return key, cls, kwargs, ds, root


def test_every_key_has_dataset_harmonizer_and_fake():
    from radharmony.fake import FAKES, _load_all

    _load_all()
    assert KEYS, "no dataset registered"
    for key in KEYS:
        assert radharmony.get_harmonizer_class(key).spec.key == key
        assert radharmony.get_dataset_class(key).spec.key == key
        assert key in FAKES, f"{key} has no fake writer"


def test_table_passes_schema(case):
    key, cls, kwargs, ds, _ = case
    df = ds.harmonized_df.drop(columns=["sample_id", "view"])
    assert list(df.columns[:len(cls.spec.columns)]) == list(cls.spec.columns)
    assert tuple(df.columns[:5]) == REQUIRED_COLUMNS
    pd.testing.assert_frame_equal(validate(df, cls.spec), df)
    assert len(df) > 0
    assert not df["image_path"].str.startswith(("/", "..")).any()


def test_sample_ids_unique_and_deterministic(case):
    key, cls, kwargs, ds, root = case
    ids = ds.harmonized_df["sample_id"]
    assert ids.is_unique
    assert ids.str.startswith(f"{key}:").all()
    again = cls(**kwargs, cache_dir=None)
    assert list(again.harmonized_df["sample_id"]) == list(ids)


def test_harmonizing_needs_no_images(case, tmp_path):
    key, cls, kwargs, ds, _ = case
    meta = cls.harmonizer_class(base_image_dir=kwargs["base_image_dir"],
                                csv_path=kwargs.get("csv_path")).resolve_metadata_path()
    h = cls.harmonizer_class(csv_path=meta, base_image_dir=tmp_path / "no-images-here")
    assert len(h.harmonize()) == len(ds)


def _volume_sample_checks(cls, kwargs, ds) -> None:
    """A volume dataset's sample: ``img`` (1, D, H, W) int16 Hounsfield units (MR, ``ct`` False:
    its stored integer type) in the canonical order (no preset: floats only after one), its
    ``spacing`` (d, h, w) the lengths of its ``affine``'s columns, the affine's axes running
    toward S, P, L."""
    from radharmony.volumes.geometry import axis_codes

    stored = (torch.int16,) if cls.ct is not False else (torch.int16, torch.uint16, torch.uint8)
    for i in (0, len(ds) - 1):
        s = ds[i]
        assert s["img"].ndim == 4 and s["img"].shape[0] == 1 and min(s["img"].shape) >= 1
        assert s["img"].dtype in stored
        values = s["img"].numpy()                 # torch has no min/max for uint16
        assert -3024 <= int(values.min()) < int(values.max())
        affine = s["affine"].numpy()
        assert affine.shape == (4, 4) and axis_codes(affine) == ("S", "P", "L")
        assert np.allclose(np.linalg.norm(affine[:3, :3], axis=0), s["spacing"].numpy())
        assert s["sample_id"] == ds.harmonized_df["sample_id"].iloc[i]
    assert cls(**kwargs, cache_dir=None)[0]["img"].dtype in stored  # whatever dtype=
    # a preset: the model's input in dtype (M3D-LaMed's, the smallest)
    m3d = cls(**kwargs, cache_dir=None, preset="m3d", dtype=torch.float32)[0]["img"]
    assert m3d.shape == (1, 32, 256, 256) and m3d.dtype == torch.float32
    assert 0.0 <= float(m3d.min()) < float(m3d.max()) <= 1.0


def test_sample_shape_range_dtype(case):
    key, cls, kwargs, ds, _ = case
    if cls.spec.row_unit == "volume":
        return _volume_sample_checks(cls, kwargs, ds)
    for i in (0, len(ds) - 1):
        s = ds[i]
        if cls.spec.row_unit == "question":  # a question's images stacked: (K, 1, S, S)
            assert s["img"].ndim == 4 and s["img_mask"].shape == s["img"].shape[:1]
            assert s["img_mask"].all() and len(s["views"]) == len(s["img"])
        assert s["img"].shape[-3:] == (1, 224, 224)
        assert s["img"].dtype == torch.float32
        assert -1.0 <= float(s["img"].min()) and float(s["img"].max()) <= 1.0
        assert float(s["img"].max()) > float(s["img"].min())
        assert s["sample_id"] == ds.harmonized_df["sample_id"].iloc[i]
    bf = cls(**kwargs, cache_dir=None)
    assert bf[0]["img"].dtype == torch.bfloat16


def test_outputs_supported_or_warned(case):
    key, cls, kwargs, ds, root = case
    for name in OUTPUT_FLAGS:
        with warnings.catch_warnings(record=True) as rec:
            warnings.simplefilter("always")
            d = cls(**kwargs, cache_dir=root / "cache", **{f"output_{name}": True})
        warned = any(issubclass(w.category, UnsupportedOutputWarning) for w in rec)
        sample = d[0]
        if name in d.outputs:
            assert not warned and name in sample
        else:
            assert warned and name not in sample


def _same(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, np.ndarray):
        return np.array_equal(a, b)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b or (a != a and b != b)  # NaN equals NaN


def test_a_batched_read_equals_reads_one_by_one_on_every_output(case):
    key, cls, kwargs, ds, root = case
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnsupportedOutputWarning)
        d = cls(**kwargs, cache_dir=root / "cache", **{f"output_{name}": True for name in
                                                       OUTPUT_FLAGS})
    readable, failing = [], []
    for i in range(len(d)):
        try:
            d[i]
            readable.append(i)
        except radharmony.RadHarmonyError as exc:  # e.g. a row without its mask file
            failing.append((i, type(exc)))
    idx = readable[::-1]
    assert idx, key
    for _ in range(2):  # from loose entries, then from the pack a full pass may make
        for got, i in zip(d.__getitems__(idx), idx):
            one = d[i]
            assert got.keys() == one.keys(), (key, i)
            for name in one:
                assert _same(got[name], one[name]), (key, i, name)
    for i, error in failing:  # a row that fails alone fails in a batch the same way
        with pytest.raises(error):
            d.__getitems__([idx[0], i])


def test_splits_group_by_patient_and_are_deterministic(case):
    key, cls, kwargs, ds, _ = case
    group = cls.spec.group_col
    full = ds.get_datasets()
    assert len(full) == len(ds)
    n = min(5, ds.harmonized_df[group].nunique())
    train, val = ds.get_datasets(n_splits=n, seed=3)
    assert len(train) + len(val) == len(ds) and len(val) > 0
    assert not set(train.harmonized_df[group]) & set(val.harmonized_df[group])
    train2, val2 = ds.get_datasets(n_splits=n, seed=3)
    assert list(val2.harmonized_df["sample_id"]) == list(val.harmonized_df["sample_id"])
    tr3, va3 = ds.get_folds(n, seed=3)[0]  # get_datasets(n) is fold 0, built alone
    assert list(va3.harmonized_df["sample_id"]) == list(val.harmonized_df["sample_id"])
    assert list(tr3.harmonized_df["sample_id"]) == list(train.harmonized_df["sample_id"])
    for side in (ds, train, val):  # text as object, like the table's other text columns
        assert side.harmonized_df["sample_id"].dtype == object
    parent = ds.harmonized_df.set_index("sample_id")
    for side in (train, val):  # a split's rows, derived columns included, are the parent's
        df = side.harmonized_df.set_index("sample_id")
        pd.testing.assert_frame_equal(df, parent.loc[df.index], check_names=False)
    folds = ds.get_folds(n)
    seen = np.concatenate([v.harmonized_df["sample_id"].to_numpy() for _, v in folds])
    assert sorted(seen) == sorted(ds.harmonized_df["sample_id"])
    for tr, va in folds:
        assert not set(tr.harmonized_df[group]) & set(va.harmonized_df[group])


def test_save_and_load_roundtrip(case, tmp_path):
    key, cls, kwargs, ds, root = case
    h = cls.harmonizer_class(base_image_dir=kwargs["base_image_dir"],
                             csv_path=kwargs.get("csv_path"))
    path = h.save(tmp_path / "h.parquet")
    back = radharmony.load_harmonizer(path)
    assert type(back) is cls.harmonizer_class
    pd.testing.assert_frame_equal(back.harmonize(), h.harmonize())
    d2 = cls(**kwargs, harmonizer_path=path, cache_dir=None)
    assert list(d2.harmonized_df["sample_id"]) == list(ds.harmonized_df["sample_id"])


def test_csv_roundtrip_builds_same_dataset(case, tmp_path):
    key, cls, kwargs, ds, root = case
    csv = tmp_path / "t.csv"
    ds.harmonized_df.drop(columns=["sample_id", "view"]).to_csv(csv, index=False)
    d2 = cls(**kwargs, harmonized_df=pd.read_csv(csv), cache_dir=None)
    assert list(d2.harmonized_df["sample_id"]) == list(ds.harmonized_df["sample_id"])


def test_dataset_table_with_derived_columns_feeds_back_in(case, tmp_path):
    key, cls, kwargs, ds, root = case
    csv = tmp_path / "d.csv"
    ds.harmonized_df.to_csv(csv, index=False)  # sample_id and view included
    # only empty cells are missing ("N/A" is a view name in ReXGradient, not a null)
    back = pd.read_csv(csv, keep_default_na=False, na_values=[""])
    d2 = cls(**kwargs, harmonized_df=back, cache_dir=None)
    assert list(d2.harmonized_df["sample_id"]) == list(ds.harmonized_df["sample_id"])
    assert list(d2.harmonized_df["view"]) == list(ds.harmonized_df["view"])


def test_canonical_view_and_filter(case):
    key, cls, kwargs, ds, _ = case
    vmap = {k.upper(): v for k, v in cls.spec.view_map.items()}
    raw, view = ds.harmonized_df["view_position"], ds.harmonized_df["view"]
    for r, v in zip(raw, view):
        if r is None or not str(r).strip():
            assert v is None
        else:
            assert v == vmap.get(str(r).strip().upper(), str(r).strip())
    frontal = ds.filter(lambda df: df["view"].isin(["PA", "AP"]))
    assert len(frontal) == int(view.isin(["PA", "AP"]).sum())
    assert frontal.harmonized_df["view"].isin(["PA", "AP"]).all()
    with pytest.raises(radharmony.RadHarmonyError, match="one boolean per row"):
        ds.filter([True])


def _same_sample(a: dict, b: dict, where: str) -> None:
    assert sorted(a) == sorted(b), where
    for k in a:
        if isinstance(a[k], torch.Tensor):
            assert torch.equal(a[k], b[k]), f"{where}: {k}"
        else:
            assert a[k] == b[k], f"{where}: {k}"


def test_page_csv_round_trip_changes_nothing(case, tmp_path):
    """The page's snippet, exactly: ``harmonize().to_csv(path, index=False)``, then
    ``harmonized_df=pd.read_csv(path)`` (no dtype, no NA options): same ids, splits, folds,
    samples of every output, and column types."""
    key, cls, kwargs, ds, root = case
    h = cls.harmonizer_class(base_image_dir=kwargs["base_image_dir"],
                             csv_path=kwargs.get("csv_path"))
    original = h.harmonize()
    csv = tmp_path / "harmonized.csv"
    original.to_csv(csv, index=False)
    flags = {f"output_{o}": True for o in cls.spec.outputs}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = cls(**kwargs, **flags, cache_dir=root / "cache", dtype=torch.float32)
        b = cls(**kwargs, **flags, harmonized_df=pd.read_csv(csv), cache_dir=root / "cache",
                dtype=torch.float32)
    ta, tb = a.harmonized_df, b.harmonized_df
    assert list(ta.columns) == list(tb.columns)
    for col in ta.columns:
        assert ta[col].dtype == tb[col].dtype, f"{key}.{col}: {ta[col].dtype} vs {tb[col].dtype}"
    # pandas' default NA strings ("N/A", "NA", "null", ...) are read as missing: the only loss
    na_text = ta.isin(["", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan",
                       "1.#IND", "1.#QNAN", "<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a",
                       "nan", "null"])
    pd.testing.assert_frame_equal(ta.mask(na_text), tb.mask(na_text))
    assert list(a.sample_ids) == list(b.sample_ids)
    n = min(3, a.harmonized_df[cls.spec.group_col].nunique())
    for (tra, vaa), (trb, vab) in zip(a.get_folds(n), b.get_folds(n)):
        assert list(vaa.sample_ids) == list(vab.sample_ids)
        assert list(tra.sample_ids) == list(trb.sample_ids)
    for i in sorted({0, len(a) // 2, len(a) - 1}):
        _same_sample(a[i], b[i], f"{key}[{i}]")


def test_cls_mask_marks_every_unusable_target(case):
    """No -1 and no unknown label reaches a masked loss: ``cls_mask`` is 0 exactly where the
    table says uncertain (default policy) or missing, and ``cls`` is 0/1 wherever it is 1."""
    key, cls, kwargs, ds, root = case
    if "cls" not in cls.spec.outputs:
        pytest.skip(f"{key} has no labels")
    d = cls(**kwargs, output_cls=True, cache_dir=root / "cache")
    table = d.harmonized_df[list(cls.spec.label_cols)].to_numpy(np.float64)
    for i in sorted({0, len(d) // 2, len(d) - 1}):
        s = d[i]
        assert s["cls_mask"].shape == s["cls"].shape and s["cls_mask"].dtype == torch.float32
        usable = ~np.isnan(table[i]) & (table[i] != -1)
        assert (s["cls_mask"].numpy() == usable).all()
        assert set(s["cls"].float().numpy()[usable].tolist()) <= {0.0, 1.0}
    batch = radharmony.collate([d[0], d[len(d) - 1]])
    assert batch["cls_mask"].shape == batch["cls"].shape


def test_reg_grade_side_masks_mark_every_unknown_target(case):
    """``reg`` / ``grade`` / ``side`` follow the table: a mask 0 exactly where the table has
    no value, grades 0-4, a side ``[left, right]`` as the table says it."""
    from radharmony.data.sampling import SIDE_BITS

    key, cls, kwargs, ds, root = case
    spec = cls.spec
    kinds = {"reg": spec.reg_cols, "grade": spec.grade_cols, "side": spec.side_cols}
    if not any(kinds.values()):
        pytest.skip(f"{key} has no regression, grade or side columns")
    d = cls(**kwargs, cache_dir=root / "cache", **{f"output_{k}": True for k, c in
                                                   kinds.items() if c})
    for i in sorted({0, len(d) // 2, len(d) - 1}):
        s, row = d[i], d.harmonized_df.iloc[i]
        for name, cols in kinds.items():
            if not cols:
                continue
            cells = row[list(cols)].tolist()
            if name == "side":
                known = [c in SIDE_BITS for c in cells]
                assert s["side"].tolist() == [list(SIDE_BITS.get(c, (0.0, 0.0))) for c in cells]
            else:
                known = [c == c for c in cells]
                assert s[name].tolist() == [c if k else 0.0 for c, k in zip(cells, known)]
            assert s[name + "_mask"].tolist() == [float(k) for k in known], (key, name)
        if spec.grades:
            assert set(s["grade"].tolist()) <= {0.0, 1.0, 2.0, 3.0, 4.0}


def test_split_column_speaks_one_vocabulary(case):
    from radharmony.spec import SPLIT_NAMES

    key, cls, kwargs, ds, root = case
    df = ds.harmonized_df
    if "split" not in df.columns:
        pytest.skip(f"{key} ships no official split")
    assert "split_raw" in df.columns, "the dataset's own split name is kept beside it"
    assert set(df["split"].dropna()) <= set(SPLIT_NAMES)
    assert (df["split"].isna() == df["split_raw"].isna()).all()


@pytest.mark.parametrize("key", KEYS)
def test_constructor_takes_the_base_signature(key):
    """Every dataset class, mixins included, takes the base class's arguments: the first three
    by position in the reference's order, the rest by keyword, with the base's defaults."""
    base = inspect.signature(BaseRadiologicalDataset).parameters
    params = inspect.signature(radharmony.get_dataset_class(key)).parameters
    P = inspect.Parameter
    assert [n for n, p in params.items() if p.kind is P.POSITIONAL_OR_KEYWORD] == \
        ["base_image_dir", "csv_path", "transform"]
    for name, p in base.items():
        assert name in params, f"{key} does not take {name}="
        assert (params[name].kind, params[name].default) == (p.kind, p.default), name


def test_the_signature_follows_a_mixin_that_passes_arguments_on():
    from radharmony.data.dataset import constructor_signature

    class Mixin:
        def __init__(self, *args, extra: int = 1, **kwargs):
            super().__init__(*args, **kwargs)

    class Narrow(BaseRadiologicalDataset):
        def __init__(self, base_image_dir, *, extra2: int = 2, **kwargs):
            super().__init__(base_image_dir, **kwargs)

    params = constructor_signature(type("D", (Mixin, BaseRadiologicalDataset), {})).parameters
    assert list(params)[:4] == ["base_image_dir", "csv_path", "transform", "extra"]
    narrow = constructor_signature(Narrow).parameters
    assert list(narrow)[:2] == ["base_image_dir", "extra2"]
    assert narrow["csv_path"].kind is inspect.Parameter.KEYWORD_ONLY  # no longer positional


def test_reference_positional_form_and_the_saved_image_root(case, tmp_path):
    """``cls(base_image_dir, csv_path, transform)`` by position, and ``cls(harmonizer_path=)``
    or ``cls(harmonizer=)`` without ``base_image_dir`` (the root saved with the harmonizer)."""
    key, cls, kwargs, ds, root = case
    rest = {k: v for k, v in kwargs.items() if k not in ("base_image_dir", "csv_path")}
    ids = list(ds.harmonized_df["sample_id"])
    volume = cls.spec.row_unit == "volume"  # no 2-D pipeline: the transform is None
    small = cls(kwargs["base_image_dir"], kwargs.get("csv_path"),
                None if volume else DefaultTransform(size=32), **rest, cache_dir=None)
    assert list(small.harmonized_df["sample_id"]) == ids
    # a question-level (VQA) sample stacks its question's K images: (K, 1, 32, 32)
    stacked = cls.spec.row_unit == "question"
    if volume:
        assert small[0]["img"].shape[0] == 1 and small[0]["img"].ndim == 4
    else:
        assert small[0]["img"].shape[stacked:] == (1, 32, 32)
    path = ds.harmonizer.save(tmp_path / "h.parquet")
    for source in ({"harmonizer_path": path}, {"harmonizer": ds.harmonizer}):
        back = cls(**source, **rest, cache_dir=None)
        assert back.base_image_dir == Path(kwargs["base_image_dir"])
        assert list(back.harmonized_df["sample_id"]) == ids
        assert back[len(back) - 1]["sample_id"] == ids[-1]
