"""Identity families: which rows of several datasets are one patient.

Every dataset spec may declare an :class:`~radharmony.spec.Identity`: the release whose
patients it shares and how its rows name them. :func:`family_patients` reads a table's family
patient ids; :func:`join_patients` gives each table of a merge its patient ids, joined under the
family's name wherever two or more datasets of one family are present, and says which joins it
made (:data:`JOIN_COLUMNS`) and which family members could not be linked.

>>> import pandas as pd
>>> from radharmony.spec import Identity
>>> rsna = Identity("nih_cxr14", link="column", column="nih_image", pattern=r"^(\\d{8})_")
>>> t = pd.DataFrame({"patient_id": ["00000013", "x"], "nih_image": ["00000013_005", None]})
>>> family_patients(t, rsna).tolist()
['00000013', None]
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .errors import RadHarmonyError
from .spec import LINKS, DatasetSpec, Identity

#: one row per family joined in a merge (``MergedDataset.family_joins``)
JOIN_COLUMNS = ("family", "datasets", "rows_linked", "rows_unlinked", "patients",
                "shared_patients")


class IdentityError(RadHarmonyError, ValueError):
    """An identity declaration that cannot be read."""


def check_identity(identity: Identity, *, where: str) -> Identity:
    """``identity`` when its fields fit together, else :class:`IdentityError`."""
    if not isinstance(identity, Identity):
        raise IdentityError(f"{where}: identity is not an Identity", expected="radharmony.spec."
                            "Identity(family=..., link=...)", found=type(identity).__name__,
                            fix="declare identity=Identity('nih_cxr14') or leave it None")
    if not identity.family or not isinstance(identity.family, str):
        raise IdentityError(f"{where}: identity.family is empty", expected="the original "
                            "release's key, e.g. 'nih_cxr14'", found=repr(identity.family),
                            fix="name the family")
    if identity.link not in LINKS:
        raise IdentityError(f"{where}: unknown identity.link", expected=f"one of {LINKS}",
                            found=repr(identity.link), fix="use link='same' for shared ids")
    if identity.link == "column" and not identity.column:
        raise IdentityError(f"{where}: identity link 'column' names no column",
                            expected="column='<table column naming the family image>'",
                            found="column=None", fix="add column=")
    if identity.pattern is not None:
        try:
            if re.compile(identity.pattern).groups < 1:
                raise re.error("no group")
        except re.error as exc:
            raise IdentityError(f"{where}: identity.pattern is not a regex with a group",
                                expected="e.g. r'^(\\d{8})_' (group 1 = the patient)",
                                found=f"{identity.pattern!r} ({exc})",
                                fix="wrap the patient part in parentheses") from None
    return identity


def family_patients(df: pd.DataFrame, identity: Identity) -> pd.Series:
    """Each row's patient id in its family (object Series, None where the row names none)."""
    if identity.link == "none":
        return pd.Series([None] * len(df), index=df.index, dtype=object)
    if identity.link == "same":
        values = df["patient_id"].astype(str)
    elif identity.link == "path":
        values = df["image_path"].astype(str).str.replace(r"^.*/", "", regex=True) \
            .str.replace(r"\.[^.]*$", "", regex=True)
    else:
        if identity.column not in df.columns:
            raise IdentityError(f"the table has no column {identity.column!r} to link its "
                                f"patients to {identity.family}'s", expected=f"a column "
                                f"{identity.column!r}", found=f"columns {list(df.columns)[:12]}",
                                fix="rebuild the table with that column, or drop the identity")
        col = df[identity.column]
        values = col.astype(object).where(col.notna(), None)
        values = values.map(lambda v: None if v is None or str(v) == "" else str(v))
    if identity.pattern is not None:
        got = values.astype(object).where(values.notna(), "").astype(str) \
            .str.extract(identity.pattern, expand=False)
        got = got.iloc[:, 0] if isinstance(got, pd.DataFrame) else got
        values = got
    return values.astype(object).where(values.notna(), None)


@dataclass(frozen=True)
class Joined:
    """Patients of one table in a merge: ``patients`` (``"<namespace>:<id>"``), how many rows
    were put under their family's name (``joined``), and the family (None: its own)."""

    patients: np.ndarray
    joined: int
    family: str | None


def join_patients(tables: list[tuple[pd.DataFrame, DatasetSpec]]
                  ) -> tuple[list[Joined], pd.DataFrame, list[tuple[str, str, list[str], str]]]:
    """Patient ids for the tables of one merge, families joined.

    A family is joined when two or more dataset keys of it are present (two splits of one key
    share its namespace anyway): linked rows become ``"<family>:<patient>"``, the rest
    ``"<key>:<patient_id>"``. Returns the per-table :class:`Joined`, the joins made (one row
    per family, :data:`JOIN_COLUMNS`) and the members that could not be linked as
    ``(key, family, other keys present, note)``.
    """
    members: dict[str, list[str]] = {}
    for _, spec in tables:
        ident = spec.identity
        if ident is not None:
            check_identity(ident, where=spec.key)
            keys = members.setdefault(ident.family, [])
            if spec.key not in keys:
                keys.append(spec.key)
    joined_families = {f for f, keys in members.items() if len(keys) > 1}
    out, stats = [], {f: [0, 0, []] for f in joined_families}
    unlinked: dict[str, tuple[str, str, list[str], str]] = {}
    for df, spec in tables:
        own = (spec.key + ":" + df["patient_id"].astype(str)).to_numpy(dtype=object)
        ident = spec.identity
        if ident is None or ident.family not in joined_families:
            out.append(Joined(own, 0, None))
            continue
        fam = family_patients(df, ident)
        linked = fam.notna().to_numpy()
        own[linked] = (ident.family + ":" + fam[linked].astype(str)).to_numpy(dtype=object)
        stats[ident.family][0] += int(linked.sum())
        stats[ident.family][1] += int((~linked).sum())
        stats[ident.family][2].append((spec.key, own[linked]))
        if ident.link == "none":
            others = [k for k in members[ident.family] if k != spec.key]
            unlinked[spec.key] = (spec.key, ident.family, others, ident.note)
        out.append(Joined(own, int(linked.sum()), ident.family))
    rows = []
    for family in (f for f in members if f in joined_families):
        n_linked, n_unlinked, parts = stats[family]
        by_key: dict[str, set] = {}
        for key, ids in parts:
            by_key.setdefault(key, set()).update(ids.tolist())
        counts = pd.Series([p for ids in by_key.values() for p in ids],
                           dtype=object).value_counts()
        rows.append((family, ", ".join(members[family]), n_linked, n_unlinked,
                     int(len(counts)), int((counts > 1).sum())))
    return out, pd.DataFrame(rows, columns=list(JOIN_COLUMNS)), list(unlinked.values())


def unlinked_message(key: str, family: str, others: list[str], note: str) -> str:
    """The warning for a family member whose rows cannot be linked."""
    return (f"merge(): {key} images are {family} images, but its table names no {family} "
            f"patient, so its patients cannot be joined to those of {', '.join(others)}: a "
            f"patient may land in train and val through both. " + (f"{note} " if note else "")
            + f"Until then, leave {key} out of patient-grouped splits with "
            f"{', '.join(others)}, or split it separately")


__all__ = ["IdentityError", "JOIN_COLUMNS", "Joined", "check_identity", "family_patients",
           "join_patients", "unlinked_message"]
