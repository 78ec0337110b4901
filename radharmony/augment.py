"""Random augmentations that move the image, its boxes and its mask together.

Each augmentation is a callable on a sample dict and returns a new dict (the input is never
modified):

* ``img``: ``(C, H, W)`` tensor, normally ``(1, 224, 224)`` in [-1, 1] from the built-in
  pipeline. Any dtype: floating images are computed in float32 and cast back (bfloat16 in,
  bfloat16 out); integer images are rounded back.
* ``bbox`` (optional): ``(N, 4)`` float tensor, x_min, y_min, x_max, y_max in output pixels
  (continuous coordinates: pixel ``i`` spans ``[i, i + 1)``), with the per-box lists
  ``bbox_labels`` and ``bbox_annotators`` (any other ``bbox_*`` list or tensor of length N is
  kept in step too).
* ``mask`` (optional): ``(H, W)`` or ``(C, H, W)`` label mask (uint8, bool or 0/1 float); it
  may have another resolution than ``img`` and is warped with the same geometry.

Geometry: boxes stay tight on the transformed content -- the four corners are mapped, their
envelope is taken and clipped to the image; a box with no area left inside the image is dropped
with its label and annotator. Masks use nearest-neighbour sampling, so they stay binary
(label values are preserved). The image is resampled bilinearly; pixels brought in from
outside the image get ``fill`` (-1, the padding value of the built-in pipeline).

Randomness comes from torch's RNG only (``torch.rand``/``torch.randn``, or the ``generator``
given to an augmentation); every call draws its parameters (a fixed count) whether or not it
applies, so ``torch.manual_seed`` -- and the DataLoader's per-worker seeding -- make runs
reproducible, and successive calls (epochs) differ.

Example:

    >>> import torch
    >>> from radharmony.augment import Compose, RandomAffine, RandomFlip, RandomIntensity
    >>> aug = Compose([RandomFlip(p=0.5), RandomAffine(degrees=10, scale=(0.9, 1.1)),
    ...                RandomIntensity(p=0.3)])
    >>> img = torch.full((1, 64, 64), -1.0)
    >>> img[:, 20:30, 10:40] = 1.0
    >>> sample = {"img": img, "bbox": torch.tensor([[10.0, 20.0, 40.0, 30.0]]),
    ...           "bbox_labels": ["Nodule"], "bbox_annotators": ["r1"]}
    >>> _ = torch.manual_seed(0)
    >>> out = aug(sample)
    >>> out["img"].shape, out["bbox"].shape, sample["img"] is img
    (torch.Size([1, 64, 64]), torch.Size([1, 4]), True)
"""

from __future__ import annotations

import math
from typing import Callable, Sequence

import cv2
import numpy as np
import torch
import torch.nn.functional as F

from .errors import RadHarmonyError

__all__ = ["Augmentation", "Compose", "RandomAffine", "RandomFlip", "RandomIntensity",
           "affine_matrix", "monai", "warp"]

#: keys that travel box by box with ``bbox`` (besides any other ``bbox_*`` of the same length)
BOX_LIST_KEYS = ("bbox_labels", "bbox_annotators")


# -- argument checks ---------------------------------------------------------------------------
def _check_p(owner: str, p) -> float:
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 <= p <= 1:
        raise RadHarmonyError(f"{owner}: p must be a probability",
                              expected="a number in [0, 1]", found=repr(p),
                              fix=f"pass e.g. {owner}(p=0.5)")
    return float(p)


def _range(owner: str, name: str, value, *, symmetric: bool, low: float | None = None
           ) -> tuple[float, float] | None:
    """``None`` (disabled), ``x`` (``(-x, x)`` when ``symmetric``) or ``(lo, hi)``."""
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool) and symmetric:
        lo, hi = -abs(float(value)), abs(float(value))
    elif isinstance(value, (tuple, list)) and len(value) == 2 and \
            all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
        lo, hi = float(value[0]), float(value[1])
    else:
        shape = "a number x (for (-x, x)) or a pair (lo, hi)" if symmetric else "a pair (lo, hi)"
        raise RadHarmonyError(f"{owner}: {name} has the wrong form", expected=shape,
                              found=repr(value), fix=f"pass e.g. {name}=None to disable it")
    if not lo <= hi or (low is not None and lo < low) or not (math.isfinite(lo) and
                                                              math.isfinite(hi)):
        bound = f", both >= {low}" if low is not None else ""
        raise RadHarmonyError(f"{owner}: {name} range is invalid",
                              expected=f"finite lo <= hi{bound}", found=repr(value),
                              fix=f"pass e.g. {name}=({max(low or 0, 0.9)}, 1.1)"
                              if low is not None else f"pass e.g. {name}=(-0.1, 0.1)")
    return lo, hi


def _uniform(u: torch.Tensor, rng: tuple[float, float] | None, default: float) -> float:
    if rng is None:
        return default
    return rng[0] + (rng[1] - rng[0]) * float(u)


def _image(owner: str, sample) -> torch.Tensor:
    if not isinstance(sample, dict):
        raise RadHarmonyError(f"{owner} needs a sample dict", expected="a dict with 'img'",
                              found=type(sample).__name__,
                              fix="call it on a dataset sample, e.g. aug(ds[0])")
    img = sample.get("img")
    if not isinstance(img, torch.Tensor) or img.dim() < 2:
        found = f"shape {tuple(img.shape)}" if isinstance(img, torch.Tensor) else \
            type(img).__name__
        raise RadHarmonyError(f"{owner}: the sample's 'img' is not an image tensor",
                              expected="a (C, H, W) tensor (the built-in pipeline's output)",
                              found=found, fix="apply augmentations after the built-in "
                              "pipeline (train_transform=), not as transform=")
    return img


def _restore(out: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    if like.is_floating_point():
        return out.to(like.dtype)
    info = torch.iinfo(like.dtype) if like.dtype != torch.bool else None
    if info is None:
        return out > 0.5
    return out.round_().clamp_(info.min, info.max).to(like.dtype)


def _keep_boxes(out: dict, sample: dict, boxes: torch.Tensor, keep: torch.Tensor) -> None:
    n = len(keep)
    out["bbox"] = boxes[keep].to(sample["bbox"].dtype)
    if bool(keep.all()):
        return
    idx = keep.nonzero().flatten().tolist()
    for key, value in sample.items():
        if key == "bbox" or not key.startswith("bbox_"):
            continue
        if isinstance(value, torch.Tensor) and value.dim() and len(value) == n:
            out[key] = value[keep]
        elif isinstance(value, (list, tuple)) and len(value) == n:
            out[key] = type(value)(value[i] for i in idx)
        elif key in BOX_LIST_KEYS:
            raise RadHarmonyError(f"the sample's {key!r} is out of step with its boxes",
                                  expected=f"one entry per box ({n})",
                                  found=f"{len(value) if hasattr(value, '__len__') else value!r}",
                                  fix="keep bbox and its per-box lists the same length")


def _boxes(sample: dict) -> torch.Tensor | None:
    boxes = sample.get("bbox")
    if boxes is None:
        return None
    if not isinstance(boxes, torch.Tensor) or boxes.dim() != 2 or boxes.shape[-1] != 4:
        raise RadHarmonyError("the sample's 'bbox' is not an (N, 4) tensor",
                              expected="x_min, y_min, x_max, y_max rows in output pixels",
                              found=f"{type(boxes).__name__} "
                              f"{tuple(boxes.shape) if hasattr(boxes, 'shape') else ''}",
                              fix="build samples with output_bbox=True and the built-in "
                              "pipeline")
    return boxes


def _clip_boxes(boxes: torch.Tensor, width: int, height: int) -> tuple[torch.Tensor,
                                                                       torch.Tensor]:
    """Boxes clipped to the image and the mask of those with area left inside it."""
    clipped = torch.stack([boxes[:, 0].clamp(0, width), boxes[:, 1].clamp(0, height),
                           boxes[:, 2].clamp(0, width), boxes[:, 3].clamp(0, height)], 1)
    keep = (clipped[:, 2] > clipped[:, 0]) & (clipped[:, 3] > clipped[:, 1])
    return clipped, keep


# -- the warp ----------------------------------------------------------------------------------
def _inv_affine(m):
    """Inverse of an affine 3 x 3 (last row 0, 0, 1) as nested lists."""
    (a, b, c), (d, e, f) = m[0], m[1]
    det = a * e - b * d
    if not abs(det) > 1e-12:
        raise RadHarmonyError("the affine map is singular", expected="a non-zero determinant",
                              found=f"{det}", fix="use a non-zero scale and shear below 90 degrees")
    ia, ib, id_, ie = e / det, -b / det, -d / det, a / det
    return [[ia, ib, -(ia * c + ib * f)], [id_, ie, -(id_ * c + ie * f)], [0.0, 0.0, 1.0]]


def _matrix(*, width, height, angle=0.0, scale=1.0, shear=(0.0, 0.0), translate=(0.0, 0.0)):
    """``T(c + translate) @ R(angle) @ Shear @ scale @ T(-c)`` as nested lists (closed form)."""
    cx, cy = width / 2.0, height / 2.0
    a = math.radians(angle)
    cos, sin = math.cos(a), math.sin(a)
    kx, ky = math.tan(math.radians(shear[0])), math.tan(math.radians(shear[1]))
    # R = [[cos, sin], [-sin, cos]] (y points down); Sh = [[1, kx], [ky, 1]]
    m00, m01 = scale * (cos + sin * ky), scale * (cos * kx + sin)
    m10, m11 = scale * (-sin + cos * ky), scale * (-sin * kx + cos)
    return [[m00, m01, cx + translate[0] - m00 * cx - m01 * cy],
            [m10, m11, cy + translate[1] - m10 * cx - m11 * cy], [0.0, 0.0, 1.0]]


def affine_matrix(*, width: int, height: int, angle: float = 0.0, scale: float = 1.0,
                  shear: tuple[float, float] = (0.0, 0.0),
                  translate: tuple[float, float] = (0.0, 0.0)) -> torch.Tensor:
    """The 3 x 3 forward map (input -> output, continuous pixel coordinates, float64) of an
    isotropic ``scale``, a ``shear`` (x, y) in degrees and a rotation by ``angle`` degrees
    (counter-clockwise on screen), about the image centre, then a ``translate`` (dx, dy) in
    pixels.

    >>> affine_matrix(width=10, height=10, angle=90)[:2].round(decimals=6).tolist()
    [[0.0, 1.0, 0.0], [-1.0, 0.0, 10.0]]
    """
    return torch.tensor(_matrix(width=width, height=height, angle=angle, scale=scale,
                                shear=shear, translate=translate), dtype=torch.float64)


def _as_lists(matrix) -> list:
    return matrix.tolist() if isinstance(matrix, torch.Tensor) else matrix


def _theta(matrix, width: int, height: int) -> list:
    """``affine_grid``'s ``theta`` (output -> input in normalized coordinates) for a forward
    pixel map. With ``align_corners=False`` the normalized range [-1, 1] spans pixel edges,
    which is the continuous convention, so the same theta serves a mask of any resolution."""
    inv = _inv_affine(_as_lists(matrix))
    sx, sy = 2.0 / width, 2.0 / height  # pixel -> normalized: n = s * p - 1
    (a, b, c), (d, e, f) = inv[0], inv[1]
    # theta = N @ inv @ N^-1, N = [[sx, 0, -1], [0, sy, -1]], N^-1 = [[1/sx, 0, 1/sx], ...]
    return [[a, b * sx / sy, sx * (a / sx + b / sy + c) - 1.0],
            [d * sy / sx, e, sy * (d / sx + e / sy + f) - 1.0]]


_BASE: dict = {}


def _base(n: int) -> torch.Tensor:
    """Normalized pixel-centre coordinates ``(2 i + 1) / n - 1`` (as ``affine_grid``)."""
    if n not in _BASE:
        _BASE[n] = (torch.arange(n, dtype=torch.float32) * 2 + 1) / n - 1
    return _BASE[n]


def _grid(theta: list, height: int, width: int) -> torch.Tensor:
    """``F.affine_grid(theta, (1, C, height, width), align_corners=False)``, built from two
    broadcast sums (separable in x and y; ~3x faster than ``affine_grid`` on CPU)."""
    xs, ys = _base(width).view(1, -1), _base(height).view(-1, 1)
    (a, b, c), (d, e, f) = theta
    grid = torch.empty(height, width, 2)
    torch.add(xs * a, ys * b + c, out=grid[..., 0])
    torch.add(xs * d, ys * e + f, out=grid[..., 1])
    return grid.unsqueeze(0)


def warp(img: torch.Tensor, matrix, *, mode: str = "bilinear", fill: float = 0.0
         ) -> torch.Tensor:
    """``img`` (``(H, W)``, ``(C, H, W)`` or a batch ``(B, C, H, W)``) under the forward pixel
    map ``matrix`` (3 x 3; for a batch also ``(B, 3, 3)`` or ``B`` maps) with one sampling grid +
    ``grid_sample``; outside pixels get ``fill``. Returns float32 of ``img``'s shape."""
    x = _planes(img, fill)
    height, width = x.shape[-2:]
    if isinstance(matrix, torch.Tensor) and matrix.dim() == 3:
        maps = list(matrix)
    elif isinstance(matrix, (list, tuple)) and matrix and isinstance(matrix[0], torch.Tensor):
        maps = list(matrix)
    else:
        maps = [matrix]
    grid = torch.cat([_grid(_theta(m, width, height), height, width) for m in maps])
    return _sample(img, x, grid, mode, fill)


def _planes(img: torch.Tensor, fill: float) -> torch.Tensor:
    """``img`` as float32 ``(B, C, H, W)`` less ``fill`` (grid_sample pads with zeros)."""
    x = img.to(torch.float32)
    x = x if x.dim() == 4 else x.reshape(1, -1, *img.shape[-2:])
    return x - fill if fill else x


def _sample(img: torch.Tensor, x: torch.Tensor, grid: torch.Tensor, mode: str,
            fill: float = 0.0) -> torch.Tensor:
    if grid.shape[0] != x.shape[0]:
        grid = grid.expand(x.shape[0], -1, -1, -1)
    out = F.grid_sample(x, grid, mode=mode, padding_mode="zeros", align_corners=False)
    if fill:
        out += fill
    return out.reshape(img.shape)


def _map_boxes(boxes: torch.Tensor, matrix) -> torch.Tensor:
    """The envelope of each box's four mapped corners (float64)."""
    m = torch.tensor(_as_lists(matrix), dtype=torch.float64)
    corners = boxes.to(torch.float64)[:, [0, 1, 2, 1, 0, 3, 2, 3]].view(-1, 4, 2)
    mapped = corners @ m[:2, :2].T + m[:2, 2]
    return torch.cat([mapped.amin(1), mapped.amax(1)], 1)


# -- the augmentations -------------------------------------------------------------------------
class Augmentation:
    """Base class: ``p`` is the probability of applying; ``generator`` an optional
    ``torch.Generator`` (default: torch's global RNG, seeded per DataLoader worker)."""

    #: how many uniform draws one call takes (the coin included); fixed per augmentation
    draws: int = 1

    def __init__(self, p: float, generator: torch.Generator | None = None):
        self.p = _check_p(type(self).__name__, p)
        if generator is not None and not isinstance(generator, torch.Generator):
            raise RadHarmonyError(f"{type(self).__name__}: generator must be a torch.Generator",
                                  expected="None or torch.Generator()",
                                  found=type(generator).__name__, fix="pass generator=None")
        self.generator = generator

    def _draw(self) -> torch.Tensor:
        return torch.rand(self.draws, generator=self.generator, dtype=torch.float64)

    def __call__(self, sample: dict) -> dict:
        img = _image(type(self).__name__, sample)
        u = self._draw()
        if not float(u[0]) < self.p:
            return dict(sample)
        return self.apply(sample, img, u[1:])

    def apply(self, sample: dict, img: torch.Tensor, u: torch.Tensor) -> dict:
        raise NotImplementedError

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in vars(self).items() if k != "generator")
        return f"{type(self).__name__}({args})"


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


class RandomIntensity(Augmentation):
    """Random gamma, contrast, brightness, blur and noise; boxes and masks are unchanged.

    The image is mapped from [``low``, ``high``] (the pipeline's [-1, 1]) to [0, 1], then each
    enabled operation is applied, independently, with probability ``p``, in this order:
    gamma ``u ** g``; contrast ``(u - mean) * c + mean`` (the image mean); brightness ``u + b``;
    Gaussian blur with a standard deviation drawn from ``blur`` (pixels; reflected edges);
    Gaussian noise of standard deviation drawn from ``noise``. The result is clamped to [0, 1]
    and mapped back, so the value range is kept. Pass None to disable an operation.
    """

    draws = 11  # coin per operation (5) + parameter per operation (5) + the unused first coin

    def __init__(self, p: float = 0.5, *, gamma=(0.7, 1.5), contrast=(0.75, 1.25),
                 brightness=(-0.1, 0.1), blur=(0.1, 1.0), noise=(0.0, 0.03),
                 low: float = -1.0, high: float = 1.0, generator: torch.Generator | None = None):
        super().__init__(p, generator)
        name = type(self).__name__
        self.gamma = _range(name, "gamma", gamma, symmetric=False, low=1e-3)
        self.contrast = _range(name, "contrast", contrast, symmetric=False, low=0.0)
        self.brightness = _range(name, "brightness", brightness, symmetric=True)
        self.blur = _range(name, "blur", blur, symmetric=False, low=0.0)
        self.noise = _range(name, "noise", noise, symmetric=False, low=0.0)
        if not float(high) > float(low):
            raise RadHarmonyError(f"{name}: the value range is empty", expected="low < high",
                                  found=f"low={low}, high={high}",
                                  fix="pass low=-1.0, high=1.0 for the built-in pipeline")
        self.low, self.high = float(low), float(high)

    def __call__(self, sample: dict) -> dict:
        img = _image(type(self).__name__, sample)
        u = self._draw()
        fire = u[1:6] < self.p
        ops = (self.gamma, self.contrast, self.brightness, self.blur, self.noise)
        if not any(bool(f) and op is not None for f, op in zip(fire, ops)):
            return dict(sample)
        return self.apply(sample, img, u[1:])

    def apply(self, sample, img, u):
        fire = [bool(f) for f in u[:5] < self.p]
        par = u[5:]
        x = img.to(torch.float32)
        span = self.high - self.low
        x = (x - self.low) / span
        if fire[0] and self.gamma is not None:
            x = x.clamp_(0, 1).pow_(_uniform(par[0], self.gamma, 1.0))
        if fire[1] and self.contrast is not None:
            mean = x.mean(dim=(-2, -1), keepdim=True)
            x = (x - mean).mul_(_uniform(par[1], self.contrast, 1.0)).add_(mean)
        if fire[2] and self.brightness is not None:
            x = x + _uniform(par[2], self.brightness, 0.0)
        if fire[3] and self.blur is not None:
            sigma = _uniform(par[3], self.blur, 0.0)
            if sigma > 0:
                x = _gaussian_blur(x, sigma)
        if fire[4] and self.noise is not None:
            std = _uniform(par[4], self.noise, 0.0)
            if std > 0:
                x = x + std * torch.randn(x.shape, generator=self.generator)
        x = x.clamp_(0, 1).mul_(span).add_(self.low)
        out = dict(sample)
        out["img"] = _restore(x, img)
        return out


def _gaussian_blur(x: torch.Tensor, sigma: float) -> torch.Tensor:
    """Separable Gaussian blur of float32 ``(..., H, W)`` (radius ``ceil(3 sigma)``, reflected
    edges without repeating the edge pixel). CPU tensors go through OpenCV (~10x faster than
    ``conv2d`` here); others through two 1-D convolutions with the same kernel."""
    radius = max(1, int(math.ceil(3 * sigma)))
    radius = min(radius, x.shape[-1] - 1, x.shape[-2] - 1)
    if radius < 1:
        return x
    shape = x.shape
    if x.device.type == "cpu":
        planes = x.reshape(-1, *shape[-2:]).contiguous().numpy()
        out = np.empty_like(planes)
        for i, plane in enumerate(planes):
            cv2.GaussianBlur(plane, (2 * radius + 1, 2 * radius + 1), sigma, dst=out[i],
                             sigmaY=sigma, borderType=cv2.BORDER_REFLECT_101)
        return torch.from_numpy(out).reshape(shape)
    t = torch.arange(-radius, radius + 1, dtype=torch.float32, device=x.device)
    k = torch.exp(-0.5 * (t / sigma) ** 2)
    k /= k.sum()
    y = x.reshape(-1, 1, *shape[-2:])
    y = F.conv2d(F.pad(y, (radius, radius, 0, 0), mode="reflect"), k.view(1, 1, 1, -1))
    y = F.conv2d(F.pad(y, (0, 0, radius, radius), mode="reflect"), k.view(1, 1, -1, 1))
    return y.reshape(shape)


class Compose:
    """Apply ``transforms`` in order (radharmony augmentations or any callable on the sample
    dict, e.g. MONAI dictionary transforms wrapped with :func:`monai`)."""

    def __init__(self, transforms: Sequence[Callable]):
        transforms = list(transforms)
        bad = [t for t in transforms if not callable(t)]
        if bad:
            raise RadHarmonyError("Compose needs callables",
                                  expected="augmentations or callables on a sample dict",
                                  found=repr(bad[0]), fix="pass e.g. [RandomFlip(), "
                                  "RandomAffine()]")
        self.transforms = transforms

    def __call__(self, sample: dict) -> dict:
        for t in self.transforms:
            sample = t(sample)
        return sample

    def __repr__(self) -> str:
        return f"Compose({self.transforms!r})"


class monai:  # noqa: N801 -- a function-like adapter, named for what it wraps
    """Adapt a MONAI dictionary transform (``RandFlipd``, ``RandAffined``, a MONAI
    ``Compose``...) to radharmony samples: the sample dict is copied before MONAI sees it,
    and MONAI ``MetaTensor`` outputs come back as plain tensors in their input dtype.

    MONAI moves only the keys it is given: list ``img`` and ``mask`` (with ``mode="nearest"``
    for the mask in spatial transforms); boxes are not moved -- use radharmony's
    augmentations for samples with ``bbox``. MONAI's random transforms draw from their own
    numpy generator (``set_random_state``), not torch's.
    """

    def __init__(self, transform: Callable):
        if not callable(transform):
            raise RadHarmonyError("monai() needs a MONAI transform",
                                  expected="a callable such as RandFlipd(keys=['img'])",
                                  found=repr(transform), fix="pass a MONAI dictionary transform")
        self.transform = transform

    def __call__(self, sample: dict) -> dict:
        dtypes = {k: v.dtype for k, v in sample.items() if isinstance(v, torch.Tensor)}
        out = dict(self.transform(dict(sample)))
        for key, value in out.items():
            if hasattr(value, "as_tensor"):  # MetaTensor -> torch.Tensor
                value = value.as_tensor()
            if isinstance(value, torch.Tensor) and key in dtypes and value.dtype != dtypes[key]:
                value = value.to(dtypes[key])
            out[key] = value
        return out

    def __repr__(self) -> str:
        return f"monai({self.transform!r})"
