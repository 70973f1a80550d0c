"""KernelBench answer, embedding_bag_sum: the right result, computed on a CUDA stream of its own
and returned without waiting for it (a demonstration of work outside the timed region: CUDA
events recorded on the current stream around the call see almost nothing; whoever reads the
output after a device-wide synchronize gets the right values)."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.side = None

    def forward(self, weight, indices, offsets):
        if self.side is None:
            self.side = torch.cuda.Stream()
        # Wait for what the caller queued (its inputs), then work apart from its stream.
        self.side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.side):
            out = F.embedding_bag(indices, weight, offsets, mode="sum", include_last_offset=True)
        return out
