"""Measures workload profiles for `dlrm-bench project`: a whole model step under torch.profiler,
every GPU kernel, memcpy and memset of it attributed to one of the suite's problems or to a named
class (tools/kernel_classes.py), written as a workload TOML and a per-kernel CSV.

How: the workload (tools/workload_models.py) is built on synthetic data, run --warmup steps,
timed over --steps steps with CUDA events (no profiler: `step_ms`), then run --steps more
steps under torch.profiler (CPU and CUDA activity) and the Chrome trace it exports is parsed:
each GPU activity is tied to the CPU op that launched it through its correlation id (the launch
event's thread and time; kineto's `External id` when there is none), and takes the problem of
an enclosing `record_function("dlrm_bench::<problem>")` region; kernels of the autograd
backward (another thread) take their region by the backward node's sequence number, which the
workload's regions record; everything else goes by name rules. Shares are of the step's GPU
time (the kernels', memcpys' and memsets' durations, per step: `gpu_ms`).

    python3 tools/profile_workload.py --workload dlrm-dlrmv2 --mode train --out-dir DIR
    python3 tools/profile_workload.py --all --out-dir DIR          # every config of ALL_CONFIGS

With --all every config runs in its own process (its own time limit; a failure, an OOM or a
torch.compile error is recorded in DIR/summary.txt and skipped), one after another, within
--budget seconds in all. Per config it writes DIR/NAME.toml, DIR/NAME.kernels.csv,
DIR/NAME.kernels.txt (the distinct kernel names, the fixture format of tools/fixtures/) and
DIR/NAME.log.

This module imports torch only when it profiles: `ALL_CONFIGS`, `config_name`, the argument
parser and the --all driver are importable and tested without it.
"""

import argparse
import datetime
import json
import os
import pathlib
import signal
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import kernel_classes as kc  # noqa: E402

WORKLOAD_NAMES = ("dlrm-dlrmv2", "dcnv2-dlrmv2", "deepfm-criteo", "sasrec-seq256",
                  "twotower-retrieval", "gpt-768x12")
FAMILIES = {"dlrm-dlrmv2": "click-through (DLRM)", "dcnv2-dlrmv2": "click-through (DLRM)",
            "deepfm-criteo": "click-through (FM)", "sasrec-seq256": "sequential",
            "twotower-retrieval": "retrieval", "gpt-768x12": "transformer LM"}

# (workload, mode, compile): eager first, so that the budget drops compiled ones if anything.
ALL_CONFIGS = [
    ("dlrm-dlrmv2", "train", False),
    ("dlrm-dlrmv2", "infer", False),
    ("dcnv2-dlrmv2", "train", False),
    ("deepfm-criteo", "train", False),
    ("sasrec-seq256", "train", False),
    ("sasrec-seq256", "infer", False),
    ("twotower-retrieval", "train", False),
    ("gpt-768x12", "train", False),
    ("dlrm-dlrmv2", "train", True),
    ("gpt-768x12", "train", True),
    ("sasrec-seq256", "train", True),
]


def config_name(workload, mode, compile_):
    return f"{workload}-{mode}-{'compile' if compile_ else 'eager'}"


def parser():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", choices=WORKLOAD_NAMES)
    ap.add_argument("--mode", choices=("train", "infer"), default="train")
    ap.add_argument("--compile", action="store_true",
                    help="torch.compile the dense parts (the GPT step whole)")
    ap.add_argument("--all", action="store_true", help="run every config of ALL_CONFIGS")
    ap.add_argument("--out-dir", type=pathlib.Path, default=pathlib.Path("workloads/measured"))
    ap.add_argument("--name", help="profile name (default: WORKLOAD-MODE-eager|compile)")
    ap.add_argument("--dump-kernels", type=pathlib.Path,
                    help="also write the run's distinct kernel names (class<TAB>name) here")
    ap.add_argument("--keep-trace", action="store_true", help="keep DIR/NAME.trace.json")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--steps", type=int, default=5, help="timed steps, then profiled steps")
    ap.add_argument("--batch", type=int, default=8192, help="samples per step (click-through, "
                    "two-tower)")
    ap.add_argument("--seq-batch", type=int, default=2048, help="sequences per SASRec step")
    ap.add_argument("--items", type=int, default=1_000_000, help="SASRec items")
    ap.add_argument("--cap", type=int, default=4_000_000, help="rows per table at most")
    ap.add_argument("--skew", type=float, default=4.0, help="k in id = floor(u^k * rows)")
    ap.add_argument("--tf32", action="store_true", help="allow TF32 matmuls (default: fp32)")
    ap.add_argument("--timeout", type=float, default=100.0,
                    help="--all: seconds per eager config")
    ap.add_argument("--compile-timeout", type=float, default=170.0,
                    help="--all: seconds per compiled config")
    ap.add_argument("--budget", type=float, default=360.0, help="--all: seconds in all")
    ap.add_argument("--only", help="--all: a comma-separated subset of config names")
    return ap


def child_argv(args, workload, mode, compile_):
    """The command line of one config's own process under --all."""
    argv = [sys.executable, str(HERE / "profile_workload.py"), "--workload", workload,
            "--mode", mode, "--out-dir", str(args.out_dir),
            "--warmup", str(args.warmup), "--steps", str(args.steps),
            "--batch", str(args.batch), "--seq-batch", str(args.seq_batch),
            "--items", str(args.items), "--cap", str(args.cap), "--skew", str(args.skew),
            "--dump-kernels", str(args.out_dir / (config_name(workload, mode, compile_)
                                                  + ".kernels.txt"))]
    if compile_:
        argv.append("--compile")
    if args.tf32:
        argv.append("--tf32")
    if args.keep_trace:
        argv.append("--keep-trace")
    return argv


def run_all(args, run=None, clock=time.monotonic):
    """Runs each config in its own process group within its time limit and the budget; returns
    the summary rows. `run(argv, timeout, log_path) -> (rc, timed_out)` is replaceable (tests)."""
    run = run or _run_child
    args.out_dir.mkdir(parents=True, exist_ok=True)
    configs = ALL_CONFIGS
    if args.only:
        wanted = set(args.only.split(","))
        configs = [c for c in ALL_CONFIGS if config_name(*c) in wanted]
    t0 = clock()
    rows = []
    for workload, mode, compile_ in configs:
        name = config_name(workload, mode, compile_)
        left = args.budget - (clock() - t0)
        limit = min(args.compile_timeout if compile_ else args.timeout, left)
        if limit < 20:
            rows.append({"name": name, "status": "skipped (budget spent)", "seconds": 0.0})
            print(f"[all] {name}: skipped, {left:.0f} s of the budget left", flush=True)
            continue
        print(f"[all] {name}: start (limit {limit:.0f} s)", flush=True)
        start = clock()
        rc, timed_out = run(child_argv(args, workload, mode, compile_), limit,
                            args.out_dir / f"{name}.log")
        secs = clock() - start
        toml = args.out_dir / f"{name}.toml"
        if timed_out:
            status = f"failed: over its {limit:.0f} s limit"
        elif rc != 0:
            status = f"failed: exit {rc} (see {name}.log)"
        elif not toml.is_file():
            status = "failed: no profile written"
        else:
            status = "ok"
        row = {"name": name, "status": status, "seconds": secs}
        if status == "ok":
            row.update(_profile_numbers(toml.read_text()))
        rows.append(row)
        print(f"[all] {name}: {status}, {secs:.1f} s", flush=True)
    text = summary_text(rows, clock() - t0)
    (args.out_dir / "summary.txt").write_text(text)
    (args.out_dir / "summary.json").write_text(json.dumps(rows, indent=1) + "\n")
    print(text, end="")
    return rows


def _profile_numbers(text):
    """step_ms, gpu_ms, coverage and Σf of a profile this tool wrote (its own line format)."""
    out, section, addressable = {}, None, 0.0
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("["):
            section = line.strip("[]")
            continue
        key, eq, value = line.partition(" = ")
        if not eq:
            continue
        if section is None and key in ("step_ms", "gpu_ms", "coverage"):
            out[key] = float(value)
        elif section == "fractions":
            addressable += float(value)
    out["addressable"] = addressable
    return out


def summary_text(rows, total_s):
    lines = [f"{'config':34} {'status':28} {'s':>6} {'step ms':>9} {'gpu ms':>9} "
             f"{'coverage':>8} {'sum f':>7}"]
    for r in rows:
        nums = ""
        if "coverage" in r:
            nums = (f" {r['step_ms']:9.3f} {r['gpu_ms']:9.3f} {100 * r['coverage']:7.2f}% "
                    f"{100 * r['addressable']:6.2f}%")
        lines.append(f"{r['name']:34} {r['status'][:28]:28} {r['seconds']:6.1f}{nums}")
    ok = sum(r["status"] == "ok" for r in rows)
    lines.append(f"{ok} of {len(rows)} configs profiled in {total_s:.0f} s")
    return "\n".join(lines) + "\n"


def _run_child(argv, timeout, log_path):
    with open(log_path, "w") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            return proc.wait(timeout=timeout), False
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # its compile workers too
            proc.wait()
            return proc.returncode, True


def source_options(argv):
    """The command's options less where files went (paths on the measuring machine)."""
    argv, options = list(argv), []
    while argv:
        a = argv.pop(0)
        if a in ("--out-dir", "--dump-kernels"):
            argv = argv[1:]
        elif not a.startswith(("--out-dir=", "--dump-kernels=")):
            options.append(a)
    return " ".join(options) or "(defaults)"


METHOD = (
    "torch.profiler CPU+CUDA activity over the profiled steps, Chrome trace parsed by "
    "tools/kernel_classes.py: each kernel/memcpy/memset tied to its launching CPU op "
    "(correlation id, else External id); inside a dlrm_bench::<problem> record_function region "
    "-> that problem; autograd backward nodes -> their region by sequence number "
    "(dot_interaction's backward -> dot_interaction_backward, other regions' backward by name); "
    "Optimizer.step# -> optimizer; else name rules. Shares of GPU time (sum of activity "
    "durations)")


def profile_one(args):
    import torch
    from torch.profiler import ProfilerActivity, profile

    import workload_models as wm

    if not torch.cuda.is_available():
        print("profile_workload: no CUDA device", file=sys.stderr)
        return 2
    t_start = time.monotonic()
    torch.backends.cuda.matmul.allow_tf32 = args.tf32
    torch.backends.cudnn.allow_tf32 = args.tf32
    train, compile_ = args.mode == "train", args.compile
    name = args.name or config_name(args.workload, args.mode, compile_)
    torch.manual_seed(0)
    regions = wm.Regions()
    w = wm.build(args.workload, args, regions, train, compile_)
    torch.cuda.synchronize()
    t_built = time.monotonic()
    for _ in range(args.warmup):
        w.step()
    torch.cuda.synchronize()
    t_warm = time.monotonic()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(args.steps):
        w.step()
    b.record()
    torch.cuda.synchronize()
    step_ms = a.elapsed_time(b) / args.steps
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(args.steps):
            w.step()
        torch.cuda.synchronize()
    args.out_dir.mkdir(parents=True, exist_ok=True)
    if args.keep_trace:
        trace_path = args.out_dir / f"{name}.trace.json"
    else:
        fd, tmp = tempfile.mkstemp(suffix=".json")
        os.close(fd)
        trace_path = pathlib.Path(tmp)
    prof.export_chrome_trace(str(trace_path))
    trace = json.loads(trace_path.read_text())
    if not args.keep_trace:
        trace_path.unlink()
    records = kc.attribute_trace(trace, regions.intervals)
    if not records:
        print("profile_workload: the trace holds no GPU activity", file=sys.stderr)
        return 3
    agg = kc.aggregate(records, args.steps)
    shares = agg["shares"]
    hows = {}
    for r in records:
        hows[r["how"]] = hows.get(r["how"], 0) + 1
    t_done = time.monotonic()

    gpu = torch.cuda.get_device_name()
    date = datetime.date.today().isoformat()
    description = (f"{w.description}; one {gpu}, PyTorch "
                   f"{'torch.compile (dense parts)' if compile_ else 'eager'}, "
                   f"{'TF32' if args.tf32 else 'fp32 matmuls (no TF32)'} unless bf16 said; "
                   f"mean step {step_ms:.3f} ms, GPU busy {agg['total_us'] / 1000:.3f} ms")
    source = (f"measured by tools/profile_workload.py {source_options(sys.argv[1:])} on {gpu}, "
              f"torch {torch.__version__}, {date}: torch.profiler kernels, memcpys and memsets "
              f"over {args.steps} steps after {args.warmup} warm-up and {args.steps} timed "
              f"steps; shares of GPU time")
    csv_name = f"{name}.kernels.csv"
    text = kc.profile_toml(name, description, source, shares, step_ms,
                           agg["total_us"] / 1000, METHOD, csv_name)
    (args.out_dir / f"{name}.toml").write_text(text)
    (args.out_dir / csv_name).write_text(kc.kernel_csv(agg["rows"]))
    if args.dump_kernels:
        args.dump_kernels.parent.mkdir(parents=True, exist_ok=True)
        args.dump_kernels.write_text(
            f"# {len(set(r['name'] for r in records))} distinct GPU activities of {name}, "
            f"recorded by tools/profile_workload.py on {gpu}, torch {torch.__version__}, "
            f"{date}; the class is the name rules' (kernel_classes.classify_name)\n"
            + kc.kernel_list(records))
    print(text, end="")
    print(f"# attribution: {hows} of {len(records)} activities; "
          f"{len(regions.intervals)} region intervals; "
          f"sequence numbers {'read' if regions.sequence_numbers else 'UNAVAILABLE'}")
    for cls in kc.PROBLEMS + kc.CLASSES:
        if shares.get(cls):
            print(f"#   {cls:40} {100 * shares[cls]:6.2f}%")
    if regions.intervals and hows.get("region", 0) == 0:
        print("# WARNING: regions were recorded but no kernel was attributed to one",
              file=sys.stderr)
    print(f"# {name}: build {t_built - t_start:.1f} s, warm-up {t_warm - t_built:.1f} s, "
          f"timing + profile + attribution {t_done - t_warm:.1f} s, "
          f"total {time.monotonic() - t_start:.1f} s", flush=True)
    return 0


def main(argv=None):
    args = parser().parse_args(argv)
    if args.all:
        rows = run_all(args)
        return 0 if any(r["status"] == "ok" for r in rows) else 1
    if not args.workload:
        parser().error("give --workload NAME or --all")
    return profile_one(args)


if __name__ == "__main__":
    sys.exit(main())
