"""A hand-made OpenI report archive (``NLMCXR_reports.tgz`` format) for the evaluator tests."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path


def write_reports(path: Path, reports) -> Path:
    """Write ``reports`` -- ``(number, findings, impression, MeSH major tags)`` -- as OpenI's
    report archive at ``path`` (indication "Cough", no automatic tags, no images)."""
    from radharmony.fake.openi import report_xml

    with tarfile.open(path, "w:gz") as tar:
        for n, findings, impression, major in reports:
            data = report_xml(n, (None, "Cough", findings, impression), major, [], []).encode()
            info = tarfile.TarInfo(f"ecgen-radiology/{n}.xml")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path
