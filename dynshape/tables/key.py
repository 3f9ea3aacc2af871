"""TableKey: what a parameter table depends on, built in one place per family.

Every shape of a bucket maps to the same key, so the number of cached tables grows with the
number of buckets, never with the number of distinct shapes. Keys are hashable, compare by
value and have a canonical text (``tables.store.canonical``) that is the same in every
process, which names a table's file on disk.
"""
from dataclasses import dataclass


@dataclass(frozen=True)
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

    def expect(self):
        """The header values a table saved on disk must have to serve this key."""
        return {"family": self.family, "op": self.op, "dtype": self.dtype,
                "target": self.target, "bucket": self.bucket}
