"""``radharmony list``: the registered datasets, read from the light catalog
(:mod:`radharmony.catalog`), so the command answers without importing torch."""

from __future__ import annotations

import argparse

from .output import EXIT_OK, emit, text_table
from .. import catalog


def cmd_list(args: argparse.Namespace) -> int:
    rows = []
    for family, keys in sorted(catalog.families().items()):
        for key in keys:
            spec = catalog.spec(key)
            rows.append({"key": key, "family": family, "title": spec.title,
                         "splits": keys, "outputs": sorted(spec.outputs),
                         "labels": len(spec.label_cols), "expected": dict(spec.expected),
                         "published": spec.published_count(),
                         "expected_note": spec.expected_note, "access": spec.access})

    def text(rows):  # a dataset without a published count: its page says why
        body = text_table([[r["key"], r["title"], ",".join(r["outputs"]) or "-", r["labels"],
                            r["published"] or "none"] for r in rows],
                          ["KEY", "TITLE", "OUTPUTS", "LABELS", "PUBLISHED"])
        access = {r["family"]: r["access"] for r in rows}
        return body + "\n\nAccess:\n" + "\n".join(f"  {f}: {a}" for f, a in access.items())
    emit(args, rows, text)
    return EXIT_OK
