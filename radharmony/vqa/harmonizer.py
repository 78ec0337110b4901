"""The base VQA harmonizer: a dataset's question files -> the question-level table.

A VQA dataset module implements :meth:`BaseVQAHarmonizer.columns` (raw -> one list per
column, one item per question); the base turns them into the table (key image, column order)
and the one schema validation checks it (:mod:`radharmony.table.questions`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, ClassVar, Iterator

import pandas as pd

from ..errors import MetadataError
from ..table.harmonizer import BaseHarmonizer, Inputs
from ..table.read_json import read_json_file
from .table import question_frame


class BaseVQAHarmonizer(BaseHarmonizer):
    """One row per question; see :func:`radharmony.vqa.vqa_spec` for the columns.

    A set shipped as several files of one kind beside each other (one per split or per
    question type) lists their names in :attr:`FILES`: :meth:`inputs` declares those found
    beside the metadata file and :meth:`read_files` reads each.
    """

    #: file name -> what it holds (a split, a question type), in reading order
    FILES: ClassVar[dict[str, str]] = {}

    def inputs(self, path: Path) -> Inputs:
        return Inputs(path, {n: path.with_name(n) if path.with_name(n).is_file() else None
                             for n in self.FILES if n != path.name})

    def read(self, inputs: Inputs) -> list:
        """The default: the metadata file and :attr:`FILES`, each a JSON list of questions."""
        return self.read_files(inputs, lambda p: read_json_file(
            p, what="a JSON list of questions"))

    @staticmethod
    def entries(raw: list, *, source: str, required: tuple[str, ...]
                ) -> Iterator[tuple[str, dict]]:
        """``(file name, question)`` of every question :meth:`read_files` read; an entry that
        is no object holding the ``required`` keys is refused naming file and entry."""
        for name, questions in raw:
            for i, q in enumerate(questions):
                if not isinstance(q, dict) or any(k not in q for k in required):
                    raise MetadataError(f"{source}: {name} entry {i} is not a question",
                                        expected=f"an object with {list(required)}",
                                        found=repr(q)[:80], fix="pass the file as shipped")
                yield name, q

    def read_files(self, inputs: Inputs, read: Callable[[Path], Any], *,
                   kind: type = list) -> list[tuple[str, Any]]:
        """``[(file name, read(file)), ...]``: the metadata file, then each of :attr:`FILES`
        present; a file whose content is not a ``kind`` is refused naming it."""
        out = []
        for name, path in [(inputs.metadata.name, inputs.metadata), *inputs.files.items()]:
            if path is None:
                continue
            raw = read(path)
            if not isinstance(raw, kind):
                raise MetadataError(f"{path} has the wrong top-level type",
                                    expected=f"a JSON {kind.__name__} of questions",
                                    found=type(raw).__name__, fix="pass the file as shipped")
            out.append((name, raw))
        return out

    @classmethod
    def columns(cls, raw: Any, *, source: str) -> dict[str, list]:
        """Pure: raw question files -> ``{column: values}`` (the spec's columns, plus
        ``patient_id``, ``study_id``, ``image_paths``, ``view_positions``, optional
        ``report``)."""
        raise NotImplementedError

    @classmethod
    def harmonize_raw(cls, raw: Any, *, source: str = "metadata") -> pd.DataFrame:
        return question_frame(cls.columns(raw, source=source), cls.spec, source=source)
