"""KernelBench answer, embedding_bag_sum: wrong (a demonstration): mean pooling, not sum."""

import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, weight, indices, offsets):
        return F.embedding_bag(indices, weight, offsets, mode="mean", include_last_offset=True)
