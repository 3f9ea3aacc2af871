"""TableKey: what a parameter table depends on, built in one place per family.

Every shape of a bucket maps to the same key, so the number of cached tables grows with the
number of buckets, never with the number of distinct shapes. Keys are hashable, compare by
value and have a canonical text (``tables.store.canonical``) that is the same in every
process, which names a table's file on disk.
"""
from dataclasses import dataclass


@dataclass(frozen=True, eq=False)
class TableKey:
    """``family``/``op``/``dtype``/``target``: the kernels the table calls and where they run.
    ``bucket``: per bucketed dimension, the (lo, hi] sizes the table serves. ``layout``: what
    the tiling depends on besides sizes (rank and stride kinds of the operands, say).
    ``attrs``: the op attributes that change the table (hashable, canonical values).
    ``overlap``: whether OVERLAP tails are allowed (never when the output aliases an input).
    ``threads``: the thread count the table was balanced for (0: any)."""
    family: str
    op: str
    dtype: str
    target: str = "cpu"
    bucket: tuple = ()
    layout: tuple = ()
    attrs: tuple = ()
    overlap: bool = False
    threads: int = 0

    def __post_init__(self):
        # every lookup hashes its key: compute the hash once (the fields never change)
        t = (self.family, self.op, self.dtype, self.target, self.bucket, self.layout,
             self.attrs, self.overlap, self.threads)
        object.__setattr__(self, "_fields", t)
        object.__setattr__(self, "_hash", hash(t))

    def __hash__(self):
        return self._hash

    def __eq__(self, other):
        return self is other or (type(other) is TableKey and self._fields == other._fields)

    def expect(self):
        """The header values a table saved on disk must have to serve this key."""
        return {"family": self.family, "op": self.op, "dtype": self.dtype,
                "target": self.target, "bucket": self.bucket}
