"""KernelBench answer, embedding_bag_sum: correct and fast (a demonstration).

One warp per bag, float4 loads of each looked-up row, the bag's indices read 32 at a time and
broadcast with shuffles; compiled with torch.utils.cpp_extension.load_inline as KernelBench
answers usually are.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SOURCE = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void warp_per_bag(const float* __restrict__ weight, const long* __restrict__ indices,
                             const long* __restrict__ offsets, float* __restrict__ out,
                             long B, long D) {
    const int lane = threadIdx.x & 31;
    const long b = (long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (b >= B) return;
    const long start = offsets[b], end = offsets[b + 1];
    for (long c0 = 0; c0 < D; c0 += 128) {
        const long c = c0 + 4 * lane;
        float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
        for (long base = start; base < end; base += 32) {
            const long mine = base + lane < end ? indices[base + lane] : 0;
            const int n = (int)min(32L, end - base);
            for (int j = 0; j < n; ++j) {
                const long row = __shfl_sync(0xffffffffu, mine, j);
                if (c < D) {
                    const float4 v = __ldg(reinterpret_cast<const float4*>(weight + row * D + c));
                    acc.x += v.x; acc.y += v.y; acc.z += v.z; acc.w += v.w;
                }
            }
        }
        if (c < D) *reinterpret_cast<float4*>(out + b * D + c) = acc;
    }
}

torch::Tensor embedding_bag_sum(torch::Tensor weight, torch::Tensor indices,
                                torch::Tensor offsets) {
    TORCH_CHECK(weight.size(1) % 4 == 0, "D must be a multiple of 4");
    const long B = offsets.size(0) - 1, D = weight.size(1);
    auto out = torch::empty({B, D}, weight.options());
    const int threads = 256;
    const long blocks = (B * 32 + threads - 1) / threads;
    if (B > 0) {
        warp_per_bag<<<blocks, threads>>>(weight.data_ptr<float>(), indices.data_ptr<long>(),
                                          offsets.data_ptr<long>(), out.data_ptr<float>(), B, D);
    }
    return out;
}
"""

CPP_SOURCE = ("torch::Tensor embedding_bag_sum(torch::Tensor weight, torch::Tensor indices, "
              "torch::Tensor offsets);")

ext = load_inline(name="dlrm_kb_ebs_warp_per_bag", cpp_sources=CPP_SOURCE,
                  cuda_sources=CUDA_SOURCE, functions=["embedding_bag_sum"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, weight, indices, offsets):
        return ext.embedding_bag_sum(weight.contiguous(), indices.contiguous(),
                                     offsets.contiguous())
