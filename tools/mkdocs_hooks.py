"""MkDocs hook: keep `mkdocs build --strict` strict except for one known, harmless message.

``radharmony.datasets`` builds ``__all__`` from its catalog of dataset modules (``__all__ +=
module.__all__``), which griffe's static reader cannot follow; every name in it is still
documented, from the module that defines it (``tools/gen_docs.py``). Only that message is
dropped; every other warning still fails the build.
"""

import logging


class _DynamicAll(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return "Unsupported item in radharmony.datasets.__all__" not in record.getMessage()


def on_startup(command, dirty):
    for name in ("mkdocs.plugins.griffe", "griffe", "mkdocs.plugins.mkdocstrings_handlers"):
        logging.getLogger(name).addFilter(_DynamicAll())
