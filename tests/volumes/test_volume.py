"""The volume model: canonical order and exact geometry under every signed axis order."""

import numpy as np
import pytest

from radharmony.volumes import Volume
from radharmony.volumes.geometry import axis_codes, to_canonical
from radharmony.volumes.volume import VolumeGeometryError
from volume_oracles import ORDERS, order_affine



@pytest.mark.parametrize("perm,signs", ORDERS)
def test_every_signed_axis_order_becomes_canonical_with_each_voxel_in_place(perm, signs):
    source = np.arange(4 * 5 * 6, dtype=np.int16).reshape(4, 5, 6)
    affine = order_affine(perm, signs)
    array, canon = to_canonical(source, affine)
    assert axis_codes(canon) == ("S", "P", "L")
    volume = Volume.from_array(array, canon)
    index = np.argwhere(np.ones(source.shape, bool))
    world = index @ affine[:3, :3].T + affine[:3, 3]
    back = np.rint(volume.voxel(world)).astype(int)
    assert np.array_equal(array[tuple(back.T)], source[tuple(index.T)])
    assert np.allclose(volume.world(back), world, atol=1e-9)
    assert canon[2, 0] > 0 and canon[1, 1] > 0 and canon[0, 2] > 0  # d->+z, h->+y, w->+x


def test_spacing_follows_the_array_axes_and_ras_flips_x_and_y():
    volume = Volume.from_array(np.zeros((2, 3, 4), np.int16),
                               np.diag([2.5, 0.75, 0.5, 1.0]))
    assert volume.spacing == (2.5, 0.75, 0.5)
    ras = volume.in_space("RAS")
    assert ras.space == "RAS" and ras.array is volume.array
    assert np.allclose(ras.world([[1, 1, 1]]), [[-2.5, -0.75, 0.5]])
    assert volume.tensor().shape == (1, 2, 3, 4)


@pytest.mark.parametrize("affine", [np.zeros((4, 4)), np.full((4, 4), np.nan)])
def test_a_zero_or_non_finite_affine_is_refused_with_the_fix(affine):
    with pytest.raises(VolumeGeometryError, match="affine.*Fix: check the file's header"):
        Volume.from_array(np.zeros((2, 2, 2)), affine)


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="needs fork")
def test_a_whole_volume_allocation_is_private_to_its_process():
    """Large arrays are mapped, not malloc'd; the mapping is private (copy-on-write): a forked
    loader worker writing into a volume does not change its parent's copy."""
    import os

    from radharmony.volumes.checks import _MAPPED, allocate

    array = allocate((_MAPPED // 2 + 8,), np.int16)
    array[:] = 7
    assert array.flags.c_contiguous and array.flags.writeable
    pid = os.fork()
    if pid == 0:                                # the child: write, then leave at once
        array[:] = -1
        os._exit(0)
    os.waitpid(pid, 0)
    assert array.min() == 7 == array.max()
