"""``radharmony info`` on a VQA dataset: questions per task / category, answer formats and
how often each correct letter occurs (a biased letter distribution is worth seeing)."""

from __future__ import annotations


def question_info(df) -> dict:
    """The question counts of a question-level table (:mod:`radharmony.vqa`)."""
    def counts(col: str) -> dict:
        if col not in df.columns:
            return {}
        return {str(k): int(v) for k, v in df[col].fillna("(missing)").value_counts()
                .items()}

    mcq = df[df["answer_format"] == "mcq"]
    letters = mcq["answer_letter"].fillna("(missing)").value_counts().sort_index()
    return {"questions": len(df),
            "images": len({p for ps in df["image_paths"] for p in ps}),
            "answer_formats": counts("answer_format"), "tasks": counts("task"),
            "categories": counts("category"),
            "answer_letters": {str(k): int(v) for k, v in letters.items()},
            "options": {str(k): int(v) for k, v in mcq["options"].map(len).value_counts()
                        .sort_index().items()}}


def question_lines(q: dict) -> list[str]:
    """The text lines of :func:`question_info`."""
    lines = [f"  questions{q['questions']:>10,} over {q['images']:,} images",
             "  answer formats: " + ", ".join(f"{k} {v:,}" for k, v in
                                              q["answer_formats"].items())]
    for name, key in (("tasks", "tasks"), ("categories", "categories")):
        if q[key]:
            lines.append(f"  {name}:")
            lines += [f"    {k:<44}{v:>10,}" for k, v in q[key].items()]
    if q["answer_letters"]:
        total = sum(q["answer_letters"].values())
        lines.append("  correct letter (mcq): " + ", ".join(
            f"{k} {v:,} ({100 * v / total:.1f}%)" for k, v in q["answer_letters"].items()))
        lines.append("  options per question: " + ", ".join(f"{k}: {v:,}" for k, v in
                                                           q["options"].items()))
    return lines
