"""Measures a workload profile for `dlrm-bench project`: one DLRM training step in PyTorch eager,
built from the problems' own KernelBench `Model`s, with CUDA events around each of them.

The step (one GPU, fp32, dot interaction as in facebookresearch/dlrm):
    x    = bottom MLP(dense)                                 (autograd)
    emb  = problem 1's Model (sum embedding bag), per table  -> embedding_bag_sum
    z    = problem 10's Model (dot interaction)              -> dot_interaction
    loss = BCE(top MLP(z)); loss.backward()                  (autograd: top MLP, dz)
    dx, demb = problem 11's Model                            -> dot_interaction_backward
    x.backward(dx)                                           (autograd: bottom MLP)
    problem 5's Model (backward + row-wise Adagrad), per table -> embedding_backward_rowwise_adagrad
    SGD step of the MLPs
Tables: the MLPerf DLRMv2 table set (REFERENCE-DATA.md: 26 tables, D = 128, its multi-hot sizes)
with rows capped at --cap; ids skewed (row = floor(u^k · rows), hot rows first). Everything not
inside one of the four Models (MLPs, loss, the stack of the pooled embeddings, the MLP optimizer)
is the step's unaddressed part.

Prints the profile as TOML (and writes it with --out): the share of the step's time inside each
Model, averaged over --steps steps after --warmup.

    python3 tools/profile_workload.py --out workloads/NAME.toml
"""

import argparse
import datetime
import importlib.util
import json
import pathlib
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

KERNELBENCH = pathlib.Path(__file__).resolve().parent.parent / "bench-problems" / "kernelbench"

# MLPerf DLRMv2 (facebookresearch/dlrm torchrec_dlrm/README.MD), as in REFERENCE-DATA.md.
CARDINALITIES = [40000000, 39060, 17295, 7424, 20265, 3, 7122, 1543, 63, 40000000, 3067956, 405282,
                 10, 2209, 11938, 155, 4, 976, 14, 40000000, 40000000, 40000000, 590152, 12973,
                 108, 36]
MULTI_HOT = [3, 2, 1, 2, 6, 1, 1, 1, 1, 7, 3, 8, 1, 6, 9, 5, 1, 1, 1, 12, 100, 27, 10, 3, 1, 1]


def problem_model(number):
    path = next(KERNELBENCH.glob(f"{number:02d}_*.py"))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.Model()


def mlp(sizes, last_relu):
    layers = []
    for i, (a, b) in enumerate(zip(sizes, sizes[1:])):
        layers.append(nn.Linear(a, b))
        if last_relu or i < len(sizes) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=8192, help="samples per step (one GPU)")
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--cap", type=int, default=4_000_000, help="rows per table at most")
    ap.add_argument("--skew", type=float, default=4.0, help="k in row = floor(u^k * rows)")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--name", default="dlrm-dot-mlperf-tables-train")
    ap.add_argument("--out", type=pathlib.Path)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("profile_workload: no CUDA device", file=sys.stderr)
        sys.exit(2)
    dev = "cuda"
    torch.manual_seed(0)
    B, D, nt = args.batch, args.dim, len(CARDINALITIES)
    emb_bag, adagrad, interact, interact_bwd = (problem_model(n) for n in (1, 5, 10, 11))

    rows = [min(c, args.cap) for c in CARDINALITIES]
    weights = [torch.randn(r, D, device=dev) * 0.01 for r in rows]
    momenta = [torch.zeros(r, device=dev) for r in rows]
    indices, offsets = [], []
    for r, hot in zip(rows, MULTI_HOT):
        u = torch.rand(B * hot, device=dev, dtype=torch.float64)
        indices.append((u.pow(args.skew) * r).long().clamp_(max=r - 1))
        offsets.append(torch.arange(B + 1, device=dev, dtype=torch.int64) * hot)
    dense = torch.randn(B, 13, device=dev)
    labels = torch.randint(0, 2, (B, 1), device=dev).float()
    bottom = mlp([13, 512, 256, D], last_relu=True).to(dev)
    top = mlp([D + nt * (nt + 1) // 2, 1024, 1024, 512, 256, 1], last_relu=False).to(dev)
    opt = torch.optim.SGD(list(bottom.parameters()) + list(top.parameters()), lr=0.01)
    lr, eps = 0.01, 1e-8
    names = ["embedding_bag_sum", "dot_interaction", "dot_interaction_backward",
             "embedding_backward_rowwise_adagrad"]

    def event():
        e = torch.cuda.Event(enable_timing=True)
        e.record()
        return e

    def step():
        marks = {}
        start = event()
        x = bottom(dense)
        with torch.no_grad():
            a = event()
            pooled = [emb_bag(weights[t], indices[t], offsets[t]) for t in range(nt)]
            marks[names[0]] = (a, event())
            emb = torch.stack(pooled, dim=1)  # [B, T, D]
            a = event()
            z = interact(x.detach(), emb)
            marks[names[1]] = (a, event())
        z.requires_grad_(True)
        loss = F.binary_cross_entropy_with_logits(top(z), labels)
        loss.backward()
        with torch.no_grad():
            a = event()
            dx, demb = interact_bwd(x.detach(), emb, z.grad)
            marks[names[2]] = (a, event())
        x.backward(dx)
        with torch.no_grad():
            grads = [demb[:, t].contiguous() for t in range(nt)]  # problem 5's input layout
            a = event()
            for t in range(nt):
                adagrad(grads[t], indices[t], offsets[t], weights[t], momenta[t], lr, eps)
            marks[names[3]] = (a, event())
        opt.step()
        opt.zero_grad(set_to_none=True)
        return start, event(), marks

    for _ in range(args.warmup):
        step()
    torch.cuda.synchronize()
    totals = dict.fromkeys(names, 0.0)
    step_ms = 0.0
    for _ in range(args.steps):
        start, end, marks = step()
        torch.cuda.synchronize()
        step_ms += start.elapsed_time(end)
        for n, (a, b) in marks.items():
            totals[n] += a.elapsed_time(b)
    step_ms /= args.steps
    fractions = {n: totals[n] / args.steps / step_ms for n in names}

    gpu = torch.cuda.get_device_name()
    date = datetime.date.today().isoformat()
    lookups = B * sum(MULTI_HOT)
    description = (
        f"One DLRM training step on one GPU, PyTorch eager fp32: batch {B}, "
        f'26 tables of the MLPerf DLRMv2 set capped at {args.cap} rows (D = {D}, its multi-hot '
        f'sizes: {lookups} lookups), ids skewed as floor(u^{args.skew:g} * rows), bottom MLP '
        f'13-512-256-{D}, dot interaction, top MLP 1024-1024-512-256-1, BCE loss, row-wise '
        f"Adagrad on the tables (problem 5), SGD on the MLPs; mean step {step_ms:.3f} ms"
    )
    # The command's options, less where the file went (a path on the measuring machine).
    argv, options = sys.argv[1:], []
    while argv:
        a = argv.pop(0)
        if a == "--out":
            argv = argv[1:]
        elif not a.startswith("--out="):
            options.append(a)
    options = " ".join(options) or "(defaults)"
    source = (
        f"measured by tools/profile_workload.py {options} on {gpu}, torch {torch.__version__}, "
        f"{date}: CUDA events around each problem's KernelBench Model in the step, "
        f"{args.steps} steps after {args.warmup} warm-up"
    )
    # JSON string escapes are valid TOML basic-string escapes.
    text = (
        f"name = {json.dumps(args.name)}\n"
        f"description = {json.dumps(description)}\n"
        f"source = {json.dumps(source)}\n"
        f"\n[fractions]\n"
        + "".join(f"{n} = {fractions[n]:.4f}\n" for n in names)
    )
    print(text, end="")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)


if __name__ == "__main__":
    main()
