"""The services hot loops: ops API, reference, CPU, CUDA, Triton backends."""
