"""A team's own CUDA kernel, built the way flash-attn and its peers build theirs: a torch
CUDAExtension compiled by nvcc for the architectures TORCH_CUDA_ARCH_LIST names. It is a
torch operator in a module of Python's limited API (abi3): `torch.ops.envgen_axpy.axpy`."""
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CUDAExtension

LIMITED = "-DPy_LIMITED_API=0x03090000"
setup(name="envgen-axpy", version="0.1.0", install_requires=["torch"],
      ext_modules=[CUDAExtension("envgen_axpy", ["axpy.cu"], py_limited_api=True,
                                 extra_compile_args={"cxx": [LIMITED], "nvcc": [LIMITED]})],
      cmdclass={"build_ext": BuildExtension},
      options={"bdist_wheel": {"py_limited_api": "cp39"}})
