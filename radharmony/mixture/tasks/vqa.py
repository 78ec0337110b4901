"""Every VQA dataset's questions, one task per answer format: multiple choice (the options in
the prompt, the target the correct option's line ``"B. No"``), closed (yes / no) and open.

The question is the prompt (a paraphrase only adds an instruction around it); the record's
images are the question's images, its key image first as the table gives them.
"""

from __future__ import annotations

import numpy as np

from ..records import OMIT, fields_json_rows
from .base import Draft, Rendered, Task, register_task

MCQ_PROMPTS = ("{question}\n{options}\nAnswer with the letter of the correct option.",
               "{question}\nOptions:\n{options}",
               "Choose the correct option.\n{question}\n{options}")
CLOSED_PROMPTS = ("{question}", "{question}\nAnswer yes or no.",
                  "Answer with yes or no: {question}")
OPEN_PROMPTS = ("{question}", "{question}\nAnswer briefly.", "Answer the question: {question}")
_EXTRA = ("explanation", "task", "category", "subcategory", "ref_study_id", "ref_image_paths")


def _vqa(fmt: str):
    def build(ctx) -> Draft:
        t = ctx.table
        formats = t["answer_format"].to_numpy(object)
        pos = np.flatnonzero(formats == fmt)
        q = t["question"].to_numpy(object)
        a = t["answer"].to_numpy(object)
        opts = t["options"].to_numpy(object)
        letters = t["answer_letter"].to_numpy(object)
        qid = t["question_id"].astype(str).to_numpy(object)
        extra = {c: t[c].to_numpy(object) for c in _EXTRA if c in t.columns}

        def render(j: np.ndarray) -> Rendered:
            p = pos[j]
            if fmt == "mcq":
                targets = [_option(op or (), lt, ans) if lt else ans
                           for op, lt, ans in zip(opts[p], letters[p], a[p])]
                slots = {"question": list(q[p]),
                         "options": ["\n".join(op or ()) for op in opts[p]]}
            else:
                targets, slots = list(a[p]), {"question": list(q[p])}
            cols = {"question_id": qid[p].tolist(), "answer": a[p].tolist(),
                    "answer_format": [fmt] * len(p)}
            if fmt == "mcq":
                cols["options"] = [list(op or ()) for op in opts[p]]
                cols["answer_letter"] = letters[p].tolist()
            cols.update({c: _given_or_omit(v[p].tolist()) for c, v in extra.items()})
            return Rendered(targets, slots, fields_json_rows(cols))

        return Draft("question", pos, render)

    return build


def _option(options, letter: str, answer):
    """The first option starting with ``letter`` (the correct one's line), else ``answer``."""
    for o in options:
        if o[:1] == letter:
            return o
    return answer


def _given(v) -> bool:
    return v is not None and not (isinstance(v, float) and v != v)


def _given_or_omit(values: list) -> list:
    """``values`` with each one not :func:`_given` (None, NaN) as :data:`OMIT`: its key is
    left out of the record's fields."""
    if not any(k is type(None) or issubclass(k, float) for k in set(map(type, values))):
        return values
    return [v if _given(v) else OMIT for v in values]


for _fmt, _prompts, _what in (("mcq", MCQ_PROMPTS, "multiple-choice questions, options given"),
                              ("closed", CLOSED_PROMPTS, "closed (yes / no) questions"),
                              ("open", OPEN_PROMPTS, "open questions")):
    register_task(Task(name=f"vqa_{_fmt}", family="vqa", needs=("questions",),
                       prompts=_prompts, build=_vqa(_fmt),
                       slots=("question", "options") if _fmt == "mcq" else ("question",),
                       description=f"a VQA dataset's {_what}"))
