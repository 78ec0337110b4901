"""LIDC-IDRI reader XML: parsed with each element's line, checked, and the readers' marks
grouped per nodule. Pure: the file's bytes in, plain records out (no DICOM, no geometry).

One XML per CT series (``LidcReadMessage``, namespace ``http://www.nih.gov``)::

    ResponseHeader       SeriesInstanceUid (sic), StudyInstanceUID, ...
    readingSession       one per reader (up to four): servicingRadiologistID, then
      unblindedReadNodule  noduleID, characteristics (the nine ratings; nodules >= 3 mm
                           only) and one roi per slice: imageZposition, imageSOP_UID,
                           inclusion (FALSE: a hole), edgeMap (xCoord, yCoord) ...
      nonNodule            nonNoduleID, imageZposition, imageSOP_UID, locus (xCoord, yCoord)

A nodule >= 3 mm is outlined slice by slice (a closed contour: its last edgeMap repeats the
first); a nodule < 3 mm is one edgeMap (a point, no characteristics). Radiograph reads
(``IdriReadMessage``, the CR/DX series of the same patients) are not CT reads: :func:`parse_read`
returns None for them.

Bad input is counted in ``problems`` (the line and what is wrong) and its mark or contour
left out, never guessed: a reading session without a reader id (its marks: the readers of a
nodule must be told apart), a contour whose last point is not its first, a point at a
negative pixel coordinate, a rating outside its scale (that rating only).

Readers are told apart by their session's position in the file (1..4): the TCIA notes say the
same radiologist is not the same position across files, and some files repeat an anonymised
id (``anon``) in every session, so the id itself never identifies a reader within a file.

**Grouping** (:func:`group_marks`): each reader's nodule marks are taken in the file's order
and joined to the nearest group (centroid distance, x and y in pixels, z in mm) that holds no
mark of that reader yet and one of whose marks is *near*: their extents (x, y over the outline,
z over the slices), each grown by :data:`LINK_PX` pixels in-plane and :data:`LINK_MM` mm in
z, overlap; otherwise the mark starts a group. So a group holds at most one mark a reader.
Non-nodules are not grouped.
"""

from __future__ import annotations

import numpy as np

from ..errors import MetadataError

NAMESPACE = "http://www.nih.gov"
#: the nine ratings in the XML's order -> the top of each scale (all start at 1)
CHARACTERISTICS = {"subtlety": 5, "internalStructure": 4, "calcification": 6,
                   "sphericity": 5, "margin": 5, "lobulation": 5, "spiculation": 5,
                   "texture": 5, "malignancy": 5}
#: extents of two marks grown by this much in-plane (pixels) ...
LINK_PX = 5.0
#: ... and along z (mm) are near when they overlap
LINK_MM = 5.0


class Node:
    """An XML element: local name, namespace, line of its start tag, children, text."""
    __slots__ = ("tag", "ns", "line", "children", "parts")

    def __init__(self, tag: str, ns: str, line: int):
        self.tag, self.ns, self.line, self.children, self.parts = tag, ns, line, [], []

    def all(self, tag: str) -> list["Node"]:
        return [c for c in self.children if c.tag == tag]

    def first(self, tag: str) -> "Node | None":
        for child in self.children:
            if child.tag == tag:
                return child
        return None

    def value(self, tag: str) -> str | None:
        node = self.first(tag)
        text = None if node is None else "".join(node.parts).strip()
        return text or None


def parse_tree(data: bytes, *, source: str) -> Node:
    """The element tree of ``data`` with each element's line (expat reports it)."""
    from xml.parsers import expat

    parser = expat.ParserCreate(namespace_separator=" ")
    parser.buffer_text = True  # one call a text node
    stack: list[Node] = []
    top: list[Node] = []

    def start(name, _attrs):
        ns, _, tag = name.rpartition(" ")
        node = Node(tag, ns, parser.CurrentLineNumber)
        (stack[-1].children if stack else top).append(node)
        stack.append(node)

    parser.StartElementHandler = start
    parser.EndElementHandler = lambda _name: stack.pop()
    parser.CharacterDataHandler = lambda text: stack[-1].parts.append(text) if stack else None
    try:
        parser.Parse(data, True)
    except expat.ExpatError as exc:
        raise MetadataError(f"{source}: not a well-formed XML file",
                            expected="an LIDC reader XML (LidcReadMessage)", found=str(exc),
                            fix="download the series' XML again (a truncated copy?)") from None
    return top[0]


def _number(text: str | None) -> float | None:
    try:
        return float(text) if text is not None else None
    except ValueError:
        return None


def parse_read(data: bytes, *, source: str) -> dict | None:
    """One XML's read: ``{"series_uid", "study_uid", "marks", "non_nodules", "problems",
    "readers"}`` (``readers``: the sessions with a reader id; None for a radiograph read).
    A mark: ``{"reader"`` (session 1..4),
    ``"nodule_id", "line", "kind"`` (``"contour"`` or ``"point"``), ``"characteristics",
    "rois"``: ``[{"z", "sop", "inclusion", "xy", "line"}]}``; a non-nodule: ``{"reader",
    "nodule_id", "line", "z", "sop", "xy"}``; a problem: ``{"line", "what"}``."""
    root = parse_tree(data, source=source)
    if root.tag != "LidcReadMessage":
        if root.tag == "IdriReadMessage":
            return None
        raise MetadataError(f"{source}: not an LIDC reader XML",
                            expected="a LidcReadMessage root element", found=f"<{root.tag}>",
                            fix="point at the LIDC-IDRI collection folder")
    header = root.first("ResponseHeader") or Node("ResponseHeader", "", root.line)
    out = {"series_uid": header.value("SeriesInstanceUid") or header.value("SeriesInstanceUID"),
           "study_uid": header.value("StudyInstanceUID"), "marks": [], "non_nodules": [],
           "problems": [], "readers": 0}
    problems = out["problems"]
    for reader, session in enumerate(root.all("readingSession"), start=1):
        if session.value("servicingRadiologistID") is None:
            problems.append({"line": session.line, "what": "unknown reader id (a reading "
                             "session without servicingRadiologistID): its marks left out"})
            continue
        out["readers"] += 1
        for nodule in session.all("unblindedReadNodule"):
            mark = _nodule(nodule, reader, problems)
            if mark is not None:
                out["marks"].append(mark)
        for other in session.all("nonNodule"):
            locus = other.first("locus") or Node("locus", "", other.line)
            xy = [_number(locus.value("xCoord")), _number(locus.value("yCoord"))]
            point = {"reader": reader, "nodule_id": other.value("nonNoduleID"),
                     "line": other.line, "z": _number(other.value("imageZposition")),
                     "sop": other.value("imageSOP_UID"), "xy": [xy]}
            if _bad_points(point["xy"], locus.line, problems):
                continue
            out["non_nodules"].append(point)
    return out


def _bad_points(xy, line: int, problems: list) -> bool:
    if any(v is None for p in xy for v in p) or not xy:
        problems.append({"line": line, "what": "an edgeMap without a number in xCoord or "
                         "yCoord: left out"})
        return True
    if any(v < 0 for p in xy for v in p):
        problems.append({"line": line, "what": "a point outside the image (a negative pixel "
                         "coordinate): left out"})
        return True
    return False


def _nodule(node: Node, reader: int, problems: list) -> dict | None:
    rois = []
    for roi in node.all("roi"):
        xy = [[_number(e.value("xCoord")), _number(e.value("yCoord"))]
              for e in roi.all("edgeMap")]
        if _bad_points(xy, roi.line, problems):
            continue
        if len(xy) > 1 and xy[0] != xy[-1]:
            problems.append({"line": roi.line, "what": f"a contour that does not close "
                             f"({len(xy)} points, the last is not the first): left out"})
            continue
        rois.append({"z": _number(roi.value("imageZposition")), "sop": roi.value("imageSOP_UID"),
                     "inclusion": (roi.value("inclusion") or "TRUE").upper() != "FALSE",
                     "xy": xy, "line": roi.line})
    if not rois:
        return None
    ratings = {}
    block = node.first("characteristics")
    for name, top in CHARACTERISTICS.items():
        value = None if block is None else _number(block.value(name))
        if value is not None and not (1 <= value <= top and value == int(value)):
            problems.append({"line": block.line, "what": f"{name} {value:g} outside 1..{top}: "
                             "that rating left out"})
            value = None
        ratings[name] = None if value is None else int(value)
    point = all(len(r["xy"]) == 1 for r in rois)
    return {"reader": reader, "nodule_id": node.value("noduleID"), "line": node.line,
            "kind": "point" if point else "contour",
            "characteristics": ratings if block is not None else {}, "rois": rois}


# -- grouping ------------------------------------------------------------------------------------
def extent(mark: dict) -> np.ndarray:
    """``[[x0, y0, z0], [x1, y1, z1]]`` of a mark's included outlines (pixels, mm)."""
    rois = [r for r in mark["rois"] if r["inclusion"]] or mark["rois"]
    xy = np.array([p for r in rois for p in r["xy"]], dtype=np.float64)
    z = np.array([np.nan if r["z"] is None else r["z"] for r in rois], dtype=np.float64)
    z = np.array([0.0]) if np.isnan(z).all() else z[~np.isnan(z)]
    return np.array([[*xy.min(axis=0), z.min()], [*xy.max(axis=0), z.max()]])


def group_marks(marks: list[dict]) -> list[list[int]]:
    """The indices of ``marks`` grouped per nodule (the rule of the module text), groups in
    the order of their first mark."""
    grow = np.array([LINK_PX, LINK_PX, LINK_MM])
    boxes = [extent(m) for m in marks]
    centres = [b.mean(axis=0) for b in boxes]
    groups: list[list[int]] = []
    for i, mark in enumerate(marks):
        best, best_distance = None, np.inf
        for g, members in enumerate(groups):
            if any(marks[j]["reader"] == mark["reader"] for j in members):
                continue
            near = any(np.all(boxes[i][0] - grow <= boxes[j][1] + grow)
                       and np.all(boxes[j][0] - grow <= boxes[i][1] + grow) for j in members)
            if near:
                distance = float(np.linalg.norm(
                    centres[i] - np.mean([centres[j] for j in members], axis=0)))
                if distance < best_distance:
                    best, best_distance = g, distance
        if best is None:
            groups.append([i])
        else:
            groups[best].append(i)
    return groups


def nodule_records(marks: list[dict], groups: list[list[int]]) -> list[dict]:
    """One record a group: ``kind`` (``"contour"`` when any reader outlined it, else
    ``"point"``), ``readers``, ``nodule_ids``, ``lines``, each rating as a list over its
    readers' outlines (None where one gave none) and ``malignancy_median``."""
    out = []
    for members in groups:
        group = [marks[j] for j in members]
        rated = [m for m in group if m["characteristics"]]
        record = {"kind": "contour" if any(m["kind"] == "contour" for m in group) else "point",
                  "readers": [m["reader"] for m in group],
                  "nodule_ids": [m["nodule_id"] for m in group],
                  "lines": [m["line"] for m in group],
                  "characteristics": {name: [m["characteristics"][name] for m in rated]
                                      for name in CHARACTERISTICS}}
        scores = [v for v in record["characteristics"]["malignancy"] if v is not None]
        record["malignancy_median"] = float(np.median(scores)) if scores else None
        out.append(record)
    return out
