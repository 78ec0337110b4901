"""Report labeler: the OpenI validation table and the full-scale speed measurement.

    python -m benchmarks.report_labels            # table (odd ids) + speed
    python -m benchmarks.report_labels --table    # table only (markdown)
    python -m benchmarks.report_labels --bench    # speed only
    python -m benchmarks.report_labels --table --protocol graded   # probable hedges as 1
    python -m benchmarks.report_labels --hedging --ids even   # stated vs hedged, MeSH-tagged
    python -m benchmarks.report_labels --padchest  # Spanish rules vs PadChest's physicians

``bench()`` labels the 140,000 ReXGradient train reports of the fake writer
(:func:`radharmony.fake.rexgradient.make_metadata`, sections joined as the dataset does) in
one process on one core, twice: as they are (the labeler labels each distinct text once), and
made distinct by a unique trailing sentence, so every report is labelled from scratch.
"""

from __future__ import annotations

import argparse
import time

FULL_STUDIES = 140_000


def reports(n: int = FULL_STUDIES, *, seed: int = 0) -> list:
    """The ReXGradient-format report texts of ``n`` fake studies."""
    from radharmony.reports.format import format_report
    from radharmony.fake.rexgradient import make_metadata

    meta = make_metadata(n, seed=seed)
    return [format_report(e["Indication"], e["Comparison"], e["Findings"], e["Impression"])
            for e in meta.values()]


def bench(n: int = FULL_STUDIES) -> dict:
    """Seconds and microseconds per report for labelling ``n`` reports (see module doc)."""
    from radharmony.reports import label_reports

    texts = reports(n)
    unique = [t if t is None else f"{t}\nStudy {i}." for i, t in enumerate(texts)]
    label_reports(texts[:100])  # compile the rules outside the timing
    out = {"reports": n}
    for name, batch in (("as_written", texts), ("all_distinct", unique)):
        t0 = time.perf_counter()
        label_reports(batch)
        dt = time.perf_counter() - t0
        out[name] = {"seconds": round(dt, 2), "us_per_report": round(dt / n * 1e6, 1)}
    return out


def _openi():
    """OpenI's report archive in the installed torchxrayvision wheel (read by path)."""
    from benchmarks.vocab_counts import txv_data_dir

    data = txv_data_dir()
    if data is None:
        raise SystemExit("torchxrayvision's data is not installed: pip install --no-deps "
                         "torchxrayvision==1.5.7")
    return data / "NLMCXR_reports.tgz"


def hedging_table(path=None, *, ids: str = "even") -> str:
    """Markdown: per label, the stated (1), probable-hedged and other hedged mentions and how
    many of each the MeSH coders tagged, with F1 under the issue's protocol (1 or -1), the
    stated ones only, and the graded protocol (stated or probable)."""
    from radharmony.reports.evaluate_openi import hedging

    t = hedging(path or _openi(), ids=ids)
    lines = ["| label | gold + | stated: tagged / all | probable hedge: tagged / all | other "
             "hedge: tagged / all | F1 issue (1 or -1) | F1 stated only | F1 graded |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for _, r in t.iterrows():
        lines.append(f"| {r['label']} | {r['positives']} | {r['stated_tagged']} / {r['stated']} "
                     f"| {r['probable_tagged']} / {r['probable']} "
                     f"| {r['hedged_tagged']} / {r['hedged']} | {r['f1']:.3f} | "
                     f"{r['f1_stated_only']:.3f} | {r['f1_graded']:.3f} |")
    lines.append(f"\nAll labels, {ids} ids: {t['stated_tagged'].sum()} of {t['stated'].sum()} "
                 f"stated mentions tagged, {t['probable_tagged'].sum()} of "
                 f"{t['probable'].sum()} probable hedges, {t['hedged_tagged'].sum()} of "
                 f"{t['hedged'].sum()} other hedges.")
    return "\n".join(lines)


def table(path=None, *, ids: str = "odd", n_boot: int = 1000, protocol: str = "issue") -> str:
    """The OpenI precision / recall / F1 table (markdown) on ``ids``, scored as ``protocol``
    (:data:`radharmony.reports.evaluate_openi.PROTOCOLS`)."""
    from radharmony.reports.evaluate_openi import PRIMARY, evaluate

    t = evaluate(path or _openi(), ids=ids, n_boot=n_boot, protocol=protocol)
    return _markdown(t, PRIMARY, "MeSH gold", f"the five primary labels: {{macro:.4f}} "
                     f"({len(t)} labels, {ids} ids, {protocol} protocol, {n_boot} bootstrap "
                     "resamples)")


def padchest_table(path=None, *, ids: str = "odd", n_boot: int = 1000) -> str:
    """The PadChest table (markdown) of the Spanish rules, against the physicians' labels."""
    from radharmony.reports.evaluate_padchest import PRIMARY, evaluate

    if path is None:
        path = _openi().with_name("PADCHEST_chest_x_ray_images_labels_160K_01.02.19.csv.gz")
    t = evaluate(path, ids=ids, n_boot=n_boot)
    return _markdown(t, PRIMARY, "PadChest terms", "cardiomegaly, effusion, pneumothorax and "
                     f"nodule: {{macro:.4f}} ({len(t)} labels, {ids} study ids, {n_boot} "
                     "bootstrap resamples)")


def _markdown(t, primary, gold_head: str, macro_line: str) -> str:
    lines = [f"| label | {gold_head} | gold + | predicted + | precision [95% CI] | recall "
             "[95% CI] | F1 [95% CI] |", "|---|---|---:|---:|---|---|---|"]

    def ci(v, lo, hi):
        return "n/a" if v != v else f"{v:.3f} [{lo:.3f}, {hi:.3f}]"
    for _, r in t.iterrows():
        name = f"**{r['label']}**" if r["label"] in primary else r["label"]
        lines.append(f"| {name} | {r['gold']} | {r['positives']} | {r['predicted']} | "
                     f"{ci(r['precision'], r['p_lo'], r['p_hi'])} | "
                     f"{ci(r['recall'], r['r_lo'], r['r_hi'])} | "
                     f"{ci(r['f1'], r['f1_lo'], r['f1_hi'])} |")
    macro = t.set_index("label").loc[list(primary), "f1"].mean()
    lines.append("\nMacro F1 over " + macro_line.format(macro=macro) + ".")
    return "\n".join(lines)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--table", action="store_true")
    ap.add_argument("--bench", action="store_true")
    ap.add_argument("--hedging", action="store_true",
                    help="how often MeSH tagged the stated and the hedged mentions")
    ap.add_argument("--padchest", action="store_true",
                    help="the Spanish rules against PadChest's physician labels")
    ap.add_argument("--ids", default="odd", choices=("odd", "even", "all"))
    ap.add_argument("--protocol", default="issue", choices=("issue", "graded"),
                    help="issue: 1 or -1 counts as present; graded: probable hedges are 1 "
                         "and only 1 counts")
    ap.add_argument("-n", type=int, default=FULL_STUDIES)
    args = ap.parse_args(argv)
    both = not (args.table or args.bench or args.hedging or args.padchest)
    if args.padchest:
        print(padchest_table(ids=args.ids))
    if args.table or both:
        print(table(ids=args.ids, protocol=args.protocol))
    if args.hedging:
        print(hedging_table(ids=args.ids))
    if args.bench or both:
        print(bench(args.n))


if __name__ == "__main__":
    main()
