"""Tail modes: how a static kernel treats a tile that sticks out of the tensor (seed 004, Fig. 10).

The integer values are part of the parameter-table format: never renumber them.
"""
import enum

DISCARD = 0
OVERLAP = 1
VARIABLE_FULL = 2
VARIABLE_PARTIAL = 3


class TailMode(enum.IntEnum):
    """Per-dimension treatment of a tail tile.

    DISCARD           compute the whole tile on a zero-padded scratch copy, write only the valid part.
    OVERLAP           shift the tile back so it ends at the tensor's end (a full tile that
                      recomputes elements another tile already wrote, with identical values).
    VARIABLE_FULL     the kernel accepts any valid length 0..T in this dimension.
    VARIABLE_PARTIAL  the kernel accepts valid lengths in the window T-w..T: a fixed-length
                      branch-free part of T-w elements, then a short variable part.
    """

    DISCARD = DISCARD
    OVERLAP = OVERLAP
    VARIABLE_FULL = VARIABLE_FULL
    VARIABLE_PARTIAL = VARIABLE_PARTIAL


# Anchors of an entry's offset: from the start of the dimension, or back from its end.
ANCHOR_START = 0
ANCHOR_END = 1
