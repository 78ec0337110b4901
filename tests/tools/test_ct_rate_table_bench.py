"""The CT-RATE table benchmark runs end to end at a small scale: cold and cached rounds in
fresh processes, over both splits."""

from benchmarks.ct_rate_table import main


def test_the_ct_rate_table_benchmark_runs_on_a_small_table(tmp_path):
    out = main(["--rounds", "1", "--work", str(tmp_path), "--scale", "0.002"])
    assert out["rows"] == 94 + 6  # 0.2 % of train's 47,149 and of validation's 3,039
    assert out["cold_s"] > 0 and out["cached_s"] > 0 and out["cached_cpu_s"] >= 0
