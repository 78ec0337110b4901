"""Audit a dataset or a merge: duplicate images, image sanity, and a page a researcher reads.

``radharmony.audit(ds_or_merge)`` returns an :class:`AuditReport` (see
:mod:`radharmony.audit.core`); ``report.to_html("audit.html")`` writes the page;
``report.write_exclusions("exclude.txt")`` writes the sample ids a dataset's ``exclude=`` takes.
The CLI: ``radharmony audit KEY... --root KEY=DIR ... --html audit.html``. See docs/audit.md.
"""

from .core import AuditError, AuditReport, audit
from .hashing import MAX_DISTANCE
from .sanity import SanityLimits

__all__ = ["AuditError", "AuditReport", "MAX_DISTANCE", "SanityLimits", "audit"]
