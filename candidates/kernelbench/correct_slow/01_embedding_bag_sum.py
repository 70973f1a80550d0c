"""KernelBench answer, embedding_bag_sum: correct but slow (a demonstration).

Gathers every looked-up row into an N x D temporary, then adds them into their bags with
index_add_: twice eager's memory traffic, and its atomics.
"""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, weight, indices, offsets):
        b = offsets.numel() - 1
        lengths = offsets[1:] - offsets[:-1]
        bag_of = torch.repeat_interleave(torch.arange(b, device=weight.device), lengths)
        out = torch.zeros((b, weight.shape[1]), dtype=weight.dtype, device=weight.device)
        return out.index_add_(0, bag_of, weight.index_select(0, indices))
