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

from .base import Augmentation, Compose, monai
from .geometry import affine_matrix, warp
from .intensity import RandomIntensity
from .spatial import RandomAffine, RandomFlip

__all__ = ["Augmentation", "Compose", "RandomAffine", "RandomFlip", "RandomIntensity",
           "affine_matrix", "monai", "warp"]

# the classes keep their public path (pickles, reprs and cache fingerprints record it)
for _cls in (Augmentation, Compose, RandomAffine, RandomFlip, RandomIntensity, monai):
    _cls.__module__ = __name__
del _cls
