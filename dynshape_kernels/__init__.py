"""dynshape's static kernel library (installed as ``dynshape_kernels``).

Static kernels are compiled once for a fixed tile shape of one op family, dtype and target.
They are identified by an integer id through the :mod:`catalog`; the drivers in
:mod:`drivers` loop over parameter-table entries in compiled code and call them by id.
"""

from .cache_locator import install as _install_cache_locator

_install_cache_locator()
