import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# One fused kernel instead of two eager launches (add, then relu) and the temporary between them.
add_relu_cuda_source = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>

__global__ void add_relu_kernel(const float* __restrict__ a, const float* __restrict__ b,
                                float* __restrict__ out, long long n) {
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        float v = a[i] + b[i];
        out[i] = v > 0.0f ? v : 0.0f;
    }
}

torch::Tensor add_relu(torch::Tensor a, torch::Tensor b) {
    TORCH_CHECK(a.is_cuda() && b.is_cuda(), "add_relu: inputs must be CUDA tensors");
    TORCH_CHECK(a.scalar_type() == torch::kFloat32 && b.scalar_type() == torch::kFloat32,
                "add_relu: inputs must be float32");
    TORCH_CHECK(a.sizes() == b.sizes(), "add_relu: inputs must have one shape");
    auto a_c = a.contiguous();
    auto b_c = b.contiguous();
    auto out = torch::empty_like(a_c);
    long long n = a_c.numel();
    if (n == 0) {
        return out;
    }
    const int threads = 256;
    const long long wanted = (n + threads - 1) / threads;
    const int blocks = (int)(wanted < 65535 ? wanted : 65535);
    add_relu_kernel<<<blocks, threads, 0, c10::cuda::getCurrentCUDAStream()>>>(
        a_c.data_ptr<float>(), b_c.data_ptr<float>(), out.data_ptr<float>(), n);
    return out;
}
"""

add_relu_cpp_source = "torch::Tensor add_relu(torch::Tensor a, torch::Tensor b);"

add_relu_ext = load_inline(
    name="add_relu_ext",
    cpp_sources=add_relu_cpp_source,
    cuda_sources=add_relu_cuda_source,
    functions=["add_relu"],
    verbose=False,
)


class ModelNew(nn.Module):
    """Model with the add and the ReLU fused into one CUDA kernel."""

    def __init__(self):
        super().__init__()
        self.ext = add_relu_ext

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return self.ext.add_relu(a, b)
