"""The bench's target lines: the plain-DataLoader ratio comes from the paired rounds."""

from benchmarks.run import targets


def _res(rounds):
    res = {("radharmony", 0): {"plain_samples": 3000, "plain_seconds": 1.0,
                               "samples": 100, "seconds": 1.0},
           ("monai", 0): {"cached_samples": 250, "cached_seconds": 1.0}}
    if rounds is not None:
        res["paired", 0] = {"rounds": rounds, "images": 540}
    return res


def _line(text):
    return next(ln for ln in text.splitlines() if "plain DataLoader with batch_size=64" in ln)


def test_paired_rounds_decide_the_plain_dataloader_target():
    line = _line(targets(_res([[95, 10], [90, 10], [130, 10]]), [0]))
    assert line.startswith("- NOT met") and "median of 3 alternating rounds" in line
    assert "9.00-13.00x" in line and ": 9.50x" in line and "separate processes" in line
    assert "12.00x" in line  # 3000/250: the table's separate processes, shown beside it
    met = _line(targets(_res([[110, 10], [105, 10], [80, 10]]), [0]))
    assert met.startswith("- met") and "10.50x" in met


def test_without_paired_rounds_the_separate_processes_decide():
    line = _line(targets(_res(None), [0]))
    assert line.startswith("- met") and "12.00x" in line and "rounds" not in line
