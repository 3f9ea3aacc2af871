"""Compiled slot -> tile shape lookup shared by the drivers of every family."""
from numba import njit


def make_tile_geometry(tiles):
    """``tile_geometry(slot) -> (T0, T1, w)`` for a family's four tile slots.

    The shapes are closure constants, so each family's lookup is compiled (and cached) with
    its own values and folds to constants inside the drivers.
    """
    (a0, a1, aw), (b0, b1, bw), (c0, c1, cw), (d0, d1, dw) = tiles

    @njit(cache=True)
    def tile_geometry(slot):
        if slot == 0:
            return a0, a1, aw
        elif slot == 1:
            return b0, b1, bw
        elif slot == 2:
            return c0, c1, cw
        return d0, d1, dw
    return tile_geometry
