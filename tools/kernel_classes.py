"""Attribution of a profiled step's GPU activity to the suite's problems and to named classes.

Pure Python (no torch): `tools/profile_workload.py` feeds it the Chrome trace that
`torch.profiler` exports, and `tools/test_kernel_classes.py` tests it on CPU with fixtures.

Every GPU activity of the trace (kernels, memcpy, memset) gets one class:
1. a problem, when the CPU op that launched it runs inside a `record_function` region named
   `dlrm_bench::<problem>` (REGION_PREFIX): everything launched there, Triton, copies and
   memsets included, is the problem's;
2. for a kernel launched by an autograd backward node: the node's sequence number is looked up
   in the regions' sequence intervals (`(s0, s1, problem)`: nodes created inside the region's
   forward have s0 < seq < s1, recorded by the workload); the backward of a region whose
   problem has a backward problem (BACKWARD_OF: dot_interaction -> dot_interaction_backward)
   is that problem's, any other region's backward falls through to the name rules (and the
   kernel's row says which region's backward it was);
3. `optimizer`, inside `Optimizer.step#...` / `Optimizer.zero_grad#...` (torch.optim's own
   profiler regions);
4. otherwise by the name rules of `classify_name`.

How a kernel finds its CPU stack: its `args.correlation` names the CUDA runtime/driver launch
event (`cudaLaunchKernel`, `cuLaunchKernel`, `cudaMemcpyAsync`, ...), whose thread and time
give the CPU events that enclose the launch on that thread (cpu_op, user_annotation,
python_function). Without that launch event, the kernel's `args["External id"]` names the CPU op
(kineto's link of the two). A kernel with neither is classified by name only.
"""

import bisect
import csv
import io
import json
import re

PROBLEMS = (
    "embedding_bag_sum",
    "embedding_bag_weighted_sum_bf16",
    "tbe_forward_fp16",
    "embedding_bag_int8_rowwise",
    "embedding_backward_rowwise_adagrad",
    "sequence_gather_padded_bf16",
    "kjt_permute",
    "block_bucketize_sparse_features",
    "unique_indices",
    "dot_interaction",
    "dot_interaction_backward",
    "fm_interaction",
)

# The named classes for what no problem covers. `indexing` holds the gathers, scatters, sorts,
# scans and top-k of operations outside the problems' regions (an embedding's dense backward,
# a loss's label gather); `other` is what no rule names (coverage = 1 - share of `other`).
CLASSES = (
    "matmul",
    "attention",
    "elementwise",
    "reduction",
    "indexing",
    "optimizer",
    "copy",
    "communication",
    "other",
)

REGION_PREFIX = "dlrm_bench::"
BACKWARD_OF = {"dot_interaction": "dot_interaction_backward"}

GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset", "memcpy", "memset"}
LAUNCH_CATS = {"cuda_runtime", "cuda_driver", "runtime", "driver"}
CPU_CATS = {"cpu_op", "user_annotation", "python_function", "operator"}


def _has(name, *words):
    return any(w in name for w in words)


# Triton-inductor kernels: triton_{poi,red,per,tem}_fused_<op names>_<n>. Fused op names that
# say what the kernel is, checked before its kind.
_TRITON = re.compile(r"^triton_(poi|red|per|tem|for)_")


def _triton_class(name):
    m = _TRITON.match(name)
    if not m:
        return None
    kind, ops = m.group(1), name[m.end():].lower()
    tokens = set(t for t in re.split(r"[_\d]+", ops) if t)
    if kind == "tem" or tokens & {"mm", "bmm", "addmm", "baddbmm", "matmul", "convolution"}:
        return "matmul"
    if "scaled" in tokens and "dot" in tokens or tokens & {"sdpa", "attention", "flex"}:
        return "attention"
    if "foreach" in tokens or tokens & {"adam", "adamw", "sgd", "adagrad"}:
        return "optimizer"
    if kind == "poi":
        if tokens & {"embedding", "gather", "scatter", "index"}:
            return "indexing"
        return "elementwise"
    return "reduction"  # red, per, for


def classify_name(name):
    """The class of a GPU activity by its name alone (one of CLASSES)."""
    raw = name.strip()
    n = raw.lower()
    if n.startswith("nccl") or "nccl" in n:
        return "communication"
    if n.startswith("memcpy") or n.startswith("memset") or n.startswith("[memcpy") \
            or n.startswith("[memset"):
        return "copy"
    t = _triton_class(raw)
    if t:
        return t
    if _has(n, "flash_fwd", "flash_bwd", "pytorch_flash", "flash::", "fmha", "sdpa",
            "attention", "_attn_", "mha_"):
        return "attention"
    if _has(n, "multi_tensor_apply", "adam", "sgd", "adagrad", "optimizer"):
        return "optimizer"
    if _has(n, "gemm", "gemv", "cutlass", "xmma", "cublas", "nvjet", "splitkreduce", "bmm_",
            "matmul", "_mma", "wgmma", "tensorop", "dot_kernel", "gemmk1", "ger_kernel"):
        return "matmul"
    if _has(n, "indexselect", "index_elementwise", "index_put", "indexing_backward",
            "index_copy", "index_fill", "index_add", "scatter", "gather", "embedding",
            "radixsort", "radix_sort", "devicesegmentedradixsort", "deviceradixsort",
            "devicescan", "scan_", "_scan", "cumsum", "unique", "sort", "topk", "radixselect",
            "radixfindkth", "bincount", "histogram", "repeat_interleave", "compute_grad_weight",
            "sum_and_scatter", "partials_per_segment", "segment_offsets", "masked_scatter",
            "nonzero", "select_if", "deviceselect", "partial_segment", "take_kernel"):
        return "indexing"
    if _has(n, "copy_kernel", "catarraybatchedcopy", "cat_kernel", "direct_copy",
            "fillfunctor", "fill_kernel", "transpose", "copy_device_to_device", "memcpy",
            "memset", "_to_copy", "contiguous"):
        return "copy"
    if _has(n, "reduce_kernel", "reduce", "softmax", "layer_norm", "layernorm", "rmsnorm",
            "rms_norm", "batch_norm", "batchnorm", "group_norm", "welford", "rowwisemoments",
            "cross_entropy", "nll_loss", "norm_kernel", "compute_stats", "moments",
            "devicereduce", "argmax", "argmin", "logsumexp", "cunn_", "gammabeta",
            "computegrad"):
        return "reduction"
    if _has(n, "elementwise", "vectorized", "unrolled", "pointwise", "functor", "dropout",
            "triu_tril", "where_kernel", "masked_fill", "clamp", "gelu", "relu", "sigmoid",
            "tanh", "silu", "distribution", "philox", "arange", "linspace"):
        return "elementwise"
    return "other"


def region_problem(event_name):
    """The problem of a `dlrm_bench::<problem>` region name, or None."""
    if not event_name.startswith(REGION_PREFIX):
        return None
    p = event_name[len(REGION_PREFIX):]
    return p if p in PROBLEMS else None


class _Intervals:
    """Sequence-number intervals (s0, s1, problem): nodes with s0 < seq < s1 belong to it."""

    def __init__(self, intervals):
        self.items = sorted((int(a), int(b), p) for a, b, p in intervals)
        self.starts = [a for a, _, _ in self.items]

    def find(self, seq):
        # One thread's regions do not overlap: only the last interval starting below seq can
        # hold it.
        i = bisect.bisect_left(self.starts, seq) - 1
        if i >= 0 and seq < self.items[i][1]:
            return self.items[i][2]
        return None


def _events(trace):
    if isinstance(trace, dict):
        return trace.get("traceEvents", [])
    return trace


def _is_backward_node(ev):
    args = ev.get("args") or {}
    seq = args.get("Sequence number")
    if seq is None or int(seq) < 0:
        return False
    name = ev.get("name", "")
    fwd = args.get("Fwd thread id")
    return (fwd is not None and int(fwd) > 0) or name.startswith(
        "autograd::engine::evaluate_function") or re.search(r"Backward\d*$", name) is not None


def attribute_trace(trace, intervals=(), backward_of=None):
    """One dict per GPU activity of a Chrome trace (a dict with `traceEvents` or the list):
    name, dur_us, cls (a problem or a class), region (the region it was launched in, or
    `backward:<problem>`, or ''), how ('region', 'backward', 'optimizer step', 'name')."""
    backward_of = BACKWARD_OF if backward_of is None else backward_of
    ivs = _Intervals(intervals)
    gpu, launches, cpu, by_ext = [], {}, {}, {}
    for ev in _events(trace):
        if ev.get("ph") != "X":
            continue
        cat = str(ev.get("cat", "")).lower()
        args = ev.get("args") or {}
        if cat in GPU_CATS:
            gpu.append(ev)
        elif cat in LAUNCH_CATS:
            if "correlation" in args:
                launches[args["correlation"]] = ev
        elif cat in CPU_CATS and "ts" in ev:
            ts, dur = float(ev["ts"]), float(ev.get("dur", 0))
            rec = (ts, ts + dur, ev)
            cpu.setdefault(ev.get("tid"), []).append(rec)
            ext = args.get("External id")
            if ext is not None and cat == "cpu_op":
                by_ext.setdefault(ext, rec)
    # The launch point (thread, time) of every GPU activity.
    queries = {}
    points = []
    for i, ev in enumerate(gpu):
        args = ev.get("args") or {}
        launch = launches.get(args.get("correlation"))
        if launch is not None:  # the launch's thread and time
            points.append((launch.get("tid"), float(launch["ts"]) + float(launch.get("dur", 0)) / 2,
                           i))
            continue
        # Some kineto versions write the correlation id as a GPU activity's External id: only
        # an External id that differs from it, naming an op that began before the activity,
        # is taken for the op's own.
        ext = args.get("External id")
        rec = by_ext.get(ext) if ext is not None and ext != args.get("correlation") else None
        if rec is not None and rec[0] <= float(ev["ts"]):
            points.append((rec[2].get("tid"), (rec[0] + rec[1]) / 2, i))
    # Sweep each thread's CPU events against its launch points: the enclosing events, outermost
    # first.
    by_tid = {}
    for tid, ts, i in points:
        by_tid.setdefault(tid, []).append((ts, i))
    for tid, qs in by_tid.items():
        evs = sorted(cpu.get(tid, []), key=lambda r: (r[0], -r[1]))
        qs.sort()
        active, j = [], 0
        for ts, i in qs:
            while j < len(evs) and evs[j][0] <= ts:
                active.append(evs[j])
                j += 1
            active = [r for r in active if r[1] >= ts]
            queries[i] = [r[2] for r in active]
    out = []
    for i, ev in enumerate(gpu):
        name = ev.get("name", "")
        stack = queries.get(i, [])
        cls, region, how = None, "", "name"
        for e in reversed(stack):  # innermost first
            p = region_problem(e.get("name", ""))
            if p:
                cls, region, how = p, p, "region"
                break
        if cls is None:
            for e in reversed(stack):
                if _is_backward_node(e):
                    p = ivs.find(int(e["args"]["Sequence number"]))
                    if p:
                        region = "backward:" + p
                        if backward_of.get(p):
                            cls, how = backward_of[p], "backward"
                    break
        if cls is None and any(e.get("name", "").startswith(("Optimizer.step#",
                                                             "Optimizer.zero_grad#"))
                               for e in stack):
            cls, how = "optimizer", "optimizer step"
        if cls is None:
            cls = classify_name(name)
        out.append({"name": name, "dur_us": float(ev.get("dur", 0)), "cls": cls,
                    "region": region, "how": how})
    return out


def aggregate(records, steps):
    """Per-step totals: {'total_us', 'shares': {cls: share}, 'rows': [...]} with one row per
    (kernel name, class, region), largest first: name, cls, region, calls (per step), us (per
    step), share."""
    steps = max(1, steps)
    total = sum(r["dur_us"] for r in records)
    shares = {}
    rows = {}
    for r in records:
        shares[r["cls"]] = shares.get(r["cls"], 0.0) + r["dur_us"]
        key = (r["name"], r["cls"], r["region"])
        row = rows.setdefault(key, [0, 0.0])
        row[0] += 1
        row[1] += r["dur_us"]
    denom = total if total > 0 else 1.0
    shares = {k: v / denom for k, v in shares.items()}
    table = [
        {"name": k[0], "cls": k[1], "region": k[2], "calls": c / steps, "us": us / steps,
         "share": us / denom}
        for k, (c, us) in rows.items()
    ]
    table.sort(key=lambda r: (-r["us"], r["name"]))
    return {"total_us": total / steps, "shares": shares, "rows": table}


def coverage(shares):
    """Share of GPU time attributed to a problem or a named class other than `other`."""
    return 1.0 - shares.get("other", 0.0)


def profile_toml(name, description, source, shares, step_ms, gpu_ms, method, kernels_csv):
    """The workload TOML (workloads/README.md): [fractions] for the problems present,
    [classes] for every other class; fractions and classes together make 1 (up to rounding)."""
    def q(s):
        return json.dumps(s)  # JSON string escapes are valid TOML basic-string escapes
    lines = [
        f"name = {q(name)}",
        f"description = {q(description)}",
        f"source = {q(source)}",
        f"step_ms = {step_ms:.4f}",
        f"gpu_ms = {gpu_ms:.4f}",
        f"coverage = {coverage(shares):.4f}",
        f"method = {q(method)}",
        f"kernels_csv = {q(kernels_csv)}",
        "",
        "[fractions]",
    ]
    lines += [f"{p} = {shares[p]:.4f}" for p in PROBLEMS if shares.get(p, 0.0) > 0.0]
    lines += ["", "[classes]"]
    lines += [f"{c} = {shares.get(c, 0.0):.4f}" for c in CLASSES]
    return "\n".join(lines) + "\n"


def kernel_csv(rows):
    """The per-kernel CSV: kernel, class, region, calls_per_step, us_per_step, share."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["kernel", "class", "region", "calls_per_step", "us_per_step", "share"])
    for r in rows:
        w.writerow([r["name"], r["cls"], r["region"], f"{r['calls']:g}", f"{r['us']:.3f}",
                    f"{r['share']:.6f}"])
    return buf.getvalue()


def kernel_list(records):
    """The distinct kernel names of a run as `class<TAB>name` lines (the fixture format of
    tools/fixtures/kernel_names_*.txt), the class being the name rules' (not the region's)."""
    names = sorted(set(r["name"] for r in records))
    return "".join(f"{classify_name(n)}\t{n}\n" for n in names)


def read_kernel_list(text):
    """Parses the fixture format: `class<TAB>name` lines, `#` comments and blank lines
    skipped. Returns [(class, name)]."""
    out = []
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        cls, _, name = line.partition("\t")
        out.append((cls.strip(), name))
    return out
