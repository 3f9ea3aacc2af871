"""Shape buckets: the range of dimension sizes one parameter table serves (seed 004, Fig. 12).

Per dimension with quantum q, sizes up to 16q fall in buckets of width q; beyond, the width
doubles with every octave (at most 1/8 of the size), so the number of buckets, and with it
the number of cached tables, grows with log(size), not with the number of distinct sizes.
A dimension whose kernels have a VARIABLE_PARTIAL window w splits each wider bucket into its
top w sizes (where partial tails apply) and the rest. Size 0 has its own bucket (0, 0).
"""


def bucket(n, q, w=0):
    """The bucket (lo, hi] holding size ``n``: every size lo < n' <= hi shares its tables."""
    if n <= 0:
        return (0, 0)
    k = max(0, ((n + q - 1) // q - 1).bit_length() - 4)
    s = q << k
    hi = -(-n // s) * s
    lo = hi - s
    if w and s > w:
        if n > hi - w:
            lo = hi - w
        else:
            hi = hi - w
    return (lo, hi)


def buckets_upto(limit, q, w=0):
    """Number of distinct buckets covering sizes 1..limit (for bounds in tests and docs)."""
    count = 0
    n = 1
    while n <= limit:
        lo, hi = bucket(n, q, w)
        count += 1
        n = hi + 1
    return count
