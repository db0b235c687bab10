"""The services' hot loops. Call only :mod:`paperworks.kernels.ops`.

``ops`` validates inputs and dispatches (``backends``) to the plain PyTorch ``reference``
or to the ``cpu`` (C++), ``cuda`` (CUDA C ABI) and ``triton`` backends; ``packing``
defines the packed weight formats, ``tables`` the lookup tables built once on the host (the
Beta CDF's) and ``results`` the multi-tensor results. See README.md.
"""
