"""Public testing helpers: hypothesis strategies for shapes, strided arrays and tables, a
coverage checker for parameter tables, and a compilation counter.

The coverage checkers and the compilation counter need nothing beyond dynshape itself; the
strategies need the ``test`` extra (hypothesis) and are imported on first use. Typical use::

    from hypothesis import given
    from dynshape import testing

    @given(testing.tables())
    def test_cover(case):
        testing.check_coverage(case.table, case.shape)
"""
from dynshape.testing.compilations import (CompileCounter, count_compilations, counted,
                                           start_counting)
from dynshape.testing.coverage import (check_conv_table, check_coverage, check_matmul_coverage, conv_coverage,
                       coverage, matmul_coverage)

STRATEGIES = ("shapes", "views", "tail_mode_sets", "tables", "TableCase", "sizes_in_bucket",
              "chunk_layouts", "dags")

__all__ = ["CompileCounter", "count_compilations", "start_counting", "counted", "check_conv_table", "check_coverage",
           "check_matmul_coverage", "conv_coverage", "coverage", "matmul_coverage",
           *STRATEGIES]


def __getattr__(name):
    """The strategies, imported (with hypothesis) when first asked for."""
    if name in STRATEGIES:
        from dynshape.testing import strategies
        return getattr(strategies, name)
    raise AttributeError(f"module 'dynshape.testing' has no attribute {name!r}")
