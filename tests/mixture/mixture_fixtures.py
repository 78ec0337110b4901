"""Small mixtures written by hand, for the formats' and the dataset's tests (and the docs'
examples): ``records.parquet`` (``RECORD_SCHEMA``) and ``mixture.json`` over real images of
fake replicas (ReXGradient reports, MIMIC-CXR-JPG labels, ReXVQA questions), with every kind
of record the formats treat differently:

* report generation from a whole study (PA + lateral), with the report's sections in
  ``fields``; one with the patient's prior study (``prior_image_paths``, ``prior_views``,
  ``prior_report``, ``days``), its lateral listed before its PA;
* a text-only summarisation record (findings -> impression);
* a lateral-only view question (no frontal image: LLaVA-1.5 skips it);
* classification as text (``labels`` finding -> 1/0/-1, ``silver``);
* multiple-choice VQA over the question's images (``question``, ``options``, ``answer``).

Patients alternate between ``train`` and ``valid``. Row groups hold ``row_group_size``
records, so readers are exercised across row-group boundaries. The tasks have short names of
their own (``findings``, ``view``, ...); ``registry_names=True`` gives them the registry's
(:data:`REGISTRY_NAMES`), as the docs' examples need: what they name must exist in a mixture
``radharmony mix build`` writes.
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from radharmony.fake import make_fake
from radharmony.mixture.column_writer import write_columns
from radharmony.mixture.records import (MANIFEST_FORMAT, MANIFEST_NAME, RECORD_SCHEMA,
                                        RECORDS_NAME, fields_json, record_id)
from radharmony.registry import get_dataset_class
from radharmony.studies.sections import report_sections
from radharmony.version import __version__

FINDINGS_PROMPT = "Write the findings section of the radiology report for this chest X-ray."
SOURCES = ("rexgradient_train", "mimic_cxr_jpg", "rexvqa_train")
#: the fixture's task names -> the registry's task of that kind
REGISTRY_NAMES = {"findings": "report_findings", "findings_with_prior":
                  "report_findings_with_prior", "summarise": "summarize_impression",
                  "view": "classify_view", "findings_multilabel": "classify_findings",
                  "vqa_mcq": "vqa_mcq"}


@dataclass
class Mixture:
    out: Path                 # the mixture folder
    records: list[dict]       # the records as written (``fields`` as a dict)
    roots: dict[str, str]     # source name -> root
    manifest: dict


def _table(key: str, data: Path):
    kwargs = make_fake(key, data / key)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds = get_dataset_class(key)(**kwargs, cache_dir=None)
    return ds, kwargs


def _rec(source: str, task: str, family: str, item: str, *, patient: str, study: str,
         sample: str, paths: list, views: list, prompt: str, target, fields: dict) -> dict:
    return {"record_id": record_id(source, task, item), "task": task, "family": family,
            "source": source, "dataset": source, "source_split": "train", "split": None,
            "patient_id": f"{source}:{patient}", "study_id": study, "sample_id": sample,
            "image_paths": list(paths), "views": list(views), "prompt": prompt,
            "target": target, "prompt_variant": 0, "fields": fields}


def _report_records(ds) -> list[dict]:
    df = ds.harmonized_df
    order = {"PA": 0, "AP": 1, "LATERAL": 2}
    studies = []
    for study, g in df.groupby("study_id", sort=False):
        g = g.iloc[np.argsort([order.get(v, 3) for v in g["view"]], kind="stable")]
        sections, _ = report_sections(g["report"].iloc[0])
        studies.append((study, g, sections))
    out, seen_patient = [], {}
    src = "rexgradient_train"
    for study, g, sec in studies:
        views = g["view"].tolist()
        if sec["findings"] is None or not {"PA", "AP"} & set(views) or len(g) < 2:
            continue
        patient = g["patient_id"].iloc[0]
        f = {k: sec[k] for k in ("findings", "impression", "indication", "technique",
                                 "comparison", "history")}
        prior = seen_patient.get(patient)
        task, item = "findings", study
        if prior is not None:
            pg, psec = prior
            task = "findings_with_prior"
            f.update(prior_image_paths=pg["image_path"].tolist(),
                     prior_views=pg["view"].tolist(), prior_report=psec["findings"], days=7)
        if prior is not None:  # the lateral first: the key image is not always the first
            g, views = g.iloc[::-1], views[::-1]
        out.append(_rec(src, task, "reports", item, patient=patient, study=study,
                        sample=study, paths=g["image_path"].tolist(), views=views,
                        prompt=FINDINGS_PROMPT, target=sec["findings"], fields=f))
        seen_patient.setdefault(patient, (g, sec))
        if len(out) == 1 and sec["impression"]:
            out.append(_rec(src, "summarise", "text", study, patient=patient, study=study,
                            sample=study, paths=[], views=[],
                            prompt="Summarise these findings as an impression: "
                                   + sec["findings"], target=sec["impression"],
                            fields={"findings": sec["findings"]}))
        if sum(r["task"].startswith("findings") for r in out) >= 5 and \
                any(r["task"] == "findings_with_prior" for r in out):
            break
    lat = df[df["view"] == "LATERAL"].iloc[0]  # a view question on a lateral image alone
    out.append(_rec(src, "view", "views", lat["sample_id"], patient=lat["patient_id"],
                    study=lat["study_id"], sample=lat["sample_id"], paths=[lat["image_path"]],
                    views=["LATERAL"], prompt="Which view is this chest X-ray?",
                    target="lateral", fields={"view": "LATERAL"}))
    return out


def _label_records(ds) -> list[dict]:
    df, cols = ds.harmonized_df, list(ds.spec.label_cols)
    out = []
    for _, row in df[df["view"].isin(["PA", "AP"])].head(4).iterrows():
        labels = {c: int(row[c]) for c in cols if not np.isnan(row[c])}
        positives = [c for c, v in labels.items() if v == 1]
        out.append(_rec("mimic_cxr_jpg", "findings_multilabel", "labels", row["sample_id"],
                        patient=str(row["patient_id"]), study=str(row["study_id"]),
                        sample=row["sample_id"], paths=[row["image_path"]],
                        views=[row["view"]], prompt="Which findings does this chest X-ray "
                        "show?", target=", ".join(positives) or "No finding",
                        fields={"labels": labels, "silver": False}))
    return out


def _vqa_records(ds) -> list[dict]:
    df, view_map = ds.harmonized_df, ds.spec.view_map
    out = []
    for _, row in df.head(3).iterrows():
        views = [view_map.get(str(v).upper(), v) for v in row["view_positions"]]
        options = list(row["options"])
        out.append(_rec("rexvqa_train", "vqa_mcq", "vqa", row["question_id"],
                        patient=str(row["patient_id"]), study=str(row["study_id"]),
                        sample=row["sample_id"], paths=list(row["image_paths"]),
                        views=views, prompt=row["question"] + "\n" + "\n".join(options),
                        target=row["answer_letter"] + ". " + row["answer"],
                        fields={"question": row["question"], "options": options,
                                "answer": row["answer"]}))
    return out


def write_mixture(folder: str | Path, *, images: str = "original", size: int = 64,
                  row_group_size: int = 4, registry_names: bool = False) -> Mixture:
    """Replicas under ``folder/data`` and a mixture of their records in ``folder/mix``
    (``registry_names``: each task renamed to the registry's, with its family and a record
    id of that name)."""
    folder = Path(folder)
    data, out = folder / "data", folder / "mix"
    out.mkdir(parents=True, exist_ok=True)
    records, sources, roots = [], [], {}
    makers = {"rexgradient_train": _report_records, "mimic_cxr_jpg": _label_records,
              "rexvqa_train": _vqa_records}
    for key in SOURCES:
        ds, kwargs = _table(key, data)
        records += makers[key](ds)
        roots[key] = str(Path(kwargs["base_image_dir"]).resolve())
        sources.append({"name": key, "dataset": key, "root": roots[key], "split": "train",
                        "kwargs": {k: str(v) for k, v in kwargs.items()
                                   if k != "base_image_dir"}, "inputs": {}})
    if registry_names:
        from radharmony.mixture.tasks import TASKS

        for r in records:
            task = REGISTRY_NAMES[r["task"]]
            r.update(task=task, family=TASKS[task].family,
                     record_id=record_id(r["source"], task, r["record_id"]))
    patients = list(dict.fromkeys(r["patient_id"] for r in records))
    for r in records:
        r["split"] = "train" if patients.index(r["patient_id"]) % 2 == 0 else "valid"
    rows = [{**r, "fields": fields_json(r["fields"])} for r in records]
    table = pa.Table.from_pylist(rows, schema=RECORD_SCHEMA)
    pq.write_table(table, out / RECORDS_NAME, row_group_size=row_group_size)
    counts = {}
    for r in records:
        k = (r["source"], r["task"], r["split"])
        counts[k] = counts.get(k, 0) + 1
    manifest = {"format": MANIFEST_FORMAT, "radharmony_version": __version__,
                "name": "fixture", "seed": 0, "spec": {},
                "images": {"mode": "cache", "size": size} if images == "cache"
                else {"mode": "original"}, "boxes": "maira2", "sources": sources,
                "hold_out": [], "counts": [{"source": s, "task": t, "split": sp, "records": n}
                                           for (s, t, sp), n in sorted(counts.items())],
                "excluded": [], "records": len(records)}
    (out / MANIFEST_NAME).write_text(json.dumps(manifest, indent=1))
    write_columns(out)  # what a build writes beside them
    return Mixture(out=out, records=records, roots=roots, manifest=manifest)
