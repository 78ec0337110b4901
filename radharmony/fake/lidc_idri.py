"""An LIDC-IDRI replica in the real on-disk format (TCIA, with the XML annotations included).

Layout (``<root>`` is ``base_image_dir``)::

    <root>/LIDC-IDRI/LIDC-IDRI-0001/<StudyInstanceUID>/<SeriesInstanceUID>/000001.dcm ...
    <root>/LIDC-IDRI/LIDC-IDRI-0001/<StudyInstanceUID>/<SeriesInstanceUID>/069.xml

Quirks reproduced: the XML's namespace ``http://www.nih.gov``, ``SeriesInstanceUid`` (sic)
beside ``StudyInstanceUID`` in its header, ``imageZposition`` with a trailing blank, closed
contours (the last edgeMap repeats the first), a hole (``inclusion`` FALSE), a nodule < 3 mm
as one edgeMap without characteristics, a non-nodule's ``locus``, an anonymised reader id
repeated in two sessions (``anon``); file numbers that do not follow z (instance numbers run
against the stack); a series with two slices at one position (the duplicate has the highest
instance number and its own SOP UID, and a reader outlined on it); a radiograph read
(``IdriReadMessage``) in a CR series folder. ``bad=True`` adds a session without a reader id,
a contour that does not close and a point outside the volume.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from . import register_fake
from ..datasets.lidc_idri import COLLECTION
from .volumes import AXIAL, slice_positions, synthetic_ct, write_dicom_series

ROOT_UID = "1.3.6.1.4.1.14519.5.2.1.6279.6001"
SHAPE = (8, 32, 32)
STEP, Z0 = 1.25, -100.0
HEADER = ("<Version>1.8.1</Version><MessageId>-421198203</MessageId><TaskDescription>Second "
          "unblinded read</TaskDescription><CtImageFile>removed</CtImageFile>")


def uid(*parts: int) -> str:
    return ".".join([ROOT_UID, *map(str, parts)])


def square(x0: int, y0: int, x1: int, y1: int) -> list[tuple[int, int]]:
    """A closed outline: the corners, the first repeated."""
    return [(x0, y0), (x1, y0), (x1, y1), (x0, y1), (x0, y0)]


def roi(sops, k: int, points, *, inclusion: bool = True, sop: str | None = None) -> str:
    """An outline (or a point) on slice ``k`` (its SOP UID, or ``sop``)."""
    edges = "".join(f"<edgeMap><xCoord>{x}</xCoord><yCoord>{y}</yCoord></edgeMap>"
                    for x, y in points)
    return (f"<roi><imageZposition>{Z0 + STEP * k:.6f} </imageZposition><imageSOP_UID>"
            f"{sop or sops[k]}</imageSOP_UID><inclusion>{'TRUE' if inclusion else 'FALSE'}"
            f"</inclusion>{edges}</roi>")


def nodule(name: str, rois: list[str], malignancy: int | None = None) -> str:
    ratings = "" if malignancy is None else (
        "<characteristics><subtlety>5</subtlety><internalStructure>1</internalStructure>"
        "<calcification>6</calcification><sphericity>3</sphericity><margin>3</margin>"
        "<lobulation>3</lobulation><spiculation>4</spiculation><texture>5</texture>"
        f"<malignancy>{malignancy}</malignancy></characteristics>")
    return f"<unblindedReadNodule><noduleID>{name}</noduleID>{ratings}{''.join(rois)}" \
           "</unblindedReadNodule>"


def non_nodule(sops, k: int, x: int, y: int) -> str:
    return (f"<nonNodule><nonNoduleID>Non-nodule 001</nonNoduleID><imageZposition>"
            f"{Z0 + STEP * k:.6f} </imageZposition><imageSOP_UID>{sops[k]}</imageSOP_UID>"
            f"<locus><xCoord>{x}</xCoord><yCoord>{y}</yCoord></locus></nonNodule>")


def session(reader: str | None, *marks: str) -> str:
    rid = "" if reader is None else f"<servicingRadiologistID>{reader}</servicingRadiologistID>"
    return f"<readingSession><annotationVersion>3.12</annotationVersion>{rid}" \
           f"{''.join(marks)}</readingSession>"


def read_message(study: str, series: str, sessions: list[str], *, root="LidcReadMessage"
                 ) -> str:
    """One reader XML, one element a line (as released: the lines an error names)."""
    text = (f'<?xml version="1.0" encoding="UTF-8"?>\n<{root} uid="{series}.0" '
            f'xmlns="http://www.nih.gov"><ResponseHeader>{HEADER}<SeriesInstanceUid>{series}'
            f"</SeriesInstanceUid><StudyInstanceUID>{study}</StudyInstanceUID></ResponseHeader>"
            f"{''.join(sessions)}</{root}>\n")
    return text.replace("><", ">\n<")


def write_series(folder: Path, series: str, study: str, patient: str, *, seed: int = 0,
                 duplicate: int | None = None) -> list[str]:
    """A CT series of :data:`SHAPE` under ``folder``; returns the SOP UIDs in z order (and
    with ``duplicate`` the SOP of a second file at slice ``duplicate``'s position, last)."""
    import pydicom

    hu = synthetic_ct(SHAPE, rng=np.random.default_rng(seed))
    positions = slice_positions(SHAPE[0], AXIAL, origin=(-12.0, -12.0, Z0), step=STEP)
    paths = write_dicom_series(folder, (hu.astype(np.int32) + 1024).astype(np.int16),
                               positions=positions, intercept=-1024.0, series_uid=series,
                               StudyInstanceUID=study, PatientID=patient, seed=seed,
                               names="{:06d}.dcm")
    sops = []
    for k, path in enumerate(paths):
        ds = pydicom.dcmread(path)
        ds.SOPInstanceUID = ds.file_meta.MediaStorageSOPInstanceUID = f"{series}.{k + 1}"
        ds.save_as(path, enforce_file_format=True)
        sops.append(ds.SOPInstanceUID)
    if duplicate is not None:
        ds = pydicom.dcmread(paths[duplicate])
        ds.SOPInstanceUID = ds.file_meta.MediaStorageSOPInstanceUID = f"{series}.99"
        ds.InstanceNumber = SHAPE[0] + 1
        ds.save_as(folder / f"{SHAPE[0] + 1:06d}.dcm", enforce_file_format=True)
        sops.append(ds.SOPInstanceUID)
    return sops


def write_lidc_idri(root: str | Path, *, bad: bool = False, seed: int = 0) -> Path:
    """Write three patients under ``root/LIDC-IDRI`` and return ``root``:

    - 0001: readers 1-3 outline nodule A (squares at x, y 10-14 on slices 2-3; 11-15 on 2-4;
      10-14 with a hole 11-13 on slice 3; malignancy 4, 5, 3); readers 1 and 4 mark a small
      nodule at (25, 20) and (26, 20) on slice 5; reader 2 a non-nodule at (5, 25) on slice 1.
    - 0002: two slices at slice 3's position; one reader outlines 5-8 on the duplicate's SOP
      (malignancy 2).
    - 0003: one reader, a non-nodule only; and a CR series with a radiograph read.
    """
    root = Path(root)
    base = root / COLLECTION
    for n, patient in enumerate(("LIDC-IDRI-0001", "LIDC-IDRI-0002", "LIDC-IDRI-0003"), 1):
        study, series = uid(seed, n), uid(seed, n, 3000 + n)
        folder = base / patient / study / series
        sops = write_series(folder, series, study, patient, seed=seed + n,
                            duplicate=3 if n == 2 else None)
        if n == 1:
            sessions = [
                session("540461523", nodule("Nodule 001", [roi(sops, k, square(10, 10, 14, 14))
                                                           for k in (2, 3)], 4),
                        nodule("IL057_130", [roi(sops, 5, [(25, 20)])])),
                session("anon", nodule("0", [roi(sops, k, square(11, 11, 15, 15))
                                             for k in (2, 3, 4)], 5), non_nodule(sops, 1, 5, 25)),
                session("anon", nodule("Nodule 002", [
                    roi(sops, 3, square(10, 10, 14, 14)),
                    roi(sops, 3, square(11, 11, 13, 13), inclusion=False)], 3)),
                session("315898095", nodule("5", [roi(sops, 5, [(26, 20)])]))]
            if bad:
                sessions[3] = session("315898095", nodule("5", [roi(sops, 5, [(26, 20)])]),
                                      nodule("6", [roi(sops, 6, [(20, 2), (24, 2), (24, 6)])],
                                             2),
                                      nodule("7", [roi(sops, 1, [(40, 5)])]))
                sessions.append(session(None, nodule("8", [roi(sops, 2, square(1, 1, 3, 3))], 1)))
        elif n == 2:
            on_duplicate = roi(sops, 3, square(5, 5, 8, 8), sop=sops[-1])
            sessions = [session("anon", nodule("1", [on_duplicate], 2))]
        else:
            sessions = [session("anon", non_nodule(sops, 4, 16, 16))]
            cr = base / patient / uid(seed, n, 7) / uid(seed, n, 7, 1)
            cr.mkdir(parents=True, exist_ok=True)
            (cr / "001.xml").write_text(read_message(uid(seed, n, 7), uid(seed, n, 7, 1), [],
                                                     root="IdriReadMessage"), encoding="utf-8")
        (folder / f"{68 + n:03d}.xml").write_text(read_message(study, series, sessions),
                                                  encoding="utf-8")
    return root


@register_fake("lidc_idri")
def make(root: Path) -> dict:
    """Contract-suite maker: three patients (nodules, duplicate slices, none)."""
    return {"base_image_dir": write_lidc_idri(root)}
