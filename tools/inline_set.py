#!/usr/bin/env python3
"""Writes the throughput set of KernelBench answers: candidates/kernelbench-throughput/.

Issue 35 asks for the evaluator's throughput measured on at least 60 answers that build CUDA
with `torch.utils.cpp_extension.load_inline`, as model-written KernelBench answers usually do.
This set is 5 variants x 12 problems = 60 answers, each a distinct extension (its own kernel
name and block size, so its own build), with a verdict known in advance:

* the answer runs its problem's own eager `Model` (copied in, renamed `_Eager`) and passes each
  output tensor through a `load_inline` CUDA kernel that copies it byte for byte into a fresh
  tensor: correct under both protocols, and about as fast as eager plus one copy;
* for the in-place problem (embedding_backward_rowwise_adagrad, whose outputs are its inputs)
  the copy runs on a one-element slice and is discarded, so the update stays in place.

Run from the repository root: `python3 tools/inline_set.py` (it rewrites the directory); then
on a GPU host `dlrm-bench kernelbench candidates/kernelbench-throughput/*/ --torch`.
"""
import pathlib
import re
import shutil

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "candidates/kernelbench-throughput"
VARIANTS = 5
IN_PLACE = {"embedding_backward_rowwise_adagrad"}

TEMPLATE = '''
# --- the answer: the eager Model above, each output copied by a load_inline CUDA kernel ---
from torch.utils.cpp_extension import load_inline

_CUDA = r"""
#include <torch/extension.h>

__global__ void copy_bytes_{tag}(const unsigned char* __restrict__ src,
                                  unsigned char* __restrict__ dst, long long n) {{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (; i < n; i += stride) dst[i] = src[i];
}}

torch::Tensor copy_{tag}(torch::Tensor t) {{
    auto c = t.contiguous();
    auto out = torch::empty_like(c);
    const long long n = (long long)c.numel() * (long long)c.element_size();
    if (n > 0) {{
        const int threads = {threads};
        const long long want = (n + threads - 1) / threads;
        const int blocks = (int)(want < 65536 ? want : 65536);
        copy_bytes_{tag}<<<blocks, threads>>>((const unsigned char*)c.data_ptr(),
                                              (unsigned char*)out.data_ptr(), n);
    }}
    return out;
}}
"""

_ext = load_inline(
    name="dlrm_throughput_{tag}",
    cpp_sources="torch::Tensor copy_{tag}(torch::Tensor t);",
    cuda_sources=_CUDA,
    functions=["copy_{tag}"],
    verbose=False,
)


class ModelNew(nn.Module):
    """The eager Model, its outputs passed through a load_inline copy kernel."""

    def __init__(self, *args):
        super().__init__()
        self.inner = _Eager(*args)

    def forward(self, *inputs):
        out = self.inner(*inputs)
{body}
'''

COPY = '''        if isinstance(out, tuple):
            return tuple(_ext.copy_{tag}(o) if torch.is_tensor(o) else o for o in out)
        return _ext.copy_{tag}(out)'''

TOUCH = '''        # In place: the outputs are the updated inputs; the kernel runs on a slice, discarded.
        first = out[0] if isinstance(out, tuple) else out
        _ext.copy_{tag}(first.reshape(-1)[:1])
        return out'''


def answer(number: int, problem: str, variant: int) -> str:
    model = (ROOT / f"bench-problems/kernelbench/{number:02}_{problem}.py").read_text()
    model = re.sub(r"^class Model\(", "class _Eager(", model, flags=re.M)
    tag = f"p{number:02}v{variant}"
    body = (TOUCH if problem in IN_PLACE else COPY).format(tag=tag)
    threads = (128, 256, 512, 1024, 64)[variant % 5]
    head = (f'"""Throughput answer {tag} ({problem}): written by tools/inline_set.py."""\n\n')
    return head + model + TEMPLATE.format(tag=tag, threads=threads, body=body)


def main():
    problems = [p.stem[3:] for p in sorted((ROOT / "bench-problems/kernelbench").glob("[0-9][0-9]_*.py"))]
    shutil.rmtree(OUT, ignore_errors=True)
    n = 0
    for variant in range(VARIANTS):
        d = OUT / f"inline-v{variant}"
        d.mkdir(parents=True)
        for number, problem in enumerate(problems, start=1):
            (d / f"{number:02}_{problem}.py").write_text(answer(number, problem, variant))
            n += 1
    print(f"{OUT.relative_to(ROOT)}: {n} answers in {VARIANTS} groups")


if __name__ == "__main__":
    main()
