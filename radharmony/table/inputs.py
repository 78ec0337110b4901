"""What one harmonize reads, declared once: :class:`Inputs`.

A harmonizer's ``inputs(path)`` returns every file and folder its ``read`` may open or list;
``read`` consumes exactly that, and the table cache keys on :meth:`Inputs.identity`, so what is
read and what invalidates a cached table cannot disagree.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path

from ..files import file_identity


@dataclass
class Inputs:
    """Everything one harmonize reads: the only paths ``read`` may open or list.

    Attributes:
        metadata: the metadata file.
        files: side files by role; ``None`` where one was looked for and not found (so that
            adding it later changes :meth:`identity`).
        folders: folders read or listed recursively, by role, as ``(path, suffixes)``: only
            regular files whose names end with one of ``suffixes`` (any file when empty) count;
            ``path`` None where the folder is absent.
        looked: where a side file was looked for, by role (the paths tried): what an error
            names when the file is needed and absent (:meth:`missing`); no part of
            :meth:`identity`.
    """

    metadata: Path
    files: dict[str, Path | None] = field(default_factory=dict)
    folders: dict[str, tuple[Path | None, tuple[str, ...]]] = field(default_factory=dict)
    looked: dict[str, list[Path]] = field(default_factory=dict, compare=False)
    _walks: dict = field(default_factory=dict, repr=False, compare=False)

    def file(self, role: str) -> Path | None:
        """The side file declared for ``role`` (None when absent)."""
        return self.files[role]

    def missing(self) -> dict[str, list[Path]]:
        """Each side file looked for and absent: role -> the paths it was looked for at
        (empty where the harmonizer did not say)."""
        return {role: list(self.looked.get(role, [])) for role, path in self.files.items()
                if path is None}

    def listing(self, role: str) -> list[str]:
        """Sorted relative POSIX paths of the files in folder ``role`` (walked once)."""
        return [rel for rel, _ in self._walk(role)]

    def by_name(self, role: str, *, suffix: str | None = None) -> dict[str, str] | None:
        """File name -> relative path of each file listed in folder ``role`` (None when the
        folder is absent). With ``suffix`` only those files count, keyed by the name without
        it (``1.2.3.dcm`` -> ``1.2.3``). A name found twice keeps its last path in sorted
        order."""
        if self.folders[role][0] is None:
            return None
        out = {}
        for rel in self.listing(role):
            name = rel.rsplit("/", 1)[-1]
            if suffix is None:
                out[name] = rel
            elif name.endswith(suffix):
                out[name[:-len(suffix)]] = rel
        return out

    def _walk(self, role: str) -> list[tuple[str, list]]:
        if role not in self._walks:
            root, suffixes = self.folders[role]
            self._walks[role] = walk_files(root, suffixes) if root is not None else []
        return self._walks[role]

    def identity(self) -> list:
        """What keys a table built from these inputs: each file's identity
        (:func:`~radharmony.files.file_identity`) and a digest of each folder's listing with
        every listed file's identity. Adding, removing or changing any input changes it."""
        out: list = [["metadata", file_identity(self.metadata)]]
        for role, path in sorted(self.files.items()):
            out.append([role, None if path is None else file_identity(path)])
        for role, (root, suffixes) in sorted(self.folders.items()):
            digest = hashlib.sha256("".join(  # one update: the same bytes as one per file
                [repr((rel, ident[1:])) for rel, ident in self._walk(role)]).encode())
            out.append([role, None if root is None else os.path.realpath(root),
                        list(suffixes), digest.hexdigest()])
        return out

    def paths(self) -> list[Path]:
        """Every declared file and folder that exists (for messages and audits)."""
        return [self.metadata, *(p for p in self.files.values() if p is not None),
                *(p for p, _ in self.folders.values() if p is not None)]


def walk_files(root: Path, suffixes: tuple[str, ...] = ()) -> list[tuple[str, list]]:
    """``[(relative posix path, identity), ...]`` of the regular files under ``root`` whose
    names end with one of ``suffixes`` (case-insensitive; any when empty), sorted; symbolic
    links to folders are not followed."""
    ends = tuple(s.lower() for s in suffixes)
    out: list[tuple[str, list]] = []
    add, scandir = out.append, os.scandir
    stack = [(str(Path(root)), "")]  # plain strings: a Path per folder costs a third
    while stack:
        folder, prefix = stack.pop()
        try:
            with scandir(folder) as it:
                entries = list(it)
        except (FileNotFoundError, NotADirectoryError, PermissionError):
            continue
        for e in entries:
            name = e.name
            if e.is_dir(follow_symlinks=False):
                stack.append((e.path, prefix + name + "/"))
            elif (not ends or name.lower().endswith(ends)) and e.is_file():
                st = e.stat()
                add((prefix + name, [e.path, st.st_size, st.st_mtime_ns, st.st_ctime_ns,
                                     st.st_ino]))
    out.sort()
    return out
