"""A ReXGradient-160K replica in the real on-disk format, quirks included.

Layout (as the dataset ships after extraction)::

    <root>/deid_png/<PatientID>/<AccessionNumber>/studies/<StudyUID>/series/<SeriesUID>/
        instances/<SopUID>.png                         (16-bit grayscale)
    <root>/download/metadata/<split>_metadata_view_position.json
    <root>/download/metadata/<split>_metadata.json    (same, ImageViewPosition all "")
    <root>/download/metadata/<split>_metadata.csv     (one row per study, no image paths)

Quirks reproduced: keys ``p<PatientID>_a<Accession>_s<StudyUID>``, keys of each entry in
alphabetical order, bare ``NaN`` for weight/size, ``"None"``/``"None."``/``"Comparison: None."``
comparisons, empty and null sections (one study with all four empty), null and non-standard
view positions, ``ImageShape`` at the original (4x) detector size, ``""`` shapes, patients
with several studies, 1-5 images per study, ages like ``"007Y"``/``"002D"`` or null.

With ``bbox=`` it also writes ``download/metadata/interstitial_pattern_bbox.json`` for about a
third of the images (all splits in one file), in one of the forms radharmony detects: the Label
Studio full JSON export (tasks, ``data.image`` with Label Studio's upload prefix
``/data/upload/<project>/<8 hex>-<study>_<sop>.png``, percent coordinates, ``completed_by``),
JSON-MIN (flat records, ``annotator``), or an object keyed by ``<study>_<sop>.png`` with pixel
boxes in the ``ImageShape`` frame.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np

from . import register_fake
from .images import synthetic_cxr, write_png

VIEWS = ["PA", "AP", "LATERAL", "LL", "POSTERO_ANTERIOR", "LAO", "RAO", "UNKNOWN", "N/A", None]
VIEW_P = [0.34, 0.2, 0.28, 0.04, 0.05, 0.01, 0.01, 0.02, 0.02, 0.03]
INDICATIONS = ["Cough", "Chest pain", "Shortness of breath", "Fever.", "Preop evaluation",
               "decreased O2 sats", "", None]
COMPARISONS = ["None.", "None", "Comparison: None.", "Comparison: 1/15/1999",
               "Comparison is made to a prior study dated 1/3/2000.", "", None]
FINDINGS = ["The heart size and mediastinal contours are within normal limits. The lungs are "
            "clear. No pleural effusion or pneumothorax.",
            "Cardiomegaly. Mild interstitial prominence. Small left pleural effusion.",
            "Endotracheal tube tip 3 cm above the carina. Patchy right basilar opacity.",
            "", None]
IMPRESSIONS = ["No active cardiopulmonary disease.", "No acute abnormality noted.",
               "Cardiomegaly with small left effusion.", "Right basilar pneumonia.",
               "1. Support devices as above.\n2. No pneumothorax.", "", None]
CSV_COLUMNS = ["StudyInstanceUid", "PatientID", "AccessionNumber", "StudyDate", "PatientAge",
               "PatientSex", "PatientSize", "PatientWeight", "EthnicGroup", "InstitutionName",
               "Manufacturer", "StudyDescription", "Indication", "Comparison", "Findings",
               "Impression"]
_ALNUM = np.array(list("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"))
_CDFS: dict[tuple, np.ndarray] = {}


def _gid(rng: np.random.Generator) -> str:
    return "GRDN" + "".join(_ALNUM[rng.integers(0, len(_ALNUM), 12)])


def _uid(rng: np.random.Generator) -> str:
    return "1.2.826.0.1.3680043.8.498." + str(rng.integers(10**17, 10**18)) + \
        str(rng.integers(10**17, 10**18))


def _pick(rng, values, p=None):
    """``values[rng.choice(len(values), p=p)]`` -- the same draws, several times faster
    (the full-scale benchmark generates ~2.5 million of them)."""
    if p is None:
        return values[int(rng.integers(0, len(values)))]
    cdf = _CDFS.get(key := tuple(p))
    if cdf is None:
        cdf = np.cumsum(p)
        cdf = _CDFS[key] = cdf / cdf[-1]
    return values[int(cdf.searchsorted(rng.random(), side="right"))]


def make_metadata(n_studies: int, *, seed: int = 0, patients_ratio: float = 0.7) -> dict:
    """The ``<split>_metadata_view_position.json`` content for ``n_studies`` studies."""
    rng = np.random.default_rng(seed)
    n_patients = max(1, round(n_studies * patients_ratio))
    patients = [(_gid(rng), _pick(rng, ["F", "M", "M", "F", "O"]),
                 _pick(rng, ["082Y", "007Y", "045Y", "002D", "061Y", "090Y", None]))
                for _ in range(n_patients)]
    out = {}
    for s in range(n_studies):
        pid, sex, age = patients[s % n_patients] if s < n_patients else \
            patients[int(rng.integers(n_patients))]
        acc, study = _gid(rng), _uid(rng)
        n_img = int(rng.choice([1, 2, 2, 3, 1, 2, 5, 4], p=[.3, .3, .2, .08, .05, .04, .01, .02]))
        series = _uid(rng)
        paths = [f"../deid_png/{pid}/{acc}/studies/{study}/series/{series}/instances/"
                 f"{_uid(rng)}.png" for _ in range(n_img)]
        shapes = [_pick(rng, [[1760, 2140], [2140, 1760], [2991, 2992], [2320, 2828], ""])
                  for _ in range(n_img)]
        sections = [_pick(rng, INDICATIONS), _pick(rng, COMPARISONS), _pick(rng, FINDINGS),
                    _pick(rng, IMPRESSIONS)]
        if s == 3:
            sections = ["", None, "None", float("nan")]  # all four empty: report is None
        entry = {
            "AccessionNumber": acc, "Comparison": sections[1],
            "EthnicGroup": _pick(rng, [None, None, "non-hispanic", "hispanic"]),
            "Findings": sections[2],
            "ImageBodyPart": [_pick(rng, ["CHEST", ""]) for _ in range(n_img)],
            "ImageModality": [_pick(rng, ["CR", "DX", ""]) for _ in range(n_img)],
            "ImagePath": paths, "ImageShape": shapes,
            "ImageViewPosition": [_pick(rng, VIEWS, VIEW_P) for _ in range(n_img)],
            "Impression": sections[3], "Indication": sections[0],
            "InstitutionName": f"site-{int(rng.integers(1, 80))}",
            "Manufacturer": _pick(rng, ["['SAMSUNG']", "['CARESTREAM']", "['GE MEDICAL']"]),
            "PatientAge": age, "PatientID": pid, "PatientSex": sex,
            "PatientSize": _pick(rng, [float("nan"), 0.0, 1.8, 1.62]),
            "PatientWeight": _pick(rng, [float("nan"), 0.0, 60.5, 117.654]),
            "StudyDate": int(rng.integers(1995, 2023)) * 10000 + int(rng.integers(1, 13)) * 100
            + int(rng.integers(1, 29)),
            "StudyDescription": _pick(rng, ["CHEST  1 VIEW", "XR CHEST 2 VIEWS PA AND LATERAL"]),
            "StudyInstanceUid": study,
        }
        out[f"p{pid}_a{acc}_s{study}"] = entry
    return out


def write_rexgradient(root: str | Path, *, studies: dict[str, int] | None = None, seed: int = 0,
                      images: bool = True, image_size: tuple[int, int] = (320, 288),
                      bbox: str | None = None, bbox_rotation: float = 0.0) -> Path:
    """Write a ReXGradient-160K replica under ``root`` and return ``root/deid_png``.

    Args:
        studies: studies per split, default ``{"train": 24, "valid": 8, "test": 8}``.
        images: also write the 16-bit PNGs (``False`` writes metadata only).
        image_size: the PNGs' largest ``(height, width)``; each image varies around it.
        bbox: also write the box file, as ``"label_studio_json"``, ``"label_studio_json_min"``
            or ``"keyed_by_image"``. bbox_rotation: rotation of the first box (degrees).
    """
    root = Path(root)
    meta_dir = root / "download" / "metadata"
    meta_dir.mkdir(parents=True, exist_ok=True)
    image_root = root / "deid_png"
    image_root.mkdir(parents=True, exist_ok=True)
    studies = studies or {"train": 24, "valid": 8, "test": 8}
    all_meta = []
    for i, (split, n) in enumerate(studies.items()):
        meta = make_metadata(n, seed=seed * 1000 + i)
        all_meta.append(meta)
        _dump(meta_dir / f"{split}_metadata_view_position.json", meta)
        plain = {k: {**e, "ImageViewPosition": [""] * len(e["ImagePath"])}
                 for k, e in meta.items()}
        _dump(meta_dir / f"{split}_metadata.json", plain)
        with open(meta_dir / f"{split}_metadata.csv", "w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(CSV_COLUMNS)
            for e in meta.values():
                w.writerow(["" if e[c] is None else e[c] for c in CSV_COLUMNS])
        if images:
            rng = np.random.default_rng(seed * 1000 + i + 500)
            h, w = image_size
            for e in meta.values():
                for p in e["ImagePath"]:
                    hh, ww = int(h * rng.uniform(0.8, 1)), int(w * rng.uniform(0.8, 1))
                    write_png(root / p.replace("../", "", 1), synthetic_cxr(hh, ww, rng=rng))
    if bbox is not None:
        _dump(meta_dir / BBOX_FILE, make_bbox_file(all_meta, form=bbox, seed=seed,
                                                   rotation=bbox_rotation))
    (root / "download" / "README.md").write_text("Synthetic ReXGradient-160K replica "
                                                  "(radharmony.fake); no real data.\n")
    return image_root


BBOX_FILE = "interstitial_pattern_bbox.json"
BBOX_LABELS = ["reticular", "reticulonodular", "nodular", "ground glass", "honeycombing"]


def make_bbox_file(metas: list[dict], *, form: str, seed: int = 0, rotation: float = 0.0):
    """``interstitial_pattern_bbox.json`` content for about a third of the images of ``metas``
    (images with a known ``ImageShape``), each boxed by one or two annotators."""
    rng = np.random.default_rng(seed + 77)
    regions = []  # (name, annotator, shape (rows, cols), x, y, w, h in percent, label)
    for meta in metas:
        for e in meta.values():
            for p, shape in zip(e["ImagePath"], e["ImageShape"]):
                if shape == "" or rng.random() > 0.35:
                    continue
                name = f"{e['StudyInstanceUid']}_{Path(p).stem}.png"
                for who in [11, 14][: int(rng.integers(1, 3))]:
                    for _ in range(int(rng.integers(1, 3))):
                        x, y = rng.uniform(5, 60, 2)
                        w, h = rng.uniform(5, 35, 2)
                        regions.append((name, who, shape, round(x, 3), round(y, 3),
                                        round(w, 3), round(h, 3), _pick(rng, BBOX_LABELS)))
    if form == "keyed_by_image":
        out: dict[str, list] = {}
        for k, (name, who, (rows, cols), x, y, w, h, label) in enumerate(regions):
            out.setdefault(name, []).append(
                {"x": x * cols / 100, "y": y * rows / 100, "width": w * cols / 100,
                 "height": h * rows / 100, "rotation": rotation if k == 0 else 0,
                 "label": label, "annotator": str(who)})
        return out
    tasks: dict[str, dict] = {}
    for k, (name, who, (rows, cols), x, y, w, h, label) in enumerate(regions):
        task = tasks.setdefault(name, {"id": len(tasks) + 1, "annotations": {}, "data": {
            "image": f"/data/upload/3/{int(rng.integers(16**8)):08x}-{name}"}})
        task["annotations"].setdefault(who, []).append({
            "original_width": cols, "original_height": rows, "image_rotation": 0,
            "value": {"x": x, "y": y, "width": w, "height": h,
                      "rotation": rotation if k == 0 else 0, "rectanglelabels": [label]},
            "id": f"r{k}", "from_name": "label", "to_name": "image", "type": "rectanglelabels",
            "origin": "manual"})
    if form == "label_studio_json_min":
        return [{"image": t["data"]["image"], "id": t["id"],
                 "label": [{**r["value"], "original_width": r["original_width"],
                            "original_height": r["original_height"]} for r in res],
                 "annotator": who, "annotation_id": t["id"] * 10 + who,
                 "created_at": "2024-05-02T10:11:12.000000Z",
                 "updated_at": "2024-05-02T10:11:12.000000Z", "lead_time": 12.5}
                for t in tasks.values() for who, res in t["annotations"].items()]
    return [{"id": t["id"], "annotations": [
        {"id": t["id"] * 10 + who, "completed_by": who, "result": res, "was_cancelled": False,
         "ground_truth": False, "created_at": "2024-05-02T10:11:12.000000Z", "lead_time": 12.5,
         "task": t["id"]} for who, res in t["annotations"].items()],
        "predictions": [], "data": t["data"], "meta": {}, "project": 3}
        for t in tasks.values()]


def _dump(path: Path, obj) -> None:
    with open(path, "w") as fh:
        json.dump(obj, fh, indent=2)  # json writes float('nan') as a bare NaN, as the real files



@register_fake("rexgradient_train", "rexgradient_valid", "rexgradient_test")
def make(root: Path) -> dict:
    """Contract-suite maker: a small replica with images and the box file; kwargs for any
    split."""
    return {"base_image_dir": write_rexgradient(root, bbox="label_studio_json")}
