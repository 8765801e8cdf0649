// y = a * x + y on the GPU, one thread per element: small enough to compile in a minute,
// real enough to prove nvcc, the CUDA headers and torch's operator API agree. A torch
// operator (TORCH_LIBRARY) in a module built for Python's limited API (abi3), as PyTorch's
// custom-op guide builds them: one build loads in any CPython from 3.9 over the same torch.
#include <Python.h>
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <torch/library.h>

extern "C" {
// `import envgen_axpy` loads this file, which registers the operator below
PyObject* PyInit_envgen_axpy(void) {
  static struct PyModuleDef def = {PyModuleDef_HEAD_INIT, "envgen_axpy", NULL, -1, NULL};
  return PyModule_Create(&def);
}
}

__global__ void axpy_kernel(float a, const float* x, float* y, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

at::Tensor axpy(const at::Tensor& x, const at::Tensor& y, double a) {
  TORCH_CHECK(x.is_cuda() && y.is_cuda(), "x and y must be CUDA tensors");
  TORCH_CHECK(x.scalar_type() == at::kFloat && y.scalar_type() == at::kFloat, "float32 only");
  TORCH_CHECK(x.numel() == y.numel(), "x and y must have as many elements");
  auto out = y.contiguous().clone();
  auto xs = x.contiguous();
  int64_t n = out.numel();
  int threads = 256;
  int64_t blocks = (n + threads - 1) / threads;
  axpy_kernel<<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
      (float)a, xs.data_ptr<float>(), out.data_ptr<float>(), n);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

TORCH_LIBRARY(envgen_axpy, m) { m.def("axpy(Tensor x, Tensor y, float a) -> Tensor"); }
TORCH_LIBRARY_IMPL(envgen_axpy, CUDA, m) { m.impl("axpy", &axpy); }
