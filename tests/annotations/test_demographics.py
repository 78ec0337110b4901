"""Ages in years from DICOM AS strings, numbers and birth years; sex as M / F / None."""

import numpy as np
import pytest

from radharmony.annotations.demographics import DemographicsError, normalize_sex, parse_age_years


def test_dicom_age_strings_and_numbers():
    got = parse_age_years(["007Y", "002D", "003M", "001W", "58", 58, 41.5, None, "", "nan"])
    assert got[:7].tolist() == pytest.approx([7.0, 2 / 365.25, 0.25, 7 / 365.25, 58, 58, 41.5])
    assert np.isnan(got[7:]).all()
    assert parse_age_years(["090y", " 12 M "]).tolist() == [90.0, 1.0]


def test_implausible_ages_are_missing():
    # RSNA's DICOM headers hold a few ages over 125 (e.g. 148, 155)
    assert np.isnan(parse_age_years([148, -1, "999Y"])).all()


def test_birth_year_with_study_date():
    got = parse_age_years([1940, "1985", None, 2020], format="birth_year",
                          study_date=[20140118, 2016, 20100101, 20150101])
    assert got[:2].tolist() == [74.0, 31.0] and np.isnan(got[2:]).all()  # born after study
    with pytest.raises(DemographicsError, match="need the study dates"):
        parse_age_years([1940], format="birth_year")
    with pytest.raises(DemographicsError, match="another length"):
        parse_age_years([1940], format="birth_year", study_date=[2014, 2015])


def test_strict_formats_and_bad_values_raise():
    with pytest.raises(DemographicsError, match="'58'.*format="):
        parse_age_years(["58"], format="dicom_as")
    with pytest.raises(DemographicsError, match="a number of years"):
        parse_age_years(["007Y"], format="years")
    with pytest.raises(DemographicsError, match="'seven'"):
        parse_age_years(["seven"])
    with pytest.raises(DemographicsError, match="unknown age format"):
        parse_age_years([1], format="months")


def test_normalize_sex():
    assert normalize_sex(["M", "F", "Male", "female", " f ", "O", "U", "Unknown", None,
                          float("nan")]) == ["M", "F", "M", "F", "F"] + [None] * 5
    with pytest.raises(DemographicsError, match="unknown sex value"):
        normalize_sex(["W?"])
    with pytest.raises(DemographicsError, match="not text"):
        normalize_sex([1])


# -- the derived columns every dataset gets: age_years and sex ------------------------------------
def _derived(key, extra: dict):
    import pandas as pd

    from radharmony.data.dataset import BaseRadiologicalDataset
    from radharmony.registry import get_harmonizer_class

    spec = get_harmonizer_class(key).spec
    n = len(next(iter(extra.values())))
    t = pd.DataFrame({"patient_id": [f"p{i}" for i in range(n)],
                      "study_id": [f"s{i}" for i in range(n)],
                      "image_path": [f"i{i}.png" for i in range(n)], "view_position": None,
                      "report": None})
    for c in spec.label_cols:
        t[c] = 0.0
    for c in spec.extra_cols:
        t[c] = extra.get(c)
    ds = BaseRadiologicalDataset("/data", harmonized_df=t, spec=spec, cache_dir=None)
    df = ds.harmonized_df
    return df["age_years"].tolist(), df["sex"].tolist()


def test_dataset_tables_derive_age_years_and_sex():
    import pandas as pd

    age, sex = _derived("padchest", {"patient_birth_year": pd.array([1940, None, 1985], "Int64"),
                                     "study_date": pd.array([20140118, 20140118, 20160301],
                                                            "Int64"),
                                     "patient_sex": ["M", "O", None]})
    assert age[0] == 74.0 and np.isnan(age[1]) and age[2] == 31.0
    assert sex == ["M", None, None]
    age, sex = _derived("rexgradient_train", {"patient_age": ["007Y", "003M", None],
                                              "patient_sex": ["F", "M", "U"]})
    assert age[:2] == [7.0, 0.25] and np.isnan(age[2]) and sex == ["F", "M", None]
    age, sex = _derived("nih_cxr14", {"patient_age": pd.array([58, 414], "Int64"),
                                      "patient_sex": ["M", "F"]})
    assert age[0] == 58.0 and np.isnan(age[1]) and sex == ["M", "F"]  # 414: implausible
    age, sex = _derived("chexpert", {"patient_age": pd.array([0, 90], "Int64"),
                                     "patient_sex": [None, "F"]})
    assert age == [0.0, 90.0] and sex == [None, "F"]
    age, sex = _derived("rsna_pneumonia", {"patient_age": pd.array([None, 49], "Int64"),
                                           "patient_sex": ["F", "M"]})
    assert np.isnan(age[0]) and age[1] == 49.0 and sex == ["F", "M"]
    age, sex = _derived("vindr_cxr", {"rad_ids": [None, None]})  # ships no demographics
    assert np.isnan(age).all() and sex == [None, None]


def test_spec_age_fields_name_real_columns():
    from radharmony.registry import get_harmonizer_class, list_datasets

    declared = 0
    for key in list_datasets():
        spec = get_harmonizer_class(key).spec
        for col in (spec.age_col, spec.sex_col, spec.study_date_col):
            if col is not None:
                assert col in spec.columns, (key, col)
        if spec.age_col:
            declared += 1
            assert spec.age_format in ("auto", "dicom_as", "years", "birth_year")
            assert (spec.age_format == "birth_year") == (spec.study_date_col is not None)
    assert declared >= 10
