"""`make demo` end to end, on a smaller replica."""

from radharmony.demo import main


def test_demo_runs_and_writes_outputs(tmp_path, capsys):
    assert main(["--out", str(tmp_path), "--studies", "16", "--workers", "0"]) == 0
    out = capsys.readouterr().out
    for split in ("train", "valid", "test"):
        assert f"  {split} " in out
    assert "shared patients: 0" in out
    assert (tmp_path / "samples.png").stat().st_size > 10_000
    assert (tmp_path / "rexgradient_valid_harmonized.csv").is_file()
    assert (tmp_path / "rexgradient_valid_harmonizer.parquet").is_file()


def test_image_title_names_patient_view_and_a_finding_or_the_report_s_first_words():
    from radharmony.plotting import image_title

    assert image_title("p10", "PA", findings=["Edema", "Effusion"]) == "p10 · PA · Edema +1"
    assert image_title("p10", "AP", findings=["Edema"]) == "p10 · AP · Edema"
    report = ("INDICATION:\nCough\n\nFINDINGS:\nThe lungs are clear without focal airspace "
              "disease.\n\nIMPRESSION:\nNormal.")
    assert image_title("p7", "LATERAL", report=report) == \
        'p7 · LATERAL · "The lungs are clear without focal ..."'
    assert image_title("p7", None, report="IMPRESSION:\nNormal chest.") == \
        'p7 · view ? · "Normal chest."'
    assert image_title("p7", "PA") == "p7 · PA"


def test_dataset_titles_and_the_demo_grid(tmp_path):
    """Hand-checked rows of the replicas: ReXGradient has no labels (its report's findings
    start the title), NIH has labels (the first positive one; ``no finding``)."""
    import warnings

    from radharmony.dataset import ReXGradientValidDataset
    from radharmony.demo import sample_grid
    from radharmony.fake import make_fake, write_rexgradient
    from radharmony.registry import get_dataset_class

    base = write_rexgradient(tmp_path / "rex", studies={"valid": 4}, image_size=(96, 80))
    rex = ReXGradientValidDataset(base, output_report=True, cache_dir=None)
    assert [rex.title(i) for i in range(3)] == [
        'GRDN4WSJLBCAG3X6 · LATERAL · "The heart size and mediastinal contours ..."',
        'GRDN4WSJLBCAG3X6 · PA · "The heart size and mediastinal contours ..."',
        'GRDN80WTU7J3YAO4 · AP · "Cardiomegaly. Mild interstitial prominence. Small left ..."']
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        nih = get_dataset_class("nih_cxr14")(**make_fake("nih_cxr14", tmp_path / "nih"),
                                             cache_dir=None)
    assert [nih.title(i) for i in range(6)] == [
        "00000001 · AP · Infiltration", "00000001 · PA · no finding", "00000002 · PA · no finding",
        "00000003 · AP · Pleural_Thickening", "00000003 · PA · Consolidation",
        "00000003 · AP · Consolidation +1"]
    fig = sample_grid(rex, n=3)
    titles = [ax.get_title() for ax in fig.axes[:3]]
    assert [t.replace("\n", " ") for t in titles] == [rex.title(i) for i in range(3)]
    assert not any("1.2.826" in t or "instances" in t for t in titles)  # no SOP UID tails
