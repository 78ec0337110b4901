"""The Hugging Face chat format (TRL ``SFTTrainer``, Qwen2-VL / 2.5-VL, MedGemma, SmolVLM):
JSON lines, one object per record: ``id``, ``messages`` (a user turn whose ``content`` is one
``{"type": "image"}`` item per image followed by ``{"type": "text", "text": prompt}``, then an
assistant turn ``[{"type": "text", "text": target}]``) and ``images``, the image references
in the order of the image items (empty for a text-only record): the record's, then the prior
study's, which the text then names (:func:`~radharmony.mixture.formats.inputs.prior_inputs`)."""

from __future__ import annotations

from .common import Export
from .inputs import every_image
from .llava import COLUMNS, has_target

__all__ = ["COLUMNS", "entry"]


def entry(rec: dict, ex: Export) -> dict | None:
    if not has_target(rec, ex):
        return None
    refs, words = every_image(rec, ex)
    user = [{"type": "image"} for _ in refs] + [{"type": "text", "text": words + rec["prompt"]}]
    return {"id": rec["record_id"],
            "messages": [{"role": "user", "content": user},
                         {"role": "assistant",
                          "content": [{"type": "text", "text": rec["target"]}]}],
            "images": refs}
