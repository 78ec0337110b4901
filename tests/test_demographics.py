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
