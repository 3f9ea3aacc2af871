"""Operand layout: broadcasting, dimension coalescing and flat buffers with element strides.

Every operand reaches a driver as a 1-D buffer spanning its memory plus, per dimension, a
stride in elements (zero for broadcast dimensions, negative for reversed ones): no operand is
copied to make it contiguous. Dimensions are coalesced when every operand allows it, and the
result is split into outer (batch) dimensions and an inner plane of rows x columns.
"""
from dataclasses import dataclass

import numpy as np
from dynshape_kernels.abi.common_area import MAX_OUTER, MAX_RANK
from dynshape_kernels.abi.storage import CARRIERS

from dynshape.errors import ShapeError


def element_strides(a):
    """Strides of ``a`` in elements, or None when a byte stride is not a multiple of the item size."""
    isz = a.itemsize
    st = a.strides
    if any(s % isz for s in st):
        return None
    return tuple(s // isz for s in st)


def broadcast_strides(shape, a_shape, a_strides):
    """Element strides of an operand of shape ``a_shape`` broadcast to ``shape``."""
    pad = len(shape) - len(a_shape)
    out = [0] * pad
    for n_out, n_a, s in zip(shape[pad:], a_shape, a_strides):
        out.append(0 if n_a == 1 and n_out != 1 else s)
    return out


def coalesce(shape, strides_list):
    """Drop size-1 dimensions and merge neighbours that every operand can walk as one.

    Returns (shape, strides_list) of the smallest equivalent rank (0 for a single element).
    """
    dims = [i for i, n in enumerate(shape) if n != 1]
    cshape = []
    cstr = [[] for _ in strides_list]
    for i in dims:
        n = shape[i]
        if cshape and all(cs[-1] == st[i] * n for cs, st in zip(cstr, strides_list)):
            cshape[-1] *= n
            for cs, st in zip(cstr, strides_list):
                cs[-1] = st[i]
        else:
            cshape.append(n)
            for cs, st in zip(cstr, strides_list):
                cs.append(st[i])
    return cshape, cstr


@dataclass(frozen=True)
class Plane:
    """A coalesced iteration space: outer dims replicated, inner plane rows x columns."""
    outer: tuple          # outer shape
    m: int                # rows of the inner plane
    n: int                # columns of the inner plane
    strides: tuple        # per operand: (outer strides..., row stride, column stride)
    rank: int             # coalesced rank before padding to a plane

    def layout_class(self):
        """What the tiling choice depends on besides sizes: rank and stride kinds per operand."""
        kinds = tuple((st[-1] == 1, st[-1] == 0, st[-2] == 0, abs(st[-2]) == 1)
                      for st in self.strides)
        return (min(self.rank, 3), kinds)


def plane(shape, strides_list):
    """Coalesce and split into outer dims and an inner (rows, columns) plane."""
    cshape, cstr = coalesce(shape, strides_list)
    return plane_of_coalesced(list(cshape), [list(cs) for cs in cstr])


def plane_of_coalesced(cshape, cstr):
    """The Plane of an already coalesced shape and per-operand strides (lists, extended in
    place to rank 2)."""
    rank = len(cshape)
    if rank > MAX_RANK:
        raise ShapeError(
            f"after merging contiguous dimensions the iteration space still has rank {rank}; "
            f"at most {MAX_RANK} non-mergeable dimensions are supported")
    while len(cshape) < 2:
        cshape.insert(0, 1)
        for cs in cstr:
            cs.insert(0, 0)
    return Plane(tuple(cshape[:-2]), cshape[-2], cshape[-1],
                 tuple(tuple(cs) for cs in cstr), rank)


_CARRIERS = {}        # dtype -> the kernels' carrier dtype of a storage format, or None


def kernel_dtype(dt):
    """The dtype kernels see for arrays of ``dt``: the integer carrier of a half-precision
    storage format (``abi.storage``), else None (the dtype itself)."""
    try:
        return _CARRIERS[dt]
    except KeyError:
        c = CARRIERS.get(dt.name) if dt.itemsize == 2 else None
        _CARRIERS[dt] = np.dtype(c) if c else None
        return _CARRIERS[dt]


def kernel_view_dtype(dt):
    """The dtype of the buffers kernels get for arrays of ``dt``: its carrier, or ``dt``."""
    return kernel_dtype(dt) or dt


def flat_view(a):
    """(1-D buffer over a's memory span, element offset of a[0, ..., 0]) without copying.
    A half-precision array is seen through its carrier (``kernel_dtype``).

    ``a`` must be non-empty with strides that are multiples of its item size.
    """
    if a.dtype.itemsize == 2:
        c = kernel_dtype(a.dtype)
        if c is not None:
            a = a.view(c)
    if a.flags.c_contiguous:
        return a.reshape(-1), 0
    lo, hi, flip = _span(a)
    buf = np.lib.stride_tricks.as_strided(a[flip], shape=(hi - lo + 1,), strides=(a.itemsize,),
                                          writeable=a.flags.writeable)
    return buf, -lo


def _span(a):
    """``(lo, hi, flip)``: the lowest and highest element offsets of ``a``'s items from
    ``a[0, ..., 0]`` (strides multiples of the item size), and the slices reversing its
    axes of negative stride (``a[flip]`` starts at the lowest address)."""
    st = element_strides(a)
    lo = sum(s * (n - 1) for s, n in zip(st, a.shape) if s < 0)
    hi = sum(s * (n - 1) for s, n in zip(st, a.shape) if s > 0)
    return lo, hi, tuple(slice(None, None, -1) if s < 0 else slice(None) for s in st)


def flat_buffer(a):
    """``flat_view(a)[0]``."""
    return flat_view(a)[0]


def is_flat_buffer(a):
    """Whether ``a`` is its own ``flat_view`` buffer (one C-contiguous dimension of an item
    type the kernels take as it is): a replay can pass such arrays without a view."""
    return a.ndim == 1 and a.flags.c_contiguous and kernel_dtype(a.dtype) is None


def flattener(a):
    """A function giving ``flat_view(b)[0]`` for any array ``b`` of ``a``'s dtype, shape and
    strides, chosen once for that layout (a replay's arrays all have it), without the span
    arithmetic and ``as_strided`` of ``flat_view`` where the layout allows:

    * C-contiguous: ``ravel`` (a view);
    * a permutation of a C-contiguous array, some axes possibly reversed (a transpose, a
      ``[::-1]``): reversing those axes and permuting back gives a C-contiguous view of the
      same memory from its lowest address, whose ``ravel`` is the buffer;
    * gaps between items, zero strides: ``as_strided`` over the span computed once
      (:func:`_spanning`);
    * half-precision carriers: ``flat_view``."""
    if kernel_dtype(a.dtype) is not None:
        return flat_buffer
    if a.flags.c_contiguous:
        return np.ndarray.ravel
    st = a.strides
    perm = tuple(sorted(range(a.ndim), key=lambda i: -abs(st[i])))
    if any(s < 0 for s in st):
        flip = tuple(slice(None, None, -1) if s < 0 else slice(None) for s in st)
        if not a[flip].transpose(perm).flags.c_contiguous:
            return _spanning(a)
        return lambda b: b[flip].transpose(perm).ravel()
    if not a.transpose(perm).flags.c_contiguous:
        return _spanning(a)
    return lambda b: b.transpose(perm).ravel()


def _spanning(a):
    """``flat_view(b)[0]`` for arrays ``b`` of ``a``'s layout with gaps between items (a
    slice with a step, one of the parts of a split): its span (:func:`_span`) computed once
    for the layout, only ``as_strided`` per call. flat_view's span arithmetic took 5.6 us of
    an attention product's replay (a 1 x 4 x 16 x 8 part of a (1, 16, 3, 4, 8) projection),
    this 2.2."""
    if a.size == 0 or any(s % a.itemsize for s in a.strides):
        return flat_buffer
    lo, hi, flip = _span(a)
    shape, strides = (hi - lo + 1,), (a.itemsize,)
    as_strided = np.lib.stride_tricks.as_strided
    if lo == 0:
        return lambda b: as_strided(b, shape=shape, strides=strides)
    return lambda b: as_strided(b[flip], shape=shape, strides=strides)


def readonly_flat(a):
    """The flat buffer of ``flat_view`` as a read-only view (``a`` itself is unchanged)."""
    v = flat_view(a)[0]
    v.flags.writeable = False
    return v


def same_view(a, b):
    """True when a and b are the same elements in the same layout (exact in-place aliasing)."""
    return (a.__array_interface__["data"][0] == b.__array_interface__["data"][0]
            and a.shape == b.shape and a.strides == b.strides)


def check_outer(p):
    if len(p.outer) > MAX_OUTER:
        raise ShapeError(f"too many outer dimensions: {len(p.outer)} > {MAX_OUTER}")
