"""The VQA dataset: one sample per question, its images stacked as a study sample.

A sample holds ``sample_id`` (``"<key>:<question_id>"``), ``patient_id``, ``study_id``,
``question_id``, ``question``, ``answer`` (text), ``answer_format`` (``closed`` / ``open`` /
``mcq``), ``options`` (``["A. ...", ...]``, empty unless mcq), ``answer_letter``,
``explanation``, ``task`` / ``category`` / ``subcategory`` where the source has them, the
images as ``img`` ``(K, 1, S, S)`` with ``img_mask`` ``(K,)``, ``views`` (canonical, one per
image) and ``key_image`` (PA, else AP, else 0), and for difference questions ``ref_study_id``,
``ref_img`` and ``ref_img_mask``. Splits and folds group by patient, as everywhere.
"""

from __future__ import annotations

import pandas as pd
import torch

from ..data import precache
from ..data.dataset import BaseRadiologicalDataset
from ..data.sampling import as_tensor
from ..errors import ImageReadError, PathSafetyError, check_choice
from ..table.schema import view_lists
from .images import absent_questions, report_absent, stack_images
from .precache import QuestionImages
from .table import REFERENCE, TAXONOMY

#: the text fields every VQA sample carries, in order
SAMPLE_FIELDS = ("patient_id", "study_id", "question_id", "question", "answer",
                 "answer_format", "options", "answer_letter", "explanation")
#: fields a sample carries where the table has the column
OPTIONAL_FIELDS = (*TAXONOMY, "split", "ref_study_id")


class VQADataset(BaseRadiologicalDataset):
    """Questions of a VQA dataset as samples (see the module docstring for the keys).

    Takes :class:`~radharmony.data.dataset.BaseRadiologicalDataset`'s arguments, plus
    ``max_images``: pad every question's images to this many slots (``img_mask`` False on the
    padding) so that the default collate stacks them; None keeps each question's own count
    (batch with :func:`radharmony.vqa.collate_vqa`). ``on_missing``: questions with an absent
    image are counted and named in a warning at construction; ``"drop"`` leaves them out,
    ``"raise"`` (default) keeps them and reading one raises naming the file.
    """

    def __new__(cls, *args, **kwargs):
        """A question already is a study-shaped sample: no ``level="study"`` hook here."""
        return torch.utils.data.Dataset.__new__(cls)

    def __init__(self, *args, max_images: int | None = None, on_missing: str = "raise",
                 **kwargs):
        self.max_images = max_images
        check_choice("on_missing", on_missing, ("raise", "drop"))
        super().__init__(*args, on_missing="raise", **kwargs)
        self.on_missing = on_missing
        df = self.harmonized_df
        root = self.base_image_dir
        absent = absent_questions(df, root, columns=("image_paths", "ref_image_paths"))
        report_absent(df, absent, owner=type(self).__name__, drop=on_missing == "drop",
                      root=root)
        if on_missing == "drop" and absent.any():
            self._set_table(pd.DataFrame(df)[~absent], derived=True)

    def _set_table(self, df: pd.DataFrame, *, derived: bool = False) -> None:
        super()._set_table(df, derived=derived)
        t = self._table
        cols = [c for c in (*SAMPLE_FIELDS, *OPTIONAL_FIELDS) if c in t.columns]
        self._fields = {c: t[c].to_numpy(dtype=object) for c in cols}
        self._images = t["image_paths"].to_numpy(dtype=object)
        self._views = view_lists(t["view_positions"].tolist(), self.spec.view_map)
        self._key = [p.index(k) for p, k in zip(self._images, t["image_path"])]
        self._refs = t[REFERENCE[1]].to_numpy(dtype=object) if REFERENCE[1] in t.columns \
            else None

    def __getitem__(self, index: int) -> dict:
        if not -len(self) <= index < len(self):
            raise IndexError(f"index {index} out of range for {len(self)} samples")
        index = int(index) % len(self)
        sid = self.rows.ids[index]
        sample = {"sample_id": sid, **{c: v[index] for c, v in self._fields.items()},
                  "views": self._views[index], "key_image": self._key[index],
                  "image_paths": list(self._images[index])}
        if "report" in self.outputs:
            sample["report"] = self.rows.reports[index]
        try:
            if self.user_transform is not None:
                sample["img"] = [str(self.base_image_dir / p) for p in sample["image_paths"]]
                sample = self.user_transform(sample)
                sample["img"] = as_tensor(sample["img"], self.dtype)
                return self.finish(sample)
            sample["img"], sample["img_mask"] = stack_images(
                self, self.base_image_dir, sample["image_paths"], size=self.max_images)
            refs = self._refs[index] if self._refs is not None else None
            if refs:
                sample["ref_img"], sample["ref_img_mask"] = stack_images(
                    self, self.base_image_dir, refs, size=self.max_images)
        except (ImageReadError, PathSafetyError) as exc:
            raise type(exc)(f"Sample {sid} (question {sample['question_id']!r}): {exc.what}",
                            expected=exc.expected, found=exc.found, fix=exc.fix) from None
        return self.finish(sample)

    def __getitems__(self, indices) -> list[dict]:
        return [self[i] for i in indices]

    # -- every image of the questions, not the key image alone ------------------------------
    def cache_keys(self) -> list[str]:
        """The cache key of every distinct image of the questions (their own and reference
        images; :class:`~radharmony.vqa.precache.QuestionImages` order)."""
        return precache.cache_keys(QuestionImages(self))

    def pre_cache(self, num_workers: int = 0, *, progress: bool = True, engine: str = "local",
                  address: str | None = None) -> list[str]:
        """Decode, cache and pack every image the questions read -- each question's images
        and its reference study's, each distinct file once (the base class would take the
        key image of each row only). Returns their cache keys."""
        return precache.pre_cache(QuestionImages(self), num_workers=num_workers,
                                  progress=progress, engine=engine, address=address).keys

    def validate(self, *, decode: bool = True, num_workers: int = 0, progress: bool = True):
        """Check every image the questions read up front (see
        :meth:`~radharmony.data.dataset.BaseRadiologicalDataset.validate`), each distinct
        file once; the report's rows are :class:`~radharmony.vqa.precache.QuestionImages`'s."""
        from ..data.checks import validate_dataset

        return validate_dataset(QuestionImages(self), decode=decode, num_workers=num_workers,
                                progress=progress)

    def answer_letters(self) -> pd.Series:
        """How often each correct letter occurs among the mcq questions (a biased letter
        distribution is worth seeing), A first."""
        df = self.harmonized_df
        letters = df.loc[df["answer_format"] == "mcq", "answer_letter"]
        return letters.value_counts().sort_index()

    def __repr__(self) -> str:
        df = self.harmonized_df
        n_img = len({p for ps in self._images for p in ps})
        return (f"{type(self).__name__}({len(df)} questions, {n_img} images, "
                f"{df['study_id'].nunique()} studies, {df['patient_id'].nunique()} patients)")


def collate_vqa(batch: list[dict]) -> dict:
    """Batch VQA samples: ``img`` / ``ref_img`` padded to the batch's largest image count,
    ``(B, K, 1, S, S)``, with ``img_mask`` / ``ref_img_mask`` ``(B, K)``; the rest as lists."""
    import torch

    out: dict = {}
    for key in batch[0]:
        values = [s.get(key) for s in batch]
        if key in ("img", "ref_img") and all(isinstance(v, torch.Tensor) for v in values):
            k = max(v.shape[0] for v in values)
            img = torch.zeros((len(values), k, *values[0].shape[1:]), dtype=values[0].dtype)
            mask = torch.zeros((len(values), k), dtype=torch.bool)
            for i, (v, m) in enumerate(zip(values, (s[f"{key}_mask"] for s in batch))):
                img[i, :len(v)] = v
                mask[i, :len(v)] = m
            out[key], out[f"{key}_mask"] = img, mask
        elif key not in out:
            out[key] = values
    return out


__all__ = ["VQADataset", "collate_vqa"]
