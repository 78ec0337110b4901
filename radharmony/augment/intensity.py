"""Intensity augmentation: :class:`RandomIntensity` (gamma, contrast, brightness, blur and
noise); boxes and masks are unchanged."""

from __future__ import annotations

import math

import cv2
import numpy as np
import torch
import torch.nn.functional as F

from ..errors import RadHarmonyError
from .base import Augmentation
from .checks import _image, _range, _restore, _uniform


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
