"""What every augmentation shares: the :class:`Augmentation` base class, :class:`Compose`
and the :class:`monai` adapter for MONAI dictionary transforms."""

from __future__ import annotations

from typing import Callable, Sequence

import torch

from ..errors import RadHarmonyError
from .checks import _check_p, _image


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
