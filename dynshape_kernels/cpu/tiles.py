"""Compiled slot -> tile shape lookup shared by the drivers of every family."""
from .callee import callee


def make_tile_geometry(tiles):
    """``tile_geometry(slot) -> (T0, T1, w)`` for a family's tile slots (any number).

    The shapes are closure constants, so each family's lookup is compiled (and cached) with
    its own values and folds to constants inside the drivers.
    """
    t0s = tuple(int(t[0]) for t in tiles)
    t1s = tuple(int(t[1]) for t in tiles)
    ws = tuple(int(t[2]) for t in tiles)

    @callee(cache=True)
    def tile_geometry(slot):
        return t0s[slot], t1s[slot], ws[slot]
    return tile_geometry
