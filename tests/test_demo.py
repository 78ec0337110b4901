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
