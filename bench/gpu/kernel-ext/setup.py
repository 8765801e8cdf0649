"""A CUDA kernel built the way flash-attn and its peers build theirs: a torch CUDAExtension
compiled by nvcc for the architectures TORCH_CUDA_ARCH_LIST names (bench/gpu/kernel.sh)."""
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CUDAExtension

setup(name="envgen-axpy", version="0.1.0",
      ext_modules=[CUDAExtension("envgen_axpy", ["axpy.cu"])],
      cmdclass={"build_ext": BuildExtension})
