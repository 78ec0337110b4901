"""LLaVA-1.5 and LLaVA-OneVision conversation JSON (``docs/mixture_training.md``).

* ``llava`` (haotian-liu/LLaVA's ``LazySupervisedDataset``): a JSON list of ``{"id", "image",
  "conversations"}``. Its loader joins ``image`` to ``--image_folder`` with ``os.path.join``,
  so ``image`` is one string: the record's key frontal image
  (:func:`~radharmony.mixture.images.key_frontal`: PA, else AP, else the first other
  frontal view). The first human turn starts with ``"<image>\\n"``. A record with images but
  no frontal one is skipped (``"no frontal image"``); a text-only record has no ``image``
  key and no ``<image>`` token. A record with a prior study's images is skipped
  (``"needs the prior image (one-image trainer)"``): its prompt compares with a prior the
  trainer would not see.
* ``llava-onevision`` (LLaVA-VL/LLaVA-NeXT): ``image`` is the list of every image of the
  record, then the prior study's (:func:`~radharmony.mixture.formats.inputs.prior_inputs`:
  the prompt then says which are the prior's, the days between and the prior's findings),
  and the human turn holds one ``<image>`` line per image (the counts must agree).
"""

from __future__ import annotations

from ..images import key_frontal
from .common import Export
from .inputs import NEEDS_PRIOR, every_image, has_prior

COLUMNS = ["record_id", "source", "image_paths", "views", "prompt", "target"]
NO_FRONTAL = "no frontal image"
NO_TARGET = "no target"
TOKEN = "<image>\n"


def conversation(human: str, gpt: str) -> list[dict]:
    return [{"from": "human", "value": human}, {"from": "gpt", "value": gpt}]


def one_image(rec: dict, ex: Export) -> tuple[str | None, bool]:
    """``(reference of the key frontal image or None, usable)``: a text-only record is usable
    without one; a record whose images hold no frontal one is skipped."""
    paths = rec["image_paths"] or []
    if not paths:
        return None, True
    k = key_frontal(rec["views"])
    if k is None or k >= len(paths):
        ex.skip(NO_FRONTAL)
        return None, False
    return ex.ref(rec["source"], paths[k]), True


def has_target(rec: dict, ex: Export) -> bool:
    if isinstance(rec["target"], str) and rec["target"]:
        return True
    ex.skip(NO_TARGET)
    return False


def llava_entry(rec: dict, ex: Export) -> dict | None:
    """One LLaVA-1.5 entry (None: skipped, the reason counted)."""
    if not has_target(rec, ex):
        return None
    if has_prior(rec):
        ex.skip(NEEDS_PRIOR)
        return None
    image, ok = one_image(rec, ex)
    if not ok:
        return None
    if image is None:
        return {"id": rec["record_id"], "conversations": conversation(rec["prompt"],
                                                                      rec["target"])}
    return {"id": rec["record_id"], "image": image,
            "conversations": conversation(TOKEN + rec["prompt"], rec["target"])}


def onevision_entry(rec: dict, ex: Export) -> dict | None:
    """One LLaVA-OneVision entry: every image, one ``<image>`` token each."""
    if not has_target(rec, ex):
        return None
    entry = {"id": rec["record_id"]}
    refs, words = every_image(rec, ex)
    if refs:
        entry["image"] = refs
    entry["conversations"] = conversation(TOKEN * len(refs) + words + rec["prompt"],
                                          rec["target"])
    return entry
