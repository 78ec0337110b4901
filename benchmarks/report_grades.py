"""Report grades and sides (:func:`radharmony.reports.report_grades`): speed and agreement.

    python -m benchmarks.report_grades            # speed, TAIX-Ray-style agreement, OpenI
    python -m benchmarks.report_grades --bench    # speed only

Speed: the ReXGradient-format fake reports of :func:`benchmarks.report_labels.reports`, each
made distinct (a unique trailing sentence, so every report is labelled from scratch), in one
process on one core (CPU time of the process, so other work on a shared machine does not
count): ``label_reports`` alone and ``report_grades`` (the same mention pass
plus the grade and side words). The reference library's rule labeler reads about 760
reports/s; the target is ten times that. Agreement: :mod:`radharmony.reports.evaluate_grades`
on TAIX-Ray-style reports written from known grades, and on OpenI's reports against the side
and severity modifiers of their MeSH codes (odd ids held out: the coordination rule was
looked at on even ids only), when torchxrayvision's data is installed.
"""

from __future__ import annotations

import argparse
import time

REFERENCE_PER_S = 760


def bench(n: int = 20_000) -> dict:
    """Reports per second of ``label_reports`` and ``report_grades`` on ``n`` distinct reports."""
    from benchmarks.report_labels import reports
    from radharmony.reports import label_reports, report_grades

    texts = [t if t is None else f"{t}\nStudy {i}." for i, t in enumerate(reports(n))]
    label_reports(texts[:100])
    report_grades(texts[:100])
    out = {"reports": n, "reference_per_s": REFERENCE_PER_S}
    for name, fn in (("label_reports", label_reports), ("report_grades", report_grades)):
        t0, c0 = time.perf_counter(), time.process_time()
        fn(texts)
        dt, cpu = time.perf_counter() - t0, time.process_time() - c0
        out[name] = {"seconds": round(dt, 2), "cpu_seconds": round(cpu, 2),
                     "per_cpu_s": round(n / cpu),
                     "x_reference": round(n / cpu / REFERENCE_PER_S, 1)}
    return out


def agreement(n: int = 2_000) -> dict:
    from radharmony.fake.taix_ray import taix_style_reports
    from radharmony.reports.evaluate_grades import openi_agreement, taix_agreement

    out = {"taix_style": taix_agreement(*taix_style_reports(n, seed=1))}
    try:
        from benchmarks.report_labels import _openi

        path = _openi()
    except SystemExit:
        return out
    out["openi_odd"] = openi_agreement(path, ids="odd")
    out["openi_even"] = openi_agreement(path, ids="even")
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bench", action="store_true", help="speed only")
    parser.add_argument("-n", type=int, default=20_000, help="reports timed")
    args = parser.parse_args(argv)
    print(bench(args.n))
    if not args.bench:
        for name, table in agreement().items():
            print(f"\n{name}\n{table.to_string(index=False)}")


if __name__ == "__main__":
    main()
