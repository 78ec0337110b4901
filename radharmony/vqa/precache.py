"""Every image of a VQA dataset's questions -- their own and their reference study's -- as
the image-level interface that pre-caching and the up-front checks use.

A question-level table names one key image per row (``image_path``); a question reads all of
its ``image_paths`` (and ``ref_image_paths``). :class:`QuestionImages` lists each distinct
file once, so that :meth:`VQADataset.pre_cache` decodes and packs them all and
:meth:`VQADataset.validate` checks them all.
"""

from __future__ import annotations

import pandas as pd

from ..imaging.read import safe_path
from .images import load_one


class QuestionImages:
    """The distinct images of ``ds``'s questions, in order of first use (a question's images,
    then its reference images), one row each: ``image_path``, ``patient_id``, ``study_id``
    (the reference study's for a reference image)."""

    def __init__(self, ds):
        self.ds, self.spec = ds, ds.spec
        self.image_cache, self.pipeline = ds.image_cache, ds.pipeline
        self.base_image_dir = ds.base_image_dir
        self.default_transform = getattr(ds, "default_transform", None)
        df = ds.harmonized_df
        rows: dict[str, tuple] = {}
        columns = [("image_paths", "study_id")] + \
            [("ref_image_paths", "ref_study_id")] * ("ref_image_paths" in df.columns)
        for col, study in columns:
            for paths, patient, sid in zip(df[col].tolist(), df["patient_id"].tolist(),
                                           df[study].tolist()):
                for p in paths or ():
                    rows.setdefault(p, (patient, sid))
        self.paths = list(rows)
        self.harmonized_df = pd.DataFrame(
            {"image_path": self.paths, "patient_id": [r[0] for r in rows.values()],
             "study_id": [r[1] for r in rows.values()]}, dtype=object)
        self.sample_ids = [f"{ds.spec.key}:image:{p}" for p in self.paths]

    def __len__(self) -> int:
        return len(self.paths)

    def image_file(self, index: int):
        return safe_path(self.base_image_dir, self.paths[index])

    def load_image(self, index: int):
        """Image ``index`` decoded and cached (as the questions read it)."""
        return load_one(self.ds, self.base_image_dir, self.paths[index])

    def __getitem__(self, index: int):
        """Reads image ``index``: an absent or unsafe file raises the standard error."""
        return self.load_image(index)
