"""What a task is, what it needs, and which datasets can feed it.

A :class:`Task` turns one source (a :class:`~radharmony.mixture.context.SourceContext`: the
harmonized table of one dataset split, grouped into images, studies or questions) into a
:class:`Draft`: the eligible items, vectorised over the table, and a ``render`` function that
writes the targets, prompt slots and ``fields`` of any chunk of them. A task never re-reads a
dataset's metadata files.

What a dataset can feed is decided from its spec alone (:func:`capabilities`: outputs, label
columns, row unit, columns), so ``radharmony tasks`` and the spec check run before any table
is read. A new family is one module under ``radharmony/mixture/tasks/`` calling
:func:`register_task` (and :func:`register_capability` for a new need), plus one line in
``tasks/__init__.py``'s ``FAMILIES``.
"""

from __future__ import annotations

import string
from dataclasses import dataclass, field
from typing import Callable, Mapping

import numpy as np

from ...errors import RadHarmonyError

#: the needs a task may declare, and what each means
NEEDS = {
    "images": "image files (every dataset has them)",
    "study": "studies: images grouped by study_id (image-level tables)",
    "prior": "a study date or order, for the patient's previous study",
    "report": "free-text reports",
    "findings": "a findings section in the reports",
    "impression": "an impression section in the reports",
    "indication": "an indication section in the reports",
    "labels": "label columns mapped to the canonical findings (or labels='report': silver)",
    "boxes": "bounding boxes",
    "questions": "VQA questions and answers (one row per question)",
    "views": "a view position per image",
    "phrases": "phrases grounded by boxes",
    "regions": "anatomical regions with boxes",
    "progression": "a change label between a study and its prior",
}
#: the families a record may belong to (``records.parquet``'s ``family``)
FAMILIES = ("reports", "text", "labels", "views", "vqa", "matching", "grounding", "temporal")
#: columns whose presence means the table has a study date (see radharmony.studies.priors)
_DATE_COLUMNS = ("study_date", "patient_report_date_order")


def _image_level(spec) -> bool:
    return spec.row_unit == "image"


def _has_report(spec, kwargs) -> bool:
    # a dataset of figure captions (a caption column: ROCO) has no sectioned report to
    # generate or match; it feeds the captioning tasks (tasks/captions.py) instead
    return _image_level(spec) and "report" in spec.outputs and "caption" not in spec.columns


def _has_labels(spec, kwargs) -> bool:
    if kwargs.get("labels") == "report":
        return _has_report(spec, kwargs)
    return _image_level(spec) and bool(spec.label_cols) and \
        any(v for v in spec.label_map.values())


def _has_prior(spec, kwargs) -> bool:
    dates = {spec.study_date_col, *_DATE_COLUMNS} - {None}
    return _image_level(spec) and bool(set(spec.columns) & dates)


#: need -> predicate(spec, kwargs): whether a dataset built with ``kwargs`` has it
CAPABILITIES: dict[str, Callable] = {
    "images": lambda spec, kw: True,
    "study": lambda spec, kw: _image_level(spec),
    "prior": _has_prior,
    "report": _has_report,
    "findings": _has_report,
    "impression": _has_report,
    "indication": _has_report,
    "labels": _has_labels,
    "boxes": lambda spec, kw: _image_level(spec) and "bbox" in spec.outputs,
    "questions": lambda spec, kw: spec.row_unit == "question",
    "views": lambda spec, kw: _image_level(spec) and bool(spec.view_map),
}


def register_capability(need: str, predicate: Callable, *, meaning: str) -> None:
    """Declare (or replace) how a dataset's spec shows it has ``need``."""
    NEEDS[need] = meaning
    CAPABILITIES[need] = predicate


def capabilities(spec, kwargs: Mapping | None = None) -> frozenset[str]:
    """The needs a dataset with ``spec``, built with ``kwargs``, can meet (spec only: no
    table is read)."""
    kw = dict(kwargs or {})
    return frozenset(n for n, has in CAPABILITIES.items() if has(spec, kw))


@dataclass
class Rendered:
    """A chunk of records as a task writes them: ``targets``, ``slots`` (prompt placeholder
    -> values) and ``fields`` (JSON text, :func:`~radharmony.mixture.records.fields_json`),
    one entry per item of the chunk."""

    targets: list
    slots: dict
    fields: list


@dataclass
class Draft:
    """A task's eligible items in one source.

    Attributes:
        unit: the units the items stand on: ``"image"``, ``"study"`` or ``"question"``
            (:meth:`SourceContext.units`).
        pos: per item, its unit's position (int64).
        item: per item, its id within the source: an object array, a function of the item
            positions ``j`` giving their ids (for millions of items: made per chunk), or
            None (the unit's id).
        render: ``render(j) -> Rendered`` for the item positions ``j`` (int64 array).
        skipped: reason -> count of units left out (no findings, no labels, ...).
        text_only: the records have no image.
    """

    unit: str
    pos: np.ndarray
    render: Callable[[np.ndarray], Rendered]
    item: np.ndarray | Callable | None = None
    skipped: dict = field(default_factory=dict)
    text_only: bool = False

    def __len__(self) -> int:
        return len(self.pos)


@dataclass(frozen=True)
class Task:
    """A task of the registry.

    Attributes:
        name: the registry name (``records.parquet``'s ``task``).
        family: one of :data:`FAMILIES`.
        needs: the needs of :data:`NEEDS` a source must meet (all of them).
        prompts: the paraphrases of the user turn (``str.format`` templates over ``slots``);
            a record's is chosen by a seeded hash of its id; a spec's ``prompts:`` may
            replace them.
        build: ``build(ctx) -> Draft``.
        slots: the placeholders a prompt may use.
        description: one line for ``radharmony tasks``.
    """

    name: str
    family: str
    needs: tuple
    prompts: tuple
    build: Callable
    slots: tuple = ()
    description: str = ""

    def feeds_from(self, spec, kwargs: Mapping | None = None) -> bool:
        """Whether a dataset with ``spec`` (built with ``kwargs``) can feed this task."""
        return set(self.needs) <= capabilities(spec, kwargs)


#: name -> task, in registration order
TASKS: dict[str, Task] = {}


def register_task(task: Task) -> Task:
    """Add ``task`` to :data:`TASKS` (its prompts checked against its slots)."""
    unknown = [n for n in task.needs if n not in NEEDS]
    if unknown or task.family not in FAMILIES or not task.prompts:
        raise RadHarmonyError(f"Task {task.name!r} cannot be registered",
                              expected=f"needs among {sorted(NEEDS)}, a family among "
                                       f"{FAMILIES} and at least one prompt",
                              found=f"needs {list(task.needs)}, family {task.family!r}, "
                                    f"{len(task.prompts)} prompts",
                              fix="declare a new need with register_capability first")
    for p in task.prompts:
        bad = prompt_slots(p) - set(task.slots)
        if bad:
            raise RadHarmonyError(f"Task {task.name!r}: a prompt uses unknown slots",
                                  expected=f"slots among {list(task.slots)}",
                                  found=f"{sorted(bad)} in {p!r}", fix="fix the prompt")
    TASKS[task.name] = task
    return task


def prompt_slots(template: str) -> set[str]:
    """The ``{name}`` placeholders of a prompt template (ValueError when malformed)."""
    return {name for _, name, _, _ in string.Formatter().parse(template) if name is not None}


def feeders(task: Task) -> list[str]:
    """Every registered dataset key that can feed ``task`` with its default arguments."""
    from ... import catalog

    return [k for k in catalog.list_datasets() if task.feeds_from(catalog.spec(k))]


__all__ = ["CAPABILITIES", "Draft", "FAMILIES", "NEEDS", "Rendered", "TASKS", "Task",
           "capabilities", "feeders", "prompt_slots", "register_capability", "register_task"]
