"""What a record gives a trainer's format beyond its columns: its ``fields`` (read once), the
report's sections, whether it is report generation, and the prior study's images and words."""

from __future__ import annotations

from ..records import fields_of


def fields(rec: dict) -> dict:
    """The record's ``fields`` as a dict (read once per record)."""
    got = rec.get("_fields")
    if got is None:
        got = rec["_fields"] = fields_of(rec.get("fields"))
    return got


def text_or_none(value) -> str | None:
    """A non-empty string, else None."""
    return value if isinstance(value, str) and value.strip() else None


#: the tasks outside the ``reports`` family whose records are report generation
REPORT_TASKS = ("report_findings_with_prior",)


def is_report(rec: dict) -> bool:
    """Whether the record is report generation (family ``reports``, or findings with the
    prior study)."""
    return rec["family"] == "reports" or rec.get("task") in REPORT_TASKS


def section(rec: dict, name: str) -> str | None:
    """The study's report section ``name`` (``fields``; the target when it is that section
    alone), or None."""
    f = fields(rec)
    got = text_or_none(f.get(name))
    if got is None and f.get("sections") == [name]:
        got = text_or_none(rec.get("target"))
    return got


#: why a one-image trainer leaves a record out
NEEDS_PRIOR = "needs the prior image (one-image trainer)"


def has_prior(rec: dict) -> bool:
    """Whether the record carries a prior study's images (``fields["prior_image_paths"]``;
    most records do not, and are told apart from their text without parsing it)."""
    if '"prior_image_paths"' not in (rec.get("fields") or ""):
        return False
    return bool(fields(rec).get("prior_image_paths"))


def prior_inputs(rec: dict, ex) -> tuple[list[str], str]:
    """``(references of the prior study's images, the words a multi-image prompt adds)``:
    the images come after the record's own, and the words say which they are, the days
    between and the prior's findings (``([], "")`` without a prior)."""
    if not has_prior(rec):
        return [], ""
    f = fields(rec)
    paths = f["prior_image_paths"]
    refs = [ex.ref(rec["source"], p) for p in paths]
    which = "The last image is" if len(paths) == 1 else f"The last {len(paths)} images are"
    days = f.get("days")
    when = "" if days is None else f", {days} day{'' if days == 1 else 's'} earlier"
    text = f"{which} the prior study's{when}."
    report = text_or_none(f.get("prior_report"))
    if report is not None:
        text += f"\nPrior findings: {report}"
    return refs, text + "\n"


#: why a format leaves out a record whose own text holds an image token
IMAGE_TOKEN_IN_TEXT = "<image> in the record's text"


def token_free(rec: dict, ex, token: str = "<image>") -> bool:
    """Whether the record's prompt and target hold no literal image ``token`` (a trainer that
    counts the tokens against the images would fail on it); skipped and counted if not."""
    if token in (rec["prompt"] or "") or token in (rec["target"] or ""):
        ex.skip(IMAGE_TOKEN_IN_TEXT)
        return False
    return True


def every_image(rec: dict, ex) -> tuple[list[str], str]:
    """``(references of the record's images then the prior study's, the words the prompt
    gets first)`` for a trainer that takes several images."""
    prior, words = prior_inputs(rec, ex)
    return [ex.ref(rec["source"], p) for p in rec["image_paths"] or []] + prior, words
