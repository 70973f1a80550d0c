"""KernelBench answer, embedding_bag_sum: returns zeros of the right shape (a demonstration of
what an absolute tolerance would have to let through)."""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, weight, indices, offsets):
        return torch.zeros((offsets.numel() - 1, weight.shape[1]), dtype=weight.dtype,
                           device=weight.device)
