"""The mixture reading benchmark runs end to end on a tiny replica: every loader it times reads
each image once per epoch (the benchmark checks it), the streaming reader of whole batches and
the sample-by-sample one alike."""

from benchmarks.mixture_export import _print_read, bench_read


def test_the_reading_benchmark_runs_on_a_tiny_replica(tmp_path, capsys):
    out = bench_read(tmp_path, patients=40, runs=1)  # two batches and more
    assert out["images"] > 0
    for key in ("stream_images_per_s", "samples_images_per_s", "cached_loader_images_per_s",
                "image_dataloader_images_per_s", "ratio", "samples_ratio",
                "median_epoch_ratio", "samples_median_epoch_ratio"):
        assert out[key] > 0, key
    _print_read(out)
    assert "the streaming reader (MixtureSampler batches)" in capsys.readouterr().out
