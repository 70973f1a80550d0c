#!/usr/bin/env python3
"""Time PyTorch eager on the exact inputs written by `dlrm-bench gen`.

The peer is the yardstick the Rust reference kernels are held to (DESIGN.md section 4: the
reference must stay within +-10% of the KernelBench `Model` in eager PyTorch on identical
inputs). Timing follows DESIGN.md section 7: CUDA events around each `Model` forward call
only, after warm-up; L2 flushed before each timed call (a 256 MiB buffer zeroed, unless
--warm-l2); input sets rotated per iteration (set i % len(sets)).

Example:
    target/release/dlrm-bench gen embedding_bag_sum --preset full --sets 2 --out inputs/
    python3 tools/torch_peer.py --problem embedding_bag_sum \
        --inputs inputs/embedding_bag_sum.full.set0.safetensors \
                 inputs/embedding_bag_sum.full.set1.safetensors --out peer.jsonl

Needs torch, safetensors and numpy only. Exit status: 0 ok; 2 no CUDA device (or torch not
importable), and also argparse's usage errors (a missing --inputs file among them); 1 for a
missing or broken KernelBench file; any other failure raises with a traceback.
"""

import argparse
import glob
import importlib.util
import json
import math
import os
import statistics
import sys

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KERNELBENCH_DIR = os.path.join(REPO_ROOT, "bench-problems", "kernelbench")
L2_FLUSH_BYTES = 256 << 20


def log(msg):
    print(msg, flush=True)


# ---------------------------------------------------------------------------------------
# Problems. Each entry: how many bytes one call moves (FBGEMM's logical count: every lookup
# counted) and an independent float64 oracle. The KernelBench file is found by glob on
# bench-problems/kernelbench/*_{problem}.py. A new problem is one entry here.
# ---------------------------------------------------------------------------------------

def _ebs_logical_bytes(inputs):
    weight, indices, offsets = inputs
    n = indices.numel()
    d = weight.shape[1]
    b = offsets.numel() - 1
    return n * d * 4 + b * d * 4 + n * 8 + (b + 1) * 8


def _ebs_oracle_f64(inputs):
    """out[b] = sum of weight[indices[j]] over the bag, in float64, without embedding_bag."""
    import torch

    weight, indices, offsets = inputs
    b = offsets.numel() - 1
    d = weight.shape[1]
    dev = weight.device
    lengths = offsets[1:] - offsets[:-1]
    bag_of = torch.repeat_interleave(torch.arange(b, device=dev), lengths)
    out = torch.zeros((b, d), dtype=torch.float64, device=dev)
    chunk = 1 << 20  # bounds the float64 gather to chunk * D * 8 bytes
    for s in range(0, indices.numel(), chunk):
        rows = weight.index_select(0, indices[s:s + chunk]).to(torch.float64)
        out.index_add_(0, bag_of[s:s + chunk], rows)
    return out


PROBLEMS = {
    "embedding_bag_sum": {
        "logical_bytes": _ebs_logical_bytes,
        "oracle_f64": _ebs_oracle_f64,
    },
}


def find_kernelbench_file(problem):
    matches = sorted(glob.glob(os.path.join(KERNELBENCH_DIR, f"*_{problem}.py")))
    if len(matches) != 1:
        raise SystemExit(
            f"torch_peer: expected one KernelBench file {KERNELBENCH_DIR}/*_{problem}.py, "
            f"found {len(matches)}: {matches}"
        )
    return matches[0]


def import_kernelbench(path, problem):
    spec = importlib.util.spec_from_file_location(f"dlrm_bench_kb_{problem}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    for name in ("Model", "get_inputs", "get_init_inputs"):
        if not hasattr(mod, name):
            raise SystemExit(f"torch_peer: {path} has no `{name}`")
    return mod


def load_set(mod, path):
    """Load one input set through the KernelBench file (its load_inputs, else get_inputs)."""
    if hasattr(mod, "load_inputs"):
        return list(mod.load_inputs(path, device="cuda"))
    old = os.environ.get("DLRM_BENCH_INPUTS")
    os.environ["DLRM_BENCH_INPUTS"] = path
    try:
        return [t.cuda() if hasattr(t, "cuda") else t for t in mod.get_inputs()]
    finally:
        if old is None:
            del os.environ["DLRM_BENCH_INPUTS"]
        else:
            os.environ["DLRM_BENCH_INPUTS"] = old


def percentile(sorted_vals, q):
    """Linear-interpolated percentile, q in [0, 100], of an ascending list."""
    if not sorted_vals:
        return float("nan")
    pos = (len(sorted_vals) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_vals) - 1)
    return sorted_vals[lo] + (sorted_vals[hi] - sorted_vals[lo]) * (pos - lo)


def rel_l2(out, ref):
    import torch

    diff = out.to(torch.float64) - ref.to(device=out.device, dtype=torch.float64)
    num = torch.linalg.vector_norm(diff).item()
    den = torch.linalg.vector_norm(ref.to(torch.float64)).item()
    if den == 0.0:
        return 0.0 if num == 0.0 else float("inf")
    return num / den


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--problem", default="embedding_bag_sum", choices=sorted(PROBLEMS),
                    help="problem name (default: embedding_bag_sum)")
    ap.add_argument("--inputs", nargs="+", required=True, metavar="FILE",
                    help="safetensors input sets from `dlrm-bench gen`; timing rotates among them")
    ap.add_argument("--iters", type=int, default=50, help="timed iterations (default 50)")
    ap.add_argument("--warmup", type=int, default=5, help="warm-up iterations (default 5)")
    ap.add_argument("--warm-l2", action="store_true",
                    help="do not flush L2 before each timed call (default: flush)")
    ap.add_argument("--out", metavar="FILE.jsonl", help="append one JSON record to this file")
    ap.add_argument("--check", action="store_true",
                    help="compare the Model output with a float64 oracle (relative L2 error)")
    args = ap.parse_args(argv)

    if args.iters < 1 or args.warmup < 0:
        ap.error("--iters must be >= 1 and --warmup >= 0")
    for f in args.inputs:
        if not os.path.isfile(f):
            ap.error(f"input file not found: {f}")

    try:
        import torch
    except ImportError as e:
        log(f"torch_peer: PyTorch is not importable ({e}); run this on a GPU host with torch")
        return 2
    if not torch.cuda.is_available():
        log("torch_peer: no CUDA device visible to PyTorch; the peer times GPU kernels only "
            "(run it on a GPU host)")
        return 2

    spec = PROBLEMS[args.problem]
    kb_path = find_kernelbench_file(args.problem)
    mod = import_kernelbench(kb_path, args.problem)
    device_name = torch.cuda.get_device_name()
    log(f"torch_peer: {args.problem} via {os.path.relpath(kb_path, REPO_ROOT)} on "
        f"{device_name}, torch {torch.__version__}")

    sets = []
    for f in args.inputs:
        inputs = load_set(mod, f)
        shapes = ", ".join(f"{list(t.shape)}" for t in inputs if hasattr(t, "shape"))
        log(f"  loaded {f}: {shapes}")
        sets.append(inputs)
    logical_bytes = sum(spec["logical_bytes"](s) for s in sets) / len(sets)

    model = mod.Model(*mod.get_init_inputs()).cuda().eval()
    stream = torch.cuda.current_stream()
    flush_buf = None if args.warm_l2 else torch.empty(L2_FLUSH_BYTES, dtype=torch.uint8,
                                                      device="cuda")

    record = {
        "tool": "torch_peer",
        "problem": args.problem,
        "impl": "pytorch_eager",
        "torch": torch.__version__,
        "device": device_name,
        "inputs": [os.path.basename(f) for f in args.inputs],
    }

    with torch.inference_mode():
        if args.check:
            errs = []
            for f, s in zip(args.inputs, sets):
                out = model(*s)
                ref = spec["oracle_f64"](s)
                err = rel_l2(out, ref)
                errs.append(err)
                log(f"  check {os.path.basename(f)}: rel_l2_err = {err:.3e}")
                del out, ref
            record_err = max(errs)
        torch.cuda.synchronize()

        for i in range(args.warmup):
            if flush_buf is not None:
                flush_buf.zero_()
            model(*sets[i % len(sets)])
        torch.cuda.synchronize()

        starts = [torch.cuda.Event(enable_timing=True) for _ in range(args.iters)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(args.iters)]
        for i in range(args.iters):
            inputs = sets[i % len(sets)]
            if flush_buf is not None:
                flush_buf.zero_()
            starts[i].record(stream)
            model(*inputs)
            ends[i].record(stream)
        torch.cuda.synchronize()

    times = sorted(s.elapsed_time(e) for s, e in zip(starts, ends))
    median = statistics.median(times)
    record.update({
        "median_ms": median,
        "p10_ms": percentile(times, 10),
        "p90_ms": percentile(times, 90),
        "mean_ms": statistics.fmean(times),
        "iters": args.iters,
        "warmup": args.warmup,
        "l2_flush": not args.warm_l2,
        "logical_bytes": logical_bytes,
        "logical_gbps": logical_bytes / (median * 1e-3) / 1e9,
    })
    if args.check:
        record["rel_l2_err"] = record_err

    summary = (f"torch_peer {args.problem} pytorch_eager: median {median:.4f} ms "
               f"(p10 {record['p10_ms']:.4f}, p90 {record['p90_ms']:.4f}, "
               f"mean {record['mean_ms']:.4f}, n={args.iters}), "
               f"{record['logical_gbps']:.1f} GB/s logical, "
               f"L2 {'flushed' if record['l2_flush'] else 'warm'}, {len(sets)} input set(s)")
    if args.check:
        summary += f", rel_l2_err {record_err:.3e}"
    log(summary)

    if args.out:
        out_dir = os.path.dirname(os.path.abspath(args.out))
        os.makedirs(out_dir, exist_ok=True)
        with open(args.out, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(record) + "\n")
        log(f"  appended record to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
