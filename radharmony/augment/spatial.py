"""Geometric augmentations: :class:`RandomFlip` and :class:`RandomAffine` move the image,
its boxes and its mask together."""

from __future__ import annotations

import torch

from ..errors import RadHarmonyError
from .base import Augmentation
from .checks import _boxes, _clip_boxes, _keep_boxes, _range, _restore, _uniform
from .geometry import _grid, _map_boxes, _matrix, _planes, _sample, _theta


class RandomFlip(Augmentation):
    """Mirror the sample along ``axis`` (``"horizontal"``: left-right, ``"vertical"``:
    up-down) with probability ``p``. Exact (no resampling). Note a left-right flip puts the
    heart on the other side of a chest radiograph."""

    def __init__(self, p: float = 0.5, *, axis: str = "horizontal",
                 generator: torch.Generator | None = None):
        super().__init__(p, generator)
        if axis not in ("horizontal", "vertical"):
            raise RadHarmonyError("RandomFlip: unknown axis",
                                  expected="'horizontal' or 'vertical'", found=repr(axis),
                                  fix="pass axis='horizontal'")
        self.axis = axis

    def apply(self, sample, img, u):
        out = dict(sample)
        dim = -1 if self.axis == "horizontal" else -2
        out["img"] = img.flip(dim)
        mask = sample.get("mask")
        if isinstance(mask, torch.Tensor):
            out["mask"] = mask.flip(dim)
        boxes = _boxes(sample)
        if boxes is not None:
            size = img.shape[-1] if dim == -1 else img.shape[-2]
            b = boxes.clone()
            lo, hi = (0, 2) if dim == -1 else (1, 3)
            b[:, lo], b[:, hi] = size - boxes[:, hi], size - boxes[:, lo]
            out["bbox"] = b
        return out


class RandomAffine(Augmentation):
    """With probability ``p``, one random affine warp about the image centre.

    Args:
        degrees: rotation angle drawn from ``(-degrees, degrees)`` or a ``(lo, hi)`` pair.
        scale: zoom factor drawn from ``(lo, hi)`` (> 1 enlarges the content).
        translate: ``(fx, fy)`` maximum shifts as fractions of width and height (each drawn
            from ``(-f, f)``).
        shear: x-shear angle in degrees, ``x`` for ``(-x, x)`` or ``(lo, hi)``; y-shear with
            ``shear_y`` (default none).
        fill: value of pixels brought in from outside the image (-1: the pipeline's padding).
        Any of them None disables that part.
    """

    draws = 7  # the coin, angle, scale, shear x, shear y, shift x, shift y

    def __init__(self, p: float = 0.5, *, degrees=10.0, scale=(0.9, 1.1),
                 translate=(0.05, 0.05), shear=5.0, shear_y=None, fill: float = -1.0,
                 generator: torch.Generator | None = None):
        super().__init__(p, generator)
        name = type(self).__name__
        self.degrees = _range(name, "degrees", degrees, symmetric=True)
        self.scale = _range(name, "scale", scale, symmetric=False, low=1e-3)
        if translate is not None and not (isinstance(translate, (tuple, list)) and
                                          len(translate) == 2 and
                                          all(0 <= float(t) <= 1 for t in translate)):
            raise RadHarmonyError(f"{name}: translate has the wrong form",
                                  expected="a pair (fx, fy) of fractions in [0, 1]",
                                  found=repr(translate), fix="pass e.g. translate=(0.05, 0.05)")
        self.translate = None if translate is None else (float(translate[0]),
                                                         float(translate[1]))
        self.shear = _range(name, "shear", shear, symmetric=True)
        self.shear_y = _range(name, "shear_y", shear_y, symmetric=True)
        self.fill = float(fill)

    def matrix(self, u: torch.Tensor, width: int, height: int) -> list:
        """The forward pixel map (nested lists) for the uniform draws ``u`` (6 values in
        [0, 1))."""
        tx, ty = self.translate or (0.0, 0.0)
        return _matrix(
            width=width, height=height, angle=_uniform(u[0], self.degrees, 0.0),
            scale=_uniform(u[1], self.scale, 1.0),
            shear=(_uniform(u[2], self.shear, 0.0), _uniform(u[3], self.shear_y, 0.0)),
            translate=((2 * float(u[4]) - 1) * tx * width, (2 * float(u[5]) - 1) * ty * height))

    def apply(self, sample, img, u):
        height, width = img.shape[-2:]
        m = self.matrix(u, width, height)
        out = dict(sample)
        grid = _grid(_theta(m, width, height), height, width)
        out["img"] = _restore(_sample(img, _planes(img, self.fill), grid, "bilinear", self.fill),
                              img)
        mask = sample.get("mask")
        if isinstance(mask, torch.Tensor):
            if mask.shape[-2:] != (height, width):  # theta is resolution-free: same map
                grid = _grid(_theta(m, width, height), *mask.shape[-2:])
            out["mask"] = _restore(_sample(mask, _planes(mask, 0.0), grid, "nearest"), mask)
        boxes = _boxes(sample)
        if boxes is not None:
            clipped, keep = _clip_boxes(_map_boxes(boxes, m), width, height)
            _keep_boxes(out, sample, clipped, keep)
        return out
