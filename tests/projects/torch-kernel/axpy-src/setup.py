"""A team's own CUDA kernel, built the way flash-attn and its peers build theirs: a torch
CUDAExtension compiled by nvcc for the architectures TORCH_CUDA_ARCH_LIST names."""
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CUDAExtension

setup(name="envgen-axpy", version="0.1.0", install_requires=["torch"],
      ext_modules=[CUDAExtension("envgen_axpy", ["axpy.cu"])],
      cmdclass={"build_ext": BuildExtension})
