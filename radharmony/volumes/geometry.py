"""Voxel order: bringing any array + affine to the canonical order without resampling."""

from __future__ import annotations

import numpy as np

from .. import threads
from .checks import SPLIT_BYTES
from .volume import CANONICAL_AXES, VolumeGeometryError

#: world axis index and sign of each direction letter, in LPS (L = +x, P = +y, S = +z)
_LETTERS = {"L": (0, 1.0), "R": (0, -1.0), "P": (1, 1.0), "A": (1, -1.0), "S": (2, 1.0),
            "I": (2, -1.0)}


def axis_codes(affine: np.ndarray, space: str = "LPS") -> tuple[str, str, str]:
    """The world direction each array axis runs toward (closest of the six), e.g.
    ``("S", "P", "L")``, for an affine in ``space``."""
    letters = {"LPS": (("R", "L"), ("A", "P"), ("I", "S")),
               "RAS": (("L", "R"), ("P", "A"), ("I", "S"))}[space]
    out = []
    for column in _dominant(affine):
        axis, sign = column
        out.append(letters[axis][1 if sign > 0 else 0])
    return tuple(out)


def _dominant(affine: np.ndarray) -> list[tuple[int, float]]:
    """(world axis, sign) of each array axis: a one-to-one assignment by largest cosines
    (greedy over |cos| descending, so oblique volumes get a permutation, never a repeat)."""
    m = np.asarray(affine, dtype=np.float64)[:3, :3]
    m = m / np.linalg.norm(m, axis=0)
    order = np.dstack(np.unravel_index(np.argsort(-np.abs(m), axis=None), m.shape))[0]
    taken_world, taken_axis, out = set(), set(), {}
    for world, axis in order:
        if world in taken_world or axis in taken_axis:
            continue
        taken_world.add(world)
        taken_axis.add(axis)
        out[axis] = (int(world), float(np.sign(m[world, axis]) or 1.0))
    return [out[a] for a in range(3)]


def to_canonical(array: np.ndarray, affine: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``array`` (3-D) and its LPS ``affine`` (array index -> world) reordered so that the axes
    run toward :data:`CANONICAL_AXES` (flips and transposes only: every voxel keeps its exact
    world position). Returns views where no copy is needed."""
    return orient(array, affine, CANONICAL_AXES)


def orient(array: np.ndarray, affine: np.ndarray, codes) -> tuple[np.ndarray, np.ndarray]:
    """``array`` (3-D) and its LPS ``affine`` reordered so that its axes run toward ``codes``
    (three letters, one of L/R, P/A and S/I each, e.g. "RAS": axis 0 toward the patient's
    right), by flips and transposes only. Returns views where no copy is needed."""
    codes = tuple(codes)
    if len(codes) != 3 or any(c not in _LETTERS for c in codes) or \
            len({_LETTERS[c][0] for c in codes}) != 3:
        raise VolumeGeometryError(f"unknown orientation {''.join(map(str, codes))!r}",
                                  expected="three letters, one of L/R, P/A and S/I each",
                                  found=repr(codes), fix="pass e.g. 'RAS' or 'SPL'")
    perm, flips, new = _plan(array.shape, affine, codes)
    out = np.transpose(array, perm)
    if any(flips):
        out = out[tuple(slice(None, None, -1) if f else slice(None) for f in flips)]
    return out, new


def _plan(shape, affine, codes) -> tuple[list[int], list[bool], np.ndarray]:
    """(axis permutation, flip of each output axis, the new affine) that reorder an array of
    ``shape`` with ``affine`` toward ``codes``."""
    affine = np.asarray(affine, dtype=np.float64)
    dom = _dominant(affine)
    perm, flips = [], []
    for letter in codes:
        world, sign = _LETTERS[letter]
        axis = next(a for a, (w, _) in enumerate(dom) if w == world)
        perm.append(axis)
        flips.append(dom[axis][1] * sign < 0)
    new = np.eye(4)
    new[:3, 3] = affine[:3, 3]
    for k, (axis, flip) in enumerate(zip(perm, flips)):
        column = affine[:3, axis]
        if flip:
            new[:3, 3] = new[:3, 3] + column * (shape[axis] - 1)
            column = -column
        new[:3, k] = column
    return perm, flips, new


def flips_only(shape, affine) -> bool:
    """Whether the canonical order of an array of ``shape`` with its LPS ``affine`` is its
    own up to flips (no axis moves: :func:`to_canonical_in_place` reorders it in place).

    >>> flips_only((2, 3, 4), np.diag([1.0, 1.0, -1.0, 1.0])[[2, 1, 0, 3]])
    True
    """
    return _plan(shape, affine, CANONICAL_AXES)[0] == [0, 1, 2]


def canonical_target(shape, affine, allocate) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Where an array of ``shape`` with its LPS ``affine`` goes in the canonical order,
    before any of it is read: (the canonical array, from ``allocate(canonical shape)``; the
    same memory seen in the source's index order; the canonical affine). Writing the
    source's values into the second fills the first exactly as :func:`to_canonical` would
    order them, with no second copy of the volume; a reader that decodes a slab at a time
    writes each slab there while it is in cache.

    >>> out, target, aff = canonical_target((2, 3, 4), np.eye(4), np.empty)
    >>> out.shape, target.shape, np.shares_memory(out, target)
    ((4, 3, 2), (2, 3, 4), True)
    """
    perm, flips, new = _plan(shape, affine, CANONICAL_AXES)
    out = allocate(tuple(shape[a] for a in perm))
    view = out[tuple(slice(None, None, -1) if f else slice(None) for f in flips)]
    return out, np.transpose(view, np.argsort(perm)), new


def reassign_geometry(array: np.ndarray, affine: np.ndarray, assumed: np.ndarray,
                      declared: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A canonical ``array`` with its LPS ``affine``, read from a file whose header geometry
    was ``assumed`` (the LPS affine of the file's own index order), given the geometry that
    side metadata ``declares`` for that index order instead (CT-RATE's v1 files carry the
    NIfTI defaults; the metadata has the real spacing, position and orientation). Returns the
    array and affine in the canonical order of the declared geometry (flips and transposes
    only: no voxel is resampled), C-contiguous: ``array`` (C-contiguous, writable) is reused
    and overwritten when flips suffice (:func:`to_canonical_in_place`).

    >>> a = np.arange(8).reshape(2, 2, 2)
    >>> out, aff = reassign_geometry(a, np.eye(4), np.eye(4), np.diag([2.0, 2.0, 2.0, 1.0]))
    >>> np.linalg.norm(aff[:3, :3], axis=0).tolist(), axis_codes(aff)
    ([2.0, 2.0, 2.0], ('S', 'P', 'L'))
    """
    to_file = np.linalg.inv(np.asarray(assumed, dtype=np.float64)) @ \
        np.asarray(affine, dtype=np.float64)  # canonical index -> file index
    return to_canonical_in_place(array, np.asarray(declared, dtype=np.float64) @ to_file)


def to_canonical_in_place(array: np.ndarray, affine: np.ndarray
                          ) -> tuple[np.ndarray, np.ndarray]:
    """:func:`to_canonical` as a C-contiguous array, reusing ``array``'s memory when the
    canonical order needs flips only (``array`` C-contiguous and writable; it is
    overwritten): each flip is done in place a slice at a time (a pair of slices at once for
    a flip of the slice order), with no second volume in memory. An order that needs a
    transpose gets a contiguous copy."""
    view, canonical = to_canonical(array, affine)
    if view.flags.c_contiguous:
        return view, canonical
    strides = tuple(abs(s) for s in view.strides)
    if not (array.flags.c_contiguous and array.flags.writeable and strides == array.strides):
        return np.ascontiguousarray(view), canonical
    flips = [s < 0 for s in view.strides]
    depth = array.shape[0]
    plane = (slice(None, None, -1 if flips[1] else 1), slice(None, None, -1 if flips[2] else 1))

    def reorder(first: int, stop: int) -> None:   # slices, or pairs of slices swapped
        for d in range(first, stop):
            e = depth - 1 - d if flips[0] else d
            if e != d:
                top = array[d][plane].copy()      # one slice's temporary, in cache
                array[d] = array[e][plane]
                array[e] = top
            elif flips[1] or flips[2]:
                array[d] = array[d][plane]

    threads.split(reorder, (depth + 1) // 2 if flips[0] else depth,
                  2 if array.nbytes >= SPLIT_BYTES else 1)
    return array, canonical
