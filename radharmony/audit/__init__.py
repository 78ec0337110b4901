"""Audit a dataset or a merge: duplicate images, image sanity, and a page a researcher reads.

``radharmony.audit(ds_or_merge)`` returns an :class:`AuditReport` (see
:mod:`radharmony.audit.core`); ``report.to_html("audit.html")`` writes the page;
``report.write_exclusions("exclude.txt")`` writes the sample ids a dataset's ``exclude=`` takes.
The CLI: ``radharmony audit KEY... --root KEY=DIR ... --html audit.html``. See docs/audit.md.

The package itself is callable (``radharmony.audit(...)`` is :func:`audit`), so its modules
stay reachable as ``radharmony.audit.core`` and so on.
"""

import sys
import types

from .core import AuditError, AuditReport, audit
from .hashing import MAX_DISTANCE
from .sanity import SanityLimits


class _CallableModule(types.ModuleType):
    def __call__(self, *args, **kwargs) -> AuditReport:
        return audit(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule

__all__ = ["AuditError", "AuditReport", "MAX_DISTANCE", "SanityLimits", "audit"]
