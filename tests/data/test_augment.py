"""Augmentations: a bright rectangle and its box move together under every augmentation."""

import doctest

import pytest
import torch
import torch.nn.functional as F

import radharmony.augment as augment
import radharmony.augment.geometry as geometry
import radharmony.data.samplers as samplers
from radharmony.augment import (Compose, RandomAffine, RandomFlip, RandomIntensity, affine_matrix,
                                warp)
from radharmony.errors import RadHarmonyError

H, W = 64, 80
RECT = (14.0, 20.0, 46.0, 34.0)  # x_min, y_min, x_max, y_max (pixel edges)


def rect_sample(rect=RECT, *, dtype=torch.bfloat16, mask_shape="chw"):
    """-1 everywhere, 1 inside ``rect``; its box, label, annotator and mask."""
    img = torch.full((1, H, W), -1.0)
    x0, y0, x1, y1 = (int(v) for v in rect)
    img[:, y0:y1, x0:x1] = 1.0
    mask = (img > 0).to(torch.uint8)
    return {"sample_id": "fake:1", "img": img.to(dtype),
            "bbox": torch.tensor([rect], dtype=torch.float32), "bbox_labels": ["Nodule"],
            "bbox_annotators": ["R1"], "mask": mask if mask_shape == "chw" else mask[0],
            "cls": torch.tensor([1.0, 0.0])}


def bright_box(x: torch.Tensor) -> list[float]:
    """Pixel-edge bounding box of the pixels above the midpoint of the value range."""
    x = x.float().reshape(-1, *x.shape[-2:]).amax(0)
    ys, xs = torch.nonzero(x > (x.max() + x.min()) / 2, as_tuple=True)
    return [xs.min().item(), ys.min().item(), xs.max().item() + 1.0, ys.max().item() + 1.0]


AUGMENTATIONS = {
    "flip-horizontal": lambda: RandomFlip(p=1),
    "flip-vertical": lambda: RandomFlip(p=1, axis="vertical"),
    "rotation": lambda: RandomAffine(p=1, degrees=35, scale=None, translate=None, shear=None),
    "scale": lambda: RandomAffine(p=1, degrees=None, scale=(0.6, 1.4), translate=None,
                                  shear=None),
    "translation": lambda: RandomAffine(p=1, degrees=None, scale=None, translate=(0.2, 0.2),
                                        shear=None),
    "shear": lambda: RandomAffine(p=1, degrees=None, scale=None, translate=None, shear=20,
                                  shear_y=10),
    "affine": lambda: RandomAffine(p=1, degrees=20, scale=(0.8, 1.2), translate=(0.1, 0.1),
                                   shear=10),
    "gamma": lambda: RandomIntensity(p=1, contrast=None, brightness=None, blur=None,
                                     noise=None),
    "contrast": lambda: RandomIntensity(p=1, gamma=None, brightness=None, blur=None,
                                        noise=None),
    "brightness": lambda: RandomIntensity(p=1, gamma=None, contrast=None, blur=None,
                                          noise=None),
    "blur": lambda: RandomIntensity(p=1, gamma=None, contrast=None, brightness=None,
                                    noise=None, blur=(0.5, 2.0)),
    "noise": lambda: RandomIntensity(p=1, gamma=None, contrast=None, brightness=None,
                                     blur=None, noise=(0.01, 0.05)),
    "intensity": lambda: RandomIntensity(p=1),
    "compose": lambda: Compose([RandomFlip(p=1), RandomAffine(p=1), RandomIntensity(p=1)]),
}


@pytest.mark.parametrize("name", AUGMENTATIONS)
def test_box_and_mask_follow_the_bright_rectangle(name):
    aug = AUGMENTATIONS[name]()
    for seed in range(6):
        torch.manual_seed(seed)
        out = aug(rect_sample())
        assert out["img"].dtype == torch.bfloat16 and out["img"].shape == (1, H, W)
        assert len(out["bbox"]) == len(out["bbox_labels"]) == len(out["bbox_annotators"]) == 1
        box = out["bbox"][0].tolist()
        assert box == pytest.approx(bright_box(out["img"]), abs=1.5), (name, seed)
        assert box == pytest.approx(bright_box(out["mask"]), abs=1.5), (name, seed)
        assert set(out["mask"].unique().tolist()) <= {0, 1} and out["mask"].dtype == torch.uint8
        assert float(out["img"].float().min()) >= -1 and float(out["img"].float().max()) <= 1


def test_flip_is_exact():
    out = RandomFlip(p=1)(rect_sample())
    assert out["bbox"].tolist() == [[W - 46.0, 20.0, W - 14.0, 34.0]]
    assert bright_box(out["img"]) == out["bbox"][0].tolist()
    assert torch.equal(out["img"], rect_sample()["img"].flip(-1))
    out = RandomFlip(p=1, axis="vertical")(rect_sample(mask_shape="hw"))
    assert out["bbox"].tolist() == [[14.0, H - 34.0, 46.0, H - 20.0]]
    assert out["mask"].shape == (H, W) and bright_box(out["mask"]) == out["bbox"][0].tolist()


def test_rotation_by_90_degrees_maps_the_box_exactly():
    m = affine_matrix(width=W, height=H, angle=90)
    x0, y0, x1, y1 = RECT  # counter-clockwise on screen: (x, y) -> (y - cy + cx, cx - x + cy)
    cx, cy = W / 2, H / 2
    expected = [y0 - cy + cx, cx - x1 + cy, y1 - cy + cx, cx - x0 + cy]
    boxes = geometry._map_boxes(torch.tensor([RECT]), m)
    assert boxes[0].tolist() == pytest.approx(expected, abs=1e-9)
    img = warp(rect_sample(dtype=torch.float32)["img"], m, fill=-1.0)
    assert bright_box(img) == pytest.approx(expected, abs=0.5)


def test_boxes_pushed_out_are_dropped_with_their_labels():
    sample = rect_sample((30.0, 24.0, 50.0, 40.0))
    corner = torch.zeros(1, H, W, dtype=torch.uint8)
    corner[:, 2:10, 2:10] = 1
    sample["img"][:, 2:10, 2:10] = 1.0
    sample["mask"] = torch.cat([corner, sample["mask"]])  # one channel per box
    sample["bbox"] = torch.tensor([[2.0, 2.0, 10.0, 10.0], [30.0, 24.0, 50.0, 40.0]])
    sample["bbox_labels"], sample["bbox_annotators"] = ["Mass", "Nodule"], ["R2", "R1"]
    sample["bbox_scores"] = torch.tensor([0.3, 0.9])
    zoom = RandomAffine(p=1, degrees=None, scale=(3.0, 3.0), translate=None, shear=None)
    out = zoom(sample)  # x -> 3 (x - 40) + 40: the corner box leaves the image
    assert out["bbox_labels"] == ["Nodule"] and out["bbox_annotators"] == ["R1"]
    assert out["bbox_scores"].tolist() == pytest.approx([0.9])
    assert out["bbox"].tolist() == [[10.0, 8.0, 70.0, 56.0]]
    assert bright_box(out["mask"][1]) == out["bbox"][0].tolist() == bright_box(out["img"])
    assert int(out["mask"][0].sum()) == 0
    assert sample["bbox_labels"] == ["Mass", "Nodule"] and len(sample["bbox"]) == 2  # untouched
    # partly outside: clipped to the image (y -> 1.8 (y - 32) + 32)
    out = RandomAffine(p=1, degrees=None, scale=(1.8, 1.8), translate=None,
                       shear=None)(rect_sample((2.0, 20.0, 40.0, 34.0)))
    assert out["bbox"][0].tolist() == pytest.approx([0.0, 10.4, 40.0, 35.6], abs=1e-4)
    assert out["bbox"][0].tolist() == pytest.approx(bright_box(out["img"]), abs=1)


def test_mask_at_another_resolution_follows():
    sample = rect_sample()
    sample["mask"] = F.interpolate(sample["mask"][None].float(), scale_factor=2,
                                   mode="nearest")[0].to(torch.uint8)
    torch.manual_seed(1)
    out = RandomAffine(p=1, degrees=25)(sample)
    assert out["mask"].shape == (1, 2 * H, 2 * W)
    assert [v / 2 for v in bright_box(out["mask"])] == pytest.approx(bright_box(out["img"]),
                                                                     abs=1.0)


@pytest.mark.parametrize("name", ["flip-horizontal", "affine", "intensity", "compose"])
def test_seeded_reproducible_epochs_differ_and_p0_is_identity(name):
    aug = AUGMENTATIONS[name]()
    sample = rect_sample()
    before = {k: v.clone() if isinstance(v, torch.Tensor) else list(v) if isinstance(v, list)
              else v for k, v in sample.items()}
    torch.manual_seed(7)
    a = aug(sample)
    torch.manual_seed(7)
    b = aug(sample)
    assert all(torch.equal(a[k], b[k]) for k in ("img", "bbox", "mask"))
    c = aug(sample)  # the next epoch: fresh randomness
    d = aug(sample)
    if name != "flip-horizontal":  # p=1 flips are always the same
        assert not torch.equal(c["img"], d["img"]) and not torch.equal(b["img"], c["img"])
    for k, v in before.items():  # the input is never modified
        assert torch.equal(sample[k], v) if isinstance(v, torch.Tensor) else sample[k] == v
    assert a is not sample and a["img"] is not sample["img"]


@pytest.mark.parametrize("make", [lambda: RandomFlip(p=0), lambda: RandomAffine(p=0),
                                  lambda: RandomIntensity(p=0)])
def test_p0_is_identity(make):
    sample = rect_sample()
    out = make()(sample)
    assert out is not sample and out.keys() == sample.keys()
    assert all(out[k] is sample[k] for k in sample)


def test_generator_draws_only_from_itself():
    g1, g2 = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    a = RandomAffine(p=1, generator=g1)(rect_sample())
    torch.manual_seed(123)
    state = torch.get_rng_state()
    b = RandomAffine(p=1, generator=g2)(rect_sample())
    assert torch.equal(a["img"], b["img"]) and torch.equal(torch.get_rng_state(), state)


def test_probability_is_honoured():
    torch.manual_seed(0)
    flips = sum(not torch.equal(RandomFlip(p=0.3)(rect_sample())["img"], rect_sample()["img"])
                for _ in range(400))
    assert 90 < flips < 150


def test_dtypes_and_integer_images():
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        torch.manual_seed(0)
        assert RandomAffine(p=1)(rect_sample(dtype=dtype))["img"].dtype == dtype
    sample = {"img": ((rect_sample(dtype=torch.float32)["img"] + 1) * 127.5).to(torch.uint8)}
    out = RandomAffine(p=1, fill=0.0)(sample)
    assert out["img"].dtype == torch.uint8 and set(out["img"].unique().tolist()) >= {0, 255}


def test_intensity_keeps_the_range_and_fill():
    torch.manual_seed(0)
    out = RandomIntensity(p=1, brightness=(0.5, 0.5), gamma=None, contrast=None, blur=None,
                          noise=None)(rect_sample(dtype=torch.float32))
    assert out["img"].max() == 1 and out["img"].min() == 0  # -1 -> 0 (u 0 -> 0.5), 1 stays 1
    assert torch.equal(out["bbox"], rect_sample()["bbox"])


def test_batched_warp_equals_per_sample():
    imgs = torch.rand(3, 2, H, W)
    maps = [affine_matrix(width=W, height=H, angle=a, scale=s) for a, s in
            [(0, 1.0), (20, 1.1), (-15, 0.8)]]
    batch = warp(imgs, torch.stack(maps), fill=-1.0)
    for i in range(3):
        assert torch.allclose(batch[i], warp(imgs[i], maps[i], fill=-1.0))


def test_grid_equals_affine_grid():
    m = affine_matrix(width=W, height=H, angle=17, scale=1.2, shear=(5, 3), translate=(3, -2))
    theta = geometry._theta(m, W, H)
    ref = F.affine_grid(torch.tensor([theta]), [1, 1, H, W], align_corners=False)
    assert torch.allclose(geometry._grid(theta, H, W), ref, atol=1e-6)


@pytest.mark.parametrize("make, match", [
    (lambda: RandomFlip(p=1.5), "p must be a probability"),
    (lambda: RandomFlip(axis="diagonal"), "unknown axis"),
    (lambda: RandomAffine(scale=(1.2, 0.8)), "scale range is invalid"),
    (lambda: RandomAffine(translate=0.1), "translate has the wrong form"),
    (lambda: RandomIntensity(gamma="x"), "gamma has the wrong form"),
    (lambda: Compose([RandomFlip(), 3]), "Compose needs callables"),
])
def test_bad_arguments_raise(make, match):
    with pytest.raises(RadHarmonyError, match=match):
        make()


def test_bad_samples_raise():
    with pytest.raises(RadHarmonyError, match="'img' is not an image tensor.*train_transform"):
        RandomFlip(p=1)({"img": "/data/a.png"})
    with pytest.raises(RadHarmonyError, match=r"'bbox' is not an \(N, 4\) tensor"):
        RandomAffine(p=1)({"img": torch.zeros(1, 8, 8), "bbox": torch.zeros(4)})
    sample = rect_sample((2.0, 2.0, 10.0, 10.0))
    sample["bbox_labels"] = []
    with pytest.raises(RadHarmonyError, match="out of step"):
        RandomAffine(p=1, degrees=None, scale=(3.0, 3.0), translate=None, shear=None)(sample)


def test_monai_dictionary_transforms_on_a_sample():
    monai_transforms = pytest.importorskip("monai.transforms")
    sample = rect_sample()
    flip = monai_transforms.Compose([monai_transforms.RandFlipd(keys=["img"], prob=1,
                                                                spatial_axis=1)])
    direct = flip(dict(sample))  # works as is; img comes back as a MetaTensor
    assert torch.equal(direct["img"].as_tensor(), sample["img"].flip(-1))
    out = augment.monai(flip)(sample)
    assert type(out["img"]) is torch.Tensor and out["img"].dtype == torch.bfloat16
    assert torch.equal(out["img"], RandomFlip(p=1)(sample)["img"])
    assert torch.equal(out["bbox"], sample["bbox"])  # MONAI moves only the keys it is given
    both = augment.monai(monai_transforms.Compose([
        monai_transforms.RandAffined(keys=["img", "mask"], prob=1, rotate_range=0.5,
                                     mode=["bilinear", "nearest"], padding_mode="zeros"),
        monai_transforms.RandGaussianNoised(keys=["img"], prob=1, std=0.02)]))
    both.transform.set_random_state(0)
    out = both(sample)
    assert out["mask"].dtype == torch.uint8 and set(out["mask"].unique().tolist()) <= {0, 1}
    assert type(out["mask"]) is torch.Tensor and out["img"].shape == (1, H, W)
    mixed = Compose([RandomAffine(p=1), augment.monai(flip)])(sample)
    assert type(mixed["img"]) is torch.Tensor


def test_docstring_examples():
    for module in (augment, geometry, samplers):
        result = doctest.testmod(module)
        assert result.failed == 0 and result.attempted > 0
