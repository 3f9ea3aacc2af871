"""The CUDA target: the catalog's CUDA kernels (``dynshape_kernels.cuda``) run on device
arrays through the same executors, tables and cache as the CPU.

Nothing here is imported by ``import dynshape``; the first call with a device array (or
``target="cuda"``) imports it. Device arrays are CuPy arrays, Numba device arrays, and
anything exposing ``__cuda_array_interface__`` (PyTorch CUDA tensors, say). Under Numba's
CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``) the simulator's device arrays play their part.

Modules: ``arrays`` (which arrays are device arrays; their layout), ``memory`` (layout
stand-ins the executors plan on, and the map back to device memory), ``bridge`` (operands
and tables onto the device for one launch, streams), ``call`` (one ``run`` on device
arrays), ``target`` (the registered Target and its GPU cost model).
"""
