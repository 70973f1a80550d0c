#!/usr/bin/env python3
"""Evaluate one KernelBench answer (a `ModelNew` class) on DLRM-Bench's own input sets.

`dlrm-bench kernelbench DIR...` runs this once per answer and protocol, each in a fresh process
under a time limit, and turns the result into a record of `results.jsonl` (origin
`kernelbench`, group = the answer's directory). Two protocols:

`--protocol ours` (the suite's verdict and timing):
  - the answer's `ModelNew` against the problem's float64 oracle (tools/torch_peer.py's) on every
    check set of the run: public, secret, edge and special-value sets, each a fresh input;
  - floats by the suite's scale-invariant bounds (relative L2 and max|err|/max|ref| per output
    dtype, passed in the request from the Rust problem specs), integers and copies exactly;
  - the caching allocator is poisoned (its free memory filled with 0xFF bytes, NaN for floats,
    -1 for integers) before every checked call, so an output the answer allocates with
    `torch.empty` and does not write is seen as poison, never as an earlier result;
  - every input is compared bit for bit with a pristine copy after each call (an in-place
    problem's declared in-out inputs excepted: those are the output);
  - timing interleaves the answer with the eager `Model` in this process, pair by pair, L2
    flushed before each call, input sets rotated, the row ids of the bag problems relabeled
    before every pair (Relabeler: the request's `relabel`); the speedup is the median of the
    paired ratios eager/answer with a bootstrap 95% interval; every timed call is checked (on
    relabeled ids against the float64 oracle of those ids), and the outputs of the last timed
    call on each set are rechecked afterwards (a result reused from an earlier call fails there).
  The physical floor (`suspect`) is applied by the Rust side, which knows the problem's work.

`--protocol kernelbench` (what KernelBench's own evaluator would have said, v0.1 settings:
  src/kernelbench/eval.py, eval_kernel_against_ref): seeds set to 42, `Model` and `ModelNew`
  built from get_init_inputs(); 5 correctness trials, each calling `get_inputs()` afresh (here:
  the public set 0 file), running the reference first, then the answer on the same inputs, then
  a shape check and `torch.allclose(atol=rtol=1e-2)` (per tensor for tuple outputs); timing by
  CUDA events, 3 warm-up and 100 timed calls of each, L2 cleared before each, the speedup as the
  ratio of the means. Nothing else: no poison, no input fingerprint, no fresh inputs per call.

The runner drives it as a server, `--serve` (one per device, in the sandbox): torch is imported
once, CUDA never initialised in the server; each job (one protocol on one answer, one JSON line on
stdin) runs in a forked child in a fresh scratch directory and ends with it, answered by one line
on stdout (see serve()). Before that, `--compile ANSWER --build-dir DIR --out RESULT.json` imports
each answer with the GPU hidden, building its `load_inline` extensions into DIR (the runner runs
as many at a time as there are cores, and keeps the builds by hash); a job then loads those
builds instead of compiling (use_builds()). `--protocol import` only imports the answer.

One job by hand: kernelbench_eval.py --request REQUEST.json --protocol ours|kernelbench --out RESULT.json
The request (written by the runner):
  {"problem": "embedding_bag_sum", "answer": "DIR/01_embedding_bag_sum.py",
   "check_sets": [{"label": "public-0", "path": "..."}...], "time_sets": ["..."],
   "bounds": {"float32": [1e-5, 1e-4], ...}, "update_bounds": [1e-4, 1e-3],
   "min_pairs": 10, "max_pairs": 200, "target_half_width": 0.01, "budget_s": 20, "warmup": 3,
   "warm_l2": false, "seed": 1, "kernelbench_set": "..."}
The result: {"ok": true, "result": {...}} or {"ok": false, "error": "..."}; exit 0 either way
(an answer's failure is a result, not this tool's). The pure logic (verdicts, statistics and the
call order of both protocols) takes its tensor operations from an `ops` object, so that
tools/test_kernelbench_eval.py checks it on the CPU with a fake model and no torch.
"""

import argparse
import importlib.util
import json
import math
import os
import random
import sys
import time
import traceback

TOOLS_DIR = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, TOOLS_DIR)
# torch_peer imports torch only inside its functions: its helpers are usable without torch.
from torch_peer import json_safe, percentile  # noqa: E402

# KernelBench v0.1: `torch.allclose(output, output_new, atol=1e-02, rtol=1e-02)`, 5 correctness
# trials (scripts/eval_from_generations.py), 100 timed trials after 3 warm-up calls (timing.py).
KB_ATOL = 1e-2
KB_RTOL = 1e-2
KB_TRIALS = 5
KB_PERF_TRIALS = 100
KB_WARMUP = 3
KB_SEED = 42


# ---------------------------------------------------------------------------------------------
# Pure logic: no torch here.
# ---------------------------------------------------------------------------------------------

def float_verdict(stats, bounds):
    """The suite's verdict on one float output from its comparison with the oracle: `stats` has
    elements, poisoned (elements still holding the poison bytes), non_finite (NaN/inf where
    the oracle is finite, or the other way round), rel_l2 and max_scaled; `bounds` is
    (rel_l2 bound, max_scaled bound). Returns (passed, reason)."""
    n = stats["elements"]
    if stats["poisoned"] > 0:
        return False, (f"{stats['poisoned']} of {n} elements still hold the poison the "
                       "allocator was filled with (never written)")
    if stats["non_finite"] > 0:
        return False, (f"{stats['non_finite']} of {n} elements are NaN or infinite where the "
                       "oracle's are not, or finite where the oracle's are not")
    rel, scaled = stats["rel_l2"], stats["max_scaled"]
    if not (rel <= bounds[0] and scaled <= bounds[1]):
        return False, (f"error too large: relative L2 {rel:.3e} (bound {bounds[0]:.0e}), "
                       f"max/|ref|inf {scaled:.3e} (bound {bounds[1]:.0e})")
    return True, ""


def exact_verdict(mismatch_share, poisoned, elements):
    """The verdict on an output that must equal its reference exactly (integers, copies)."""
    if poisoned > 0:
        return False, (f"{poisoned} of {elements} elements still hold the poison (never "
                       "written)")
    if mismatch_share > 0:
        return False, f"{mismatch_share:.3%} of the elements differ from the exact result"
    return True, ""


def signature_verdict(got, expected):
    """(passed, reason) for an answer's outputs against the Model's, each a list of dtype names
    (a non-tensor output by its type): as many outputs, each of the Model's dtype. An int32
    output where the Model returns int64 holds the same values in half the bytes: not the
    Model's output."""
    if len(got) != len(expected):
        return False, f"{len(got)} output(s), the Model returns {len(expected)}"
    for j, (g, e) in enumerate(zip(got, expected)):
        if g != e:
            return False, f"output {j} is {g}, the Model's is {e}"
    return True, ""


def affine_bijection(bound, rng):
    """(a, b) of r -> (a*r + b) mod bound, a coprime to bound (not 1 unless none other is):
    a bijection of 0..bound drawn from `rng`."""
    b = rng.randrange(bound)
    for _ in range(64):
        a = 2 + rng.randrange(max(bound - 2, 1))
        if a < bound and math.gcd(a, bound) == 1:
            return a, b
    return 1, b


class Relabeler:
    """Fresh row ids for every timed pair (the bag problems' `indices`, named by the request's
    `relabel` with their bound): before a pair, set s's ids are rewritten from a kept copy of
    the originals by a bijection drawn for that pair, so a result kept from an earlier call (a
    memo keyed by the input's address or contents) is wrong for the next, while the workload
    (which rows are hot, how long the bags are) stays as generated. Tensor operations come from
    `torch`; positions and bounds from `relabels` [(input position, bound)]."""

    def __init__(self, torch, sets, relabels, rng):
        self.torch, self.sets, self.relabels, self.rng = torch, sets, relabels, rng
        self.originals, self.expected = {}, {}

    def begin(self, s):
        """Relabels set s for a new pair; whether anything was relabeled."""
        torch = self.torch
        for pos, bound in self.relabels:
            t = self.sets[s][pos]
            if (s, pos) not in self.originals:
                self.originals[(s, pos)] = t.clone()
            orig = self.originals[(s, pos)]
            a, b = affine_bijection(bound, self.rng)
            t.copy_(((orig.to(torch.int64) * a + b) % bound).to(orig.dtype))
            self.expected[(s, pos)] = t.clone()
        return bool(self.relabels)

    def changed(self, s):
        """Relabeled inputs of set s that no longer hold this pair's ids (the answer wrote
        them), each put back."""
        names = []
        for (k, pos), want in self.expected.items():
            if k == s and not self.torch.equal(self.sets[s][pos], want):
                names.append(f"#{pos} (relabeled row ids)")
                self.sets[s][pos].copy_(want)
        return names

    def restore(self, s):
        """The original ids back in set s."""
        for (k, pos), orig in self.originals.items():
            if k == s:
                self.sets[s][pos].copy_(orig)


def relabel_positions(kb, req):
    """[(input position, bound)] of the request's `relabel` inputs, by the KernelBench file's
    INPUT_NAMES (an input the file does not name, or a bound under 2, is left alone)."""
    names = list(getattr(kb, "INPUT_NAMES", ()))
    out = []
    for r in req.get("relabel", []):
        name, bound = r.get("name"), int(r.get("bound", 0))
        if name in names and bound >= 2:
            out.append((names.index(name), bound))
    return out


def median(vals):
    return percentile(sorted(vals), 50)


def paired_speedup(baseline_ms, answer_ms, seed, resamples=2000):
    """The median of the paired ratios baseline/answer with its bootstrap 95% interval (pairs
    resampled with replacement, `resamples` times, from `seed`)."""
    if len(baseline_ms) != len(answer_ms) or not baseline_ms:
        raise ValueError("paired_speedup needs as many baseline times as answer times, >= 1")
    ratios = [b / a for b, a in zip(baseline_ms, answer_ms)]
    rng = random.Random(seed)
    medians = sorted(median([rng.choice(ratios) for _ in ratios]) for _ in range(resamples))
    return {"median": median(ratios), "ci_low": percentile(medians, 2.5),
            "ci_high": percentile(medians, 97.5), "pairs": len(ratios)}


def timing_summary(ms):
    s = sorted(ms)
    return {"median_ms": median(s), "p10_ms": percentile(s, 10), "p90_ms": percentile(s, 90),
            "mean_ms": sum(s) / len(s), "samples": len(s)}


def interleaved_pairs(time_eager, time_answer, n_sets, min_pairs, max_pairs, budget_s,
                      target_half_width, clock=time.perf_counter):
    """Pairs of (eager ms, answer ms), pair i on set i % n_sets, the order inside a pair
    alternating (eager first on even pairs): at least `min_pairs`, then until the median
    ratio's rough 95% half-width (from the pairs' spread) is below `target_half_width` of it,
    `max_pairs` are taken or `budget_s` has passed."""
    eager, answer = [], []
    started = clock()
    for i in range(max_pairs):
        k = i % n_sets
        if i % 2 == 0:
            e = time_eager(k)
            a = time_answer(k)
        else:
            a = time_answer(k)
            e = time_eager(k)
        eager.append(e)
        answer.append(a)
        if len(eager) >= min_pairs:
            ratios = sorted(x / y for x, y in zip(eager, answer))
            mid = percentile(ratios, 50)
            spread = percentile(ratios, 75) - percentile(ratios, 25)
            half = 1.58 * spread / math.sqrt(len(ratios))  # the notch of a box plot
            if half <= target_half_width * mid or clock() - started > budget_s:
                break
    return eager, answer


# How much longer than eager's the device may stay busy after a timed call's end event (median
# over the calls): a floor for the host's clock noise, and a share of the answer's own time.
HIDDEN_FLOOR_MS = 0.1
HIDDEN_SHARE = 0.25


def hidden_work_verdict(answer_ms, answer_wall_ms, eager_ms, eager_wall_ms):
    """(passed, reason, figures): whether an answer left work outside its timed region. Each
    timed call is bracketed twice: by CUDA events on the current stream (the time credited)
    and, on the host's clock, from an idle device to a device-wide synchronize. Kernels the
    answer starts on a stream of its own run past its end event, so its host span exceeds its
    event span by more than eager's does (which is the launch and synchronize latency alone).
    The answer's excess (medians of wall - event, answer's less eager's) must stay under
    max(HIDDEN_FLOOR_MS, HIDDEN_SHARE x its median event time)."""
    if not answer_ms or not eager_ms:
        return True, "", {}
    gap_answer = median([w - e for e, w in zip(answer_ms, answer_wall_ms)])
    gap_eager = median([w - e for e, w in zip(eager_ms, eager_wall_ms)])
    excess = gap_answer - gap_eager
    bound = max(HIDDEN_FLOOR_MS, HIDDEN_SHARE * median(answer_ms))
    figures = {"answer_gap_ms": gap_answer, "eager_gap_ms": gap_eager, "bound_ms": bound}
    if excess > bound:
        return False, (f"the device stayed busy {gap_answer:.3f} ms (median) past the end of the "
                       f"answer's timed calls, {excess:.3f} ms more than after eager's (bound "
                       f"{bound:.3f} ms): work on another stream runs outside the CUDA events "
                       "that time it"), figures
    return True, "", figures


def judge_sets(call, check, sets, restore_inputs, inputs_changed, poison, skip=()):
    """Our check over the check sets but those in `skip` (the timing's, which the answer
    first meets in a timed call), in order: for set k, put its in-out inputs back, poison
    the allocator, call the answer, judge its output (`check(k, out)` -> (passed, reason))
    and compare the inputs with their pristine copies (`inputs_changed(k)` -> names). The first
    failure ends it. Returns (passed, message, per-set list)."""
    per_set = []
    for k, label in enumerate(sets):
        if k in skip:
            continue
        restore_inputs(k)
        poison()
        out = call(k)
        passed, reason = check(k, out)
        changed = inputs_changed(k)
        if passed and changed:
            passed, reason = False, (f"the answer changed its input(s) {', '.join(changed)} "
                                     f"(compared bit for bit with a copy taken before)")
        per_set.append({"set": label, "passed": passed, "reason": reason})
        if not passed:
            return False, f"{label}: {reason}", per_set
    return True, "", per_set


def kernelbench_trials(model, model_new, get_inputs, set_seed, sync, compare, trials=KB_TRIALS,
                       seed=KB_SEED):
    """KernelBench's run_and_check_correctness: `trials` trials, each with fresh
    get_inputs() (seeded), the reference run first, then the answer on the same inputs, then
    `compare(output, output_new)` -> (passed, max_abs_diff or None, reason). Returns a dict with
    passed, passed_trials, trials, max_abs_diff and message; an exception in the answer ends it
    as KernelBench does (a runtime error)."""
    rng = random.Random(seed)
    seeds = [rng.randrange(2 ** 32 - 1) for _ in range(trials)]
    passed_trials, worst, message = 0, None, ""
    for t in range(trials):
        set_seed(seeds[t])
        inputs = get_inputs()
        output = model(*inputs)
        sync()
        try:
            output_new = model_new(*inputs)
            sync()
        except Exception as e:  # noqa: BLE001 - KernelBench records any exception
            return {"passed": False, "passed_trials": passed_trials, "trials": trials,
                    "max_abs_diff": worst, "message": f"runtime error in trial {t}: "
                                                      f"{type(e).__name__}: {e}"}
        try:
            ok, diff, reason = compare(output, output_new)
        except Exception as e:  # noqa: BLE001 - e.g. a dtype allclose refuses
            ok, diff, reason = False, None, f"{type(e).__name__}: {e}"
        if diff is not None:
            worst = diff if worst is None else max(worst, diff)
        if ok:
            passed_trials += 1
        elif not message:
            message = f"trial {t}: {reason}"
    return {"passed": passed_trials == trials, "passed_trials": passed_trials, "trials": trials,
            "max_abs_diff": worst, "message": message}


# ---------------------------------------------------------------------------------------------
# The torch side.
# ---------------------------------------------------------------------------------------------

class AnswerError(Exception):
    """The answer failed in a way that is its verdict: status and message."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


def torch_peer():
    import torch_peer as tp  # tools/ is on sys.path (above)

    return tp


def load_answer(path):
    """The answer file's module (importing it compiles its load_inline kernels)."""
    if not os.path.isfile(path):
        raise AnswerError("compile_error", f"{path}: no such answer file")
    spec = importlib.util.spec_from_file_location("dlrm_bench_answer", path)
    mod = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(mod)
    except OSError as e:
        # What the sandbox refused (a socket, a write outside its directory, a process past
        # the limit) or another fault of the running answer: not a compiler's verdict.
        raise AnswerError("runtime_error", f"{path}: importing the answer failed: "
                          f"{type(e).__name__}: {e}") from e
    except Exception as e:  # noqa: BLE001 - any failure to import is the answer's
        raise AnswerError("compile_error", f"{path}: importing the answer failed: "
                          f"{type(e).__name__}: {e}") from e
    if not hasattr(mod, "ModelNew"):
        raise AnswerError("compile_error", f"{path}: defines no `ModelNew` class")
    return mod


def as_tuple(x):
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def plain_output_problem(torch, out):
    """Why `out` is not what a Model returns — a plain tensor, or an exact tuple or list of
    plain tensors, none with attributes of its own — or "" when it is. Our checks read the
    output after the timed call: a tuple subclass could compute its items only then (its work
    outside the timed region), a tensor subclass or an instance attribute (`out.double = ...`)
    could answer the checks' methods as it likes."""
    # torch's own named tuples (`torch.return_types.sort`, ...) are built in C: as good as a
    # tuple.
    kind = type(out)
    named = getattr(getattr(torch, "return_types", None), kind.__name__, None) is kind
    sequence = kind in (tuple, list) or (named and isinstance(out, tuple))
    items = tuple(out) if sequence else (out,)
    for j, o in enumerate(items):
        if type(o) is not torch.Tensor:
            kind = type(o)
            return (f"output {j} is a {kind.__module__}.{kind.__qualname__}, not a torch.Tensor "
                    "(in a plain tuple or list); subclasses are not taken")
        if vars(o):
            names = ", ".join(sorted(vars(o)))[:200]
            return f"output {j} carries attributes of its own ({names})"
    return ""


POISON_BYTE = 0xFF


class TorchOps:
    """Tensor operations of our protocol on CUDA."""

    def __init__(self, torch):
        self.torch = torch

    def poison_allocator(self, sizes):
        """Fills free memory the caching allocator will hand out next with POISON_BYTE: one
        block of each expected output size (best fit returns it for the same request) and a
        few smaller and larger blocks, all freed again (kept in the cache)."""
        torch = self.torch
        blocks = []
        # Each size twice: a freed block of the same size (an earlier output) is poisoned too.
        for nbytes in sorted(set(sizes)) * 2 + [1 << 10, 1 << 16, 1 << 20, 1 << 26]:
            t = torch.empty(max(nbytes, 1), dtype=torch.uint8, device="cuda")
            t.fill_(POISON_BYTE)
            blocks.append(t)
        torch.cuda.synchronize()
        del blocks

    def poisoned(self, t, where=None):
        """Elements of `t` whose bytes are all POISON_BYTE (only where the bool tensor `where`
        holds, when given: a float poison is a NaN, which the oracle may expect)."""
        torch = self.torch
        if t.numel() == 0:
            return 0
        raw = t.contiguous().view(torch.uint8).view(t.numel(), t.element_size())
        hit = (raw == POISON_BYTE).all(dim=1)
        if where is not None:
            hit &= where.reshape(-1).to(hit.device)
        return int(hit.sum().item())

    def float_stats(self, out, ref):
        torch = self.torch
        o = out.to(torch.float64)
        r = ref.to(device=out.device, dtype=torch.float64)
        finite_o, finite_r = torch.isfinite(o), torch.isfinite(r)
        both = finite_o & finite_r
        non_finite = int((finite_o != finite_r).sum().item())
        # Non-finite on both sides must agree in kind (NaN with NaN, +inf with +inf).
        neither = ~finite_o & ~finite_r
        if bool(neither.any()):
            on, rn = o[neither], r[neither]
            non_finite += int((~((on.isnan() & rn.isnan()) | (on == rn))).sum().item())
        diff = torch.where(both, o - r, torch.zeros_like(o))
        rz = torch.where(both, r, torch.zeros_like(r))
        num = torch.linalg.vector_norm(diff).item()
        den = torch.linalg.vector_norm(rz).item()
        ref_max = rz.abs().max().item() if rz.numel() else 0.0
        err_max = diff.abs().max().item() if diff.numel() else 0.0
        rel = 0.0 if num == 0.0 else (num / den if den > 0 else float("inf"))
        scaled = 0.0 if err_max == 0.0 else (err_max / ref_max if ref_max > 0 else float("inf"))
        return {"elements": out.numel(), "poisoned": self.poisoned(out, where=~r.isnan()),
                "non_finite": non_finite, "rel_l2": rel, "max_scaled": scaled}


def dtype_name(torch, dtype):
    return {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16",
            torch.float64: "float64"}.get(dtype, str(dtype))


# The description of the sets the server's holder keeps on the device (set_holder), for the
# job a child forked now runs; None: the child loads its sets itself.
HELD = [None]


def load_sets(tp, kb, paths):
    """The input sets at `paths` on the device: cloned from the server's holder where it holds
    them (set_holder.take), else read through the problem's KernelBench file (tables the sets
    share loaded once)."""
    if HELD[0] is not None:
        import set_holder
        import torch

        try:
            got = set_holder.take(torch, HELD[0], paths)
        except Exception as e:  # noqa: BLE001 - the sets are read from the cache instead
            print(f"kernelbench_eval: the held sets could not be taken ({type(e).__name__}: {e}); "
                  "reading them", file=sys.stderr)
            got = None
        # Not left where the answer finds them at once (the holder's check after the job is
        # what holds against an answer that digs them out of memory).
        HELD[0] = None
        if got is not None:
            return got
    return read_sets(tp, kb, paths)


def read_sets(tp, kb, paths):
    """The sets at `paths` read from the input cache onto the device through the problem's
    KernelBench file, the tables they share loaded once."""
    shared = {}
    return [tp.load_set(kb, p, shared) for p in paths]


def load_for_holder(problem, paths):
    """In the holder (set_holder.holder_main): the sets as a job loads them without it."""
    tp = torch_peer()
    tp.import_torch_cuda()
    return read_sets(tp, tp.import_kernelbench(tp.find_kernelbench_file(problem), problem), paths)


def evaluate_ours(req):
    stages = {}
    started = time.perf_counter()
    tp = torch_peer()
    torch = tp.import_torch_cuda()
    stages["cuda_init"] = time.perf_counter() - started
    problem = req["problem"]
    spec = tp.PROBLEMS[problem]
    started = time.perf_counter()
    kb = tp.import_kernelbench(tp.find_kernelbench_file(problem), problem)
    labels = [s["label"] for s in req["check_sets"]]
    sets = load_sets(tp, kb, [s["path"] for s in req["check_sets"]])
    time_paths = [os.path.abspath(p) for p in req["time_sets"]]
    check_paths = [os.path.abspath(s["path"]) for s in req["check_sets"]]
    time_idx = [check_paths.index(p) for p in time_paths]
    inout = spec.get("inout", ())
    # Pristine copies of every distinct input tensor (sets share their tables).
    pristine = {}
    for s in sets:
        for t in s:
            if hasattr(t, "clone") and id(t) not in pristine:
                pristine[id(t)] = (t, t.clone())
    torch.cuda.synchronize()
    stages["load"] = time.perf_counter() - started

    started = time.perf_counter()
    ops = TorchOps(torch)
    oracles = []
    with torch.inference_mode():
        for s in sets:
            oracles.append(spec["oracle_f64"](s) if "oracle_f64" in spec else None)
    stages["oracle"] = time.perf_counter() - started

    started = time.perf_counter()
    answer = load_answer(req["answer"])
    stages["compile"] = time.perf_counter() - started
    try:
        model_new = answer.ModelNew(*kb.get_init_inputs()).cuda().eval()
    except Exception as e:  # noqa: BLE001
        raise AnswerError("runtime_error", f"ModelNew(*get_init_inputs()) failed: "
                          f"{type(e).__name__}: {e}") from e
    model = kb.Model(*kb.get_init_inputs()).cuda().eval()

    def restore_inputs(k):
        for i in inout:
            sets[k][i].copy_(pristine[id(sets[k][i])][1])

    def raw(t):
        return t.reshape(-1).view(torch.uint8) if t.numel() else t

    def inputs_changed(k):
        changed = []
        for i, t in enumerate(sets[k]):
            if i in inout or not hasattr(t, "clone"):
                continue
            copy = pristine[id(t)][1]
            if not torch.equal(raw(t), raw(copy)):
                changed.append(f"#{i} {list(t.shape)} {dtype_name(torch, t.dtype)}")
                t.copy_(copy)
        return changed

    def call(k):
        try:
            out = model_new(*sets[k])
            torch.cuda.synchronize()
            return out
        except Exception as e:  # noqa: BLE001
            raise AnswerError("runtime_error", f"{labels[k]}: the answer raised "
                              f"{type(e).__name__}: {e}") from e

    def signature(out):
        return [dtype_name(torch, o.dtype) if hasattr(o, "dtype") else type(o).__name__
                for o in as_tuple(out)]

    def check(k, out, relabeled=None):
        """Against set k's oracle; for a timed call on relabeled ids (`relabeled`: the oracle
        of those, or True for a problem checked without one) against the inputs as they are,
        the in-out ones as they were before the call."""
        reason = plain_output_problem(torch, out)
        if reason:
            return False, reason
        outs = as_tuple(out)
        passed, reason = signature_verdict(signature(out), expected_signature)
        if not passed:
            return False, reason
        if relabeled is None:
            initial = [pristine[id(t)][1] if hasattr(t, "clone") else t for t in sets[k]]
        else:
            initial = [pristine[id(t)][1] if i in inout else t for i, t in enumerate(sets[k])]
        if "error" in spec:
            # Exact outputs (integers, copies) and the in-place update: the share of elements
            # that differ, or the update's relative L2 error.
            poisoned = sum(ops.poisoned(o) for o in outs if hasattr(o, "numel"))
            elements = sum(o.numel() for o in outs if hasattr(o, "numel"))
            try:
                err = spec["error"](out, initial)
            except Exception as e:  # noqa: BLE001 - a malformed output
                return False, f"the output could not be compared: {type(e).__name__}: {e}"
            if "inout" in spec:
                if poisoned:
                    return False, f"{poisoned} of {elements} elements hold the poison"
                bound = req["update_bounds"][0]
                if not (err <= bound):
                    return False, (f"the update is off: relative L2 {err:.3e} (bound "
                                   f"{bound:.0e}), or a row that no lookup names changed")
                return True, ""
            return exact_verdict(err, poisoned, elements)
        refs = as_tuple(oracles[k] if relabeled is None else relabeled)
        if len(outs) != len(refs):
            return False, f"{len(outs)} output(s), the Model returns {len(refs)}"
        for j, (o, r) in enumerate(zip(outs, refs)):
            if not hasattr(o, "shape") or tuple(o.shape) != tuple(r.shape):
                return False, (f"output {j} has shape {list(getattr(o, 'shape', []))}, "
                               f"the Model's is {list(r.shape)}")
            name = dtype_name(torch, o.dtype)
            if name not in req["bounds"]:
                return False, f"output {j} is {name}; the Model's outputs are " \
                              f"{sorted(req['bounds'])}"
            passed, reason = float_verdict(ops.float_stats(o, r), req["bounds"][name])
            if not passed:
                return False, f"output {j}: {reason}"
        return True, ""

    sizes = []
    with torch.inference_mode():
        # Expected output sizes for the poison blocks: from the eager Model on set 0.
        restore_inputs(0)
        eager_out = model(*sets[0])
        sizes = [o.numel() * o.element_size() for o in as_tuple(eager_out) if hasattr(o, "numel")]
        expected_signature = signature(eager_out)
        del eager_out
        restore_inputs(0)
        torch.cuda.synchronize()
        started = time.perf_counter()
        passed, message, per_set = judge_sets(call, check, labels, restore_inputs,
                                              inputs_changed, lambda: ops.poison_allocator(sizes),
                                              skip=set(time_idx))
        stages["check"] = time.perf_counter() - started
        result = {"protocol": "ours", "status": "correct" if passed else "incorrect",
                  "message": message, "checks": per_set, "stages_s": stages}
        if not passed:
            return result

        started = time.perf_counter()
        flush = None if req["warm_l2"] else torch.empty(tp.L2_FLUSH_BYTES, dtype=torch.uint8,
                                                        device="cuda")
        last_out = {}
        timed_calls = [0]
        relabeler = Relabeler(torch, sets, relabel_positions(kb, req),
                              random.Random(int.from_bytes(os.urandom(8), "little")))
        # Per timing set, the oracle of its current (relabeled) ids, True where the problem is
        # checked without one; absent for a set never relabeled.
        pair = {"calls": 0, "oracle": {}}

        def begin(k):
            # The first call of each pair relabels its set, outside the timed region.
            if pair["calls"] % 2 == 0 and relabeler.begin(time_idx[k]):
                s_k = time_idx[k]
                pair["oracle"][s_k] = spec["oracle_f64"](sets[s_k]) if "oracle_f64" in spec \
                    else True
            pair["calls"] += 1

        # Each side's (event ms, host ms) per timed call, for hidden_work_verdict.
        spans = {"eager": [], "answer": []}

        def timed(fn, k, side):
            begin(k)
            restore_inputs(time_idx[k])
            if flush is not None:
                flush.zero_()
            a = torch.cuda.Event(enable_timing=True)
            b = torch.cuda.Event(enable_timing=True)
            # From an idle device: the host's span then covers all the call's work, on any
            # stream, up to the device-wide synchronize.
            torch.cuda.synchronize()
            started = time.perf_counter()
            a.record()
            out = fn(*sets[time_idx[k]])
            b.record()
            torch.cuda.synchronize()
            wall = (time.perf_counter() - started) * 1000.0
            ms = a.elapsed_time(b)
            spans[side].append((ms, wall))
            return ms, out

        def time_eager(k):
            return timed(model, k, "eager")[0]

        def time_answer(k):
            try:
                ms, out = timed(model_new, k, "answer")
            except Exception as e:  # noqa: BLE001
                raise AnswerError("runtime_error", f"while timing: {type(e).__name__}: "
                                  f"{e}") from e
            # Every timed call is checked (outside the timed region): the timing's sets are
            # ones no check showed the answer, so a result kept from an earlier call fails.
            timed_calls[0] += 1
            ok, reason = check(time_idx[k], out, pair["oracle"].get(time_idx[k]))
            if not ok:
                raise AnswerError("incorrect", f"timed call {timed_calls[0]} on "
                                  f"{labels[time_idx[k]]}: {reason} (every timed call is "
                                  "checked)")
            # An in-place problem's outputs are its inputs, which the next call puts back:
            # recheck a copy (taken outside the timed region).
            last_out[k] = tuple(o.clone() for o in as_tuple(out)) if inout else out
            return ms

        for i in range(req["warmup"]):
            time_eager(i % len(time_idx))
            time_answer(i % len(time_idx))
        last_out.clear()
        spans["eager"].clear()
        spans["answer"].clear()
        eager, ans = interleaved_pairs(time_eager, time_answer, len(time_idx),
                                       req["min_pairs"], req["max_pairs"], req["budget_s"],
                                       req["target_half_width"])
        stages["time"] = time.perf_counter() - started
        passed, reason, hidden = hidden_work_verdict(
            [m for m, _ in spans["answer"]], [w for _, w in spans["answer"]],
            [m for m, _ in spans["eager"]], [w for _, w in spans["eager"]])
        result["hidden_work"] = hidden
        if not passed:
            result["status"] = "incorrect"
            result["message"] = reason
            return result
        result["timing"] = timing_summary(ans)
        result["eager_timing"] = timing_summary(eager)
        result["speedup_eager"] = paired_speedup(eager, ans, req["seed"])
        result["timed_runs_checked"] = timed_calls[0]
        result["answer_ms"] = ans
        result["eager_ms"] = eager
        # Recheck: the outputs of the last timed call on each rotated set.
        started = time.perf_counter()
        for k, out in sorted(last_out.items()):
            set_k = time_idx[k]
            ok, reason = check(set_k, out, pair["oracle"].get(set_k))
            changed = relabeler.changed(set_k)
            relabeler.restore(set_k)
            changed += inputs_changed(set_k)
            if ok and changed:
                ok, reason = False, f"the answer changed its input(s) {', '.join(changed)}"
            if not ok:
                result["status"] = "incorrect"
                result["message"] = (f"recheck of the timed outputs on {labels[set_k]}: "
                                     f"{reason} (the output of a timed call must still hold "
                                     "its result after later calls)")
                break
        stages["recheck"] = time.perf_counter() - started
    return result


def kernelbench_setup(req, stages):
    """What both KernelBench jobs need, in the child: torch with CUDA, the problem's Model file,
    its `get_inputs()` on the run's public set 0 and the eager Model built as KernelBench
    builds it (seeded). Returns (torch, kb, model, init, get_inputs, set_seed)."""
    started = time.perf_counter()
    tp = torch_peer()
    torch = tp.import_torch_cuda()
    stages["cuda_init"] = time.perf_counter() - started
    started = time.perf_counter()
    problem = req["problem"]
    kb = tp.import_kernelbench(tp.find_kernelbench_file(problem), problem)
    loaded = load_sets(tp, kb, [req["kernelbench_set"]])[0]

    def get_inputs():
        # The Model file's get_inputs() on the run's public set 0, through torch_peer.load_set
        # (which also fetches the tables the set file shares), read once before: every call gets
        # fresh copies, as a fresh get_inputs() would be (an answer that writes its inputs
        # changes no later trial), without reading gigabytes from disk six times. The pristine
        # copy stays on the device and each call clones it there: a copy from host memory cost
        # about 0.9 s per trial for a 4.3 GB table (H100, 20261205T134747Z), a clone on the
        # device a few milliseconds; the price is one more copy of the set in device memory.
        copies = {}
        out = []
        for t in loaded:
            if not hasattr(t, "clone"):
                out.append(t)
            else:
                if id(t) not in copies:
                    copies[id(t)] = t.clone()
                out.append(copies[id(t)])
        return out

    torch.cuda.synchronize()

    def set_seed(seed):
        torch.manual_seed(seed)
        torch.cuda.manual_seed(seed)

    set_seed(KB_SEED)
    init = kb.get_init_inputs()
    with torch.no_grad():
        set_seed(KB_SEED)
        model = kb.Model(*init).cuda()
    stages["load"] = time.perf_counter() - started
    return torch, kb, model, init, get_inputs, set_seed


def kernelbench_mean_ms(torch, fn, inputs):
    """KernelBench's timing of `fn(*inputs)`: KB_WARMUP calls, then the mean of KB_PERF_TRIALS
    calls each timed by CUDA events, the L2 flushed before each (its clear_l2_cache)."""
    dummy = torch.empty((32, 1024, 1024), dtype=torch.int64, device="cuda")
    for _ in range(KB_WARMUP):
        fn(*inputs)
    torch.cuda.synchronize()
    times = []
    for _ in range(KB_PERF_TRIALS):
        dummy.fill_(0)
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        fn(*inputs)
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b))
    return sum(times) / len(times)


def usable_baseline(value):
    """A baseline the runner passed (`kernelbench_eager_ms`): a finite positive number, or None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) and value > 0 else None


def kernelbench_timing(time_ms, model_new, model, baseline_ms):
    """KernelBench's speedup: the answer timed by `time_ms`, over the eager Model's time — the
    problem's baseline measured once in a job of its own (`kernelbench_eager`) where the runner
    passed one, as KernelBench compares against a baseline measured apart, else the Model timed
    here after the answer."""
    runtime = time_ms(model_new)
    baseline = usable_baseline(baseline_ms)
    ref = baseline if baseline is not None else time_ms(model)
    return {"runtime_ms": runtime, "ref_runtime_ms": ref, "speedup": ref / runtime,
            "ref_runtime_source": "baseline" if baseline is not None else "this job"}


def evaluate_kernelbench_eager(req):
    """KernelBench's baseline for one problem: the eager Model timed as `evaluate_kernelbench`
    times an answer, in a child that imports no answer (so once per problem, not once per
    answer)."""
    stages = {}
    torch, _kb, model, _init, get_inputs, set_seed = kernelbench_setup(req, stages)
    started = time.perf_counter()
    with torch.no_grad():
        set_seed(KB_SEED)
        ms = kernelbench_mean_ms(torch, model, get_inputs())
    stages["time"] = time.perf_counter() - started
    return {"protocol": "kernelbench_eager", "ref_runtime_ms": ms, "stages_s": stages}


def evaluate_kernelbench(req):
    stages = {}
    torch, kb, model, init, get_inputs, set_seed = kernelbench_setup(req, stages)
    result = {"protocol": "kernelbench", "atol": KB_ATOL, "rtol": KB_RTOL, "compiled": False,
              "passed": False, "stages_s": stages}
    started = time.perf_counter()
    try:
        answer = load_answer(req["answer"])
    except AnswerError as e:
        result["message"] = str(e)
        return result
    finally:
        stages["compile"] = time.perf_counter() - started
    result["compiled"] = True
    try:
        with torch.no_grad():
            set_seed(KB_SEED)
            model_new = answer.ModelNew(*init).cuda()
            torch.cuda.synchronize()
    except Exception as e:  # noqa: BLE001
        result["message"] = f"ModelNew(*get_init_inputs()) failed: {type(e).__name__}: {e}"
        return result

    def compare(output, output_new):
        outs, news = as_tuple(output), as_tuple(output_new)
        if len(outs) != len(news):
            return False, None, f"{len(news)} output(s), expected {len(outs)}"
        worst = 0.0
        for o, n in zip(outs, news):
            if o.shape != n.shape:
                return False, None, f"Output shape mismatch: Expected {o.shape}, got {n.shape}"
            if o.numel():
                worst = max(worst, (o.double() - n.double()).abs().max().item())
            if not torch.allclose(o, n, atol=KB_ATOL, rtol=KB_RTOL):
                return False, worst, "Output mismatch"
        return True, worst, ""

    with torch.no_grad():
        started = time.perf_counter()
        verdict = kernelbench_trials(model, model_new, get_inputs, set_seed,
                                     torch.cuda.synchronize, compare)
        result.update(verdict)
        stages["trials"] = time.perf_counter() - started
        if result["passed"]:
            started = time.perf_counter()
            set_seed(KB_SEED)
            inputs = get_inputs()
            result.update(kernelbench_timing(lambda fn: kernelbench_mean_ms(torch, fn, inputs),
                                             model_new, model, req.get("kernelbench_eager_ms")))
            stages["time"] = time.perf_counter() - started
    return result


def evaluate_import(req):
    """The `import` protocol: the answer imported, nothing run (no torch needed): what a
    sandbox test or a quick look at an answer wants."""
    load_answer(req["answer"])
    return {"protocol": "import", "status": "imported"}


PROTOCOLS = {"ours": lambda req: evaluate_ours(req),
             "kernelbench": lambda req: evaluate_kernelbench(req),
             "kernelbench_eager": lambda req: evaluate_kernelbench_eager(req),
             "import": lambda req: evaluate_import(req)}


def protocol_reply(req, protocol):
    """One protocol on one answer: {"ok": true, "result": {...}} or {"ok": false, "error": ...}
    (an answer's failure is a result; only this tool's own failure is not ok)."""
    try:
        if protocol not in PROTOCOLS:
            raise ValueError(f"no protocol {protocol!r} (one of {', '.join(PROTOCOLS)})")
        return {"ok": True, "result": PROTOCOLS[protocol](req)}
    except AnswerError as e:
        return {"ok": True, "result": {"protocol": protocol, "status": e.status,
                                       "message": str(e)}}
    except Exception as e:  # noqa: BLE001 - reported, and the runner decides
        traceback.print_exc()
        return {"ok": False, "error": f"{type(e).__name__}: {e}"}


# ---------------------------------------------------------------------------------------------
# Builds ahead of evaluation: `--compile` imports an answer with the GPU hidden, recording
# every `load_inline` extension it builds; the evaluation then loads those builds instead of
# compiling (a build read-only to it, found by the call's arguments).
# ---------------------------------------------------------------------------------------------

BUILDS_FILE = "builds.json"


def build_key(args, kwargs):
    """What identifies one `load_inline` call: a hash of all its arguments."""
    import hashlib

    text = repr((args, sorted(kwargs.items())))
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def record_builds(cpp_extension, build_dir, builds):
    """Makes `cpp_extension.load_inline` build into `build_dir/<key>` (one directory per call)
    and note each call's key, module name and library (relative to `build_dir`) in `builds`."""
    real = cpp_extension.load_inline

    def load_inline(*args, **kwargs):
        key = build_key(args, kwargs)
        where = os.path.join(build_dir, key)
        os.makedirs(where, exist_ok=True)
        kwargs2 = dict(kwargs)
        kwargs2["build_directory"] = where
        module = real(*args, **kwargs2)
        library = os.path.relpath(os.path.abspath(module.__file__), os.path.abspath(build_dir))
        builds.append({"key": key, "name": module.__name__, "library": library})
        return module

    cpp_extension.load_inline = load_inline


def use_builds(cpp_extension, builds):
    """Makes `cpp_extension.load_inline` load the library built ahead for the same call; a call
    built by no one compiles as usual (in the scratch directory)."""
    real = cpp_extension.load_inline
    by_key = {b["key"]: b for b in builds}

    def load_inline(*args, **kwargs):
        b = by_key.get(build_key(args, kwargs))
        if b is None:
            return real(*args, **kwargs)
        import importlib.machinery

        loader = importlib.machinery.ExtensionFileLoader(b["name"], b["library"])
        spec = importlib.util.spec_from_file_location(b["name"], b["library"], loader=loader)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    cpp_extension.load_inline = load_inline


def compile_answer(answer, build_dir):
    """Imports `answer` once, the GPU hidden by the caller, building its `load_inline`
    extensions into `build_dir` (see record_builds): {"status": "built", "builds": [...]};
    "compile_error" with the compiler's message when a build failed; "import_failed" when the
    import failed otherwise (it may need a GPU: the evaluation will tell)."""
    import torch.utils.cpp_extension as cpp_extension

    builds = []
    record_builds(cpp_extension, build_dir, builds)
    try:
        load_answer(answer)
    except AnswerError as e:
        cause = e.__cause__
        text = str(e)
        # Decided without a GPU: a failed build, Python that does not parse, no answer file.
        # (Decided on the whole message: torch puts "Error building extension" before the
        # compiler's output, which is kept only to its last 64 KiB.)
        decided = ("Error building extension" in text or isinstance(cause, SyntaxError)
                   or not os.path.isfile(answer))
        status = "compile_error" if decided else "import_failed"
        return {"status": status, "message": text[-(64 << 10):], "builds": builds}
    return {"status": "built", "builds": builds}


# ---------------------------------------------------------------------------------------------
# `--serve`: one process (torch imported once, CUDA never initialised in it) forks a child per
# job; the child runs one protocol on one answer and dies, so an answer that crashes, hangs or
# corrupts its CUDA context costs only itself, and nothing it changes in the interpreter
# reaches the next.
# ---------------------------------------------------------------------------------------------

REPLY_LIMIT = 16 << 20
PR_SET_DUMPABLE = 4


def set_dumpable(on):
    """prctl(PR_SET_DUMPABLE): off, /proc/<pid>/fd and /mem of this process are closed to
    processes of the same user (a child cannot write into the server's pipes)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 1 if on else 0, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def child_job(job, w):
    """In the forked child: the job's protocol on its answer, the reply written to fd `w`."""
    try:
        set_dumpable(True)
        os.setsid()
        scratch = job["scratch"]
        os.chdir(scratch)
        log_fd = os.open(os.path.join(scratch, "log.txt"),
                         os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
        # Nothing of the server's (its reply pipe above all) stays open in the child.
        high = os.sysconf("SC_OPEN_MAX") if hasattr(os, "sysconf") else 65536
        os.closerange(3, w)
        os.closerange(w + 1, max(w + 2, high))
        sys.stdout = os.fdopen(1, "w", buffering=1)
        sys.stderr = os.fdopen(2, "w", buffering=1)
        for name in ("HOME", "TMPDIR"):
            os.environ[name] = scratch
        os.environ["TORCH_EXTENSIONS_DIR"] = os.path.join(scratch, "torch_extensions")
        if job.get("builds"):
            import torch.utils.cpp_extension as cpp_extension

            use_builds(cpp_extension, job["builds"])
        reply = protocol_reply(job["request"], job["protocol"])
    except BaseException as e:  # noqa: BLE001 - whatever happens, a reply
        reply = {"ok": False, "error": f"{type(e).__name__}: {e}"}
    try:
        data = json.dumps(json_safe(reply)).encode()
        view = memoryview(data)
        while view:
            view = view[os.write(w, view):]
    finally:
        os._exit(0)


def read_reply(r, pid, deadline):
    """The child's reply from pipe `r` until the child `pid` has exited (or the pipe closed) or
    `deadline` passes: (bytes, timed_out, exit status or None). A process the child left
    holding the pipe does not keep the server waiting."""
    import select

    chunks, size, status = [], 0, None
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return b"".join(chunks), True, status
        ready, _, _ = select.select([r], [], [], min(left, 0.05))
        if ready:
            chunk = os.read(r, 1 << 16)
            if not chunk:
                return b"".join(chunks), False, status
            size += len(chunk)
            if size <= REPLY_LIMIT:
                chunks.append(chunk)
            continue
        if status is None:
            done, st = os.waitpid(pid, os.WNOHANG)
            if done:
                status = st
                continue  # drain what is left, then stop at the next empty select
        else:
            return b"".join(chunks), False, status


def describe_status(status):
    """A wait status in words."""
    import signal

    if status is None:
        return "did not exit"
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = "?"
        return f"was killed by signal {sig} ({name})"
    return f"exited with status {os.WEXITSTATUS(status)}"


def log_tail(path, lines=30):
    """The last `lines` of the job's log, read only where it is a regular file (an answer could
    have put a FIFO there, on which a plain open waits for ever)."""
    import stat

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            return ""
        with os.fdopen(fd, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - (1 << 16)))
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def others_alive(spare=None):
    """The processes of this PID namespace but its init (1), this one and `spare`, by /proc."""
    keep = (1, os.getpid(), spare)
    try:
        return [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) not in keep]
    except OSError:
        return []


def kill_others(spare):
    """SIGKILL to every process this one may signal but `spare` (the set holder): with no
    holder, kill(-1); else kill(-1) with SIGSTOP first (every process at once, the holder too:
    a fork under way when it arrives is restarted after the stop, so none is made after it),
    then each but the holder killed by pid, and the holder let go on. On a GPU host with 16
    cores a fork bomb outran stopping by pid, one pass of /proc after another, for 58 s."""
    import signal

    if spare is None:
        try:
            os.kill(-1, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        return
    try:
        os.kill(-1, signal.SIGSTOP)
    except (ProcessLookupError, PermissionError):
        pass
    for p in others_alive(spare):
        try:
            os.kill(p, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    try:
        os.kill(spare, signal.SIGCONT)
    except (ProcessLookupError, PermissionError):
        pass


def wait_alone(deadline, spare=None):
    """Until no other process but `spare` is left in this PID namespace (killed ones linger
    until the namespace's init reaps them; one forked during the sweep is killed again), or
    `deadline`: the next job starts alone. Whether it does."""
    while others_alive(spare) and time.monotonic() < deadline:
        kill_others(spare)
        time.sleep(0.01)
    return not others_alive(spare)


def fresh_scratch(asked):
    """A new directory of an unpredictable name beside `asked` (the runner's name for the job's
    scratch): a job's answer can write the scratch root, and could have put a link or a file at
    the next job's name."""
    import tempfile

    parent = os.path.dirname(os.path.abspath(asked))
    os.makedirs(parent, exist_ok=True)
    return tempfile.mkdtemp(prefix=os.path.basename(asked) + "-", dir=parent)


def remove_tree(path):
    """shutil.rmtree (or unlink) that never raises (an answer's tree may be too deep for it)."""
    import shutil

    try:
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            os.unlink(path)
    except Exception:  # noqa: BLE001 - what is left stays in the scratch root
        pass


def sweep_scratch_root(root):
    """Everything in the jobs' scratch root removed once a job is over: the root is the only
    place a job may write, and nothing one answer leaves there reaches a later one."""
    try:
        names = os.listdir(root)
    except OSError:
        return
    for name in names:
        remove_tree(os.path.join(root, name))


def run_job(job, reap_all, spare=None):
    """Forks the child of one job, waits for its reply at most job["limit_s"], then kills
    what is left of it (with `reap_all`, every other process this one may signal but `spare`,
    the set holder: it runs alone in its PID namespace). Returns the job's record for the
    runner."""
    import signal

    started = time.monotonic()
    job = dict(job, scratch=fresh_scratch(job["scratch"]))
    scratch = job["scratch"]
    job_file = os.path.join(scratch, "job.json")
    if EXEC_MODE[0]:
        with open(job_file, "w", encoding="utf-8") as f:
            json.dump(job, f)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        if EXEC_MODE[0]:
            # A fresh interpreter (torch imported anew): where this one cannot fork CUDA users.
            os.set_inheritable(w, True)
            os.execv(sys.executable, [sys.executable, os.path.abspath(__file__), "--job",
                                      job_file, "--reply-fd", str(w)])
        child_job(job, w)
    os.close(w)
    data, timed_out, status = read_reply(r, pid, started + float(job["limit_s"]))
    os.close(r)
    if reap_all:
        kill_others(spare)
    try:
        os.kill(-pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    if status is None:
        _, status = os.waitpid(pid, 0)
    while reap_all:
        try:
            done, _ = os.waitpid(-1, os.WNOHANG)
            if done == 0:
                break
        except ChildProcessError:
            break
    alone = wait_alone(started + float(job["limit_s"]) + 10, spare) if reap_all else True
    record = {"id": job.get("id"), "seconds": time.monotonic() - started,
              "log_tail": log_tail(os.path.join(scratch, "log.txt")), "alone": alone}
    if reap_all:
        sweep_scratch_root(os.path.dirname(scratch))
    else:
        remove_tree(scratch)
    if timed_out:
        record["outcome"] = "timeout"
        return record
    try:
        reply = json.loads(data)
    except Exception:  # noqa: BLE001 - not JSON, or too deep for the parser
        reply = None
    if not isinstance(reply, dict):
        record["outcome"] = "failed"
        record["error"] = f"the answer's process wrote no reply: it {describe_status(status)}"
    elif reply.get("ok") is True:
        record["outcome"] = "result"
        record["result"] = reply.get("result")
    else:
        record["outcome"] = "failed"
        record["error"] = f"the evaluator failed: {reply.get('error', '(no message)')}"
    return record


# Whether jobs run in a fresh interpreter each (exec) rather than a fork of this one: set when
# this torch cannot initialise CUDA in a forked child (fork_poisoned).
EXEC_MODE = [False]


def fork_poisoned():
    """Whether a child forked now could not use CUDA (torch marks forks "bad" once anything in
    the parent touched the CUDA runtime): a probe child answers."""
    pid = os.fork()
    if pid == 0:
        try:
            import torch

            bad = torch.cuda._is_in_bad_fork()
        except Exception:  # noqa: BLE001 - any doubt is a bad fork
            bad = True
        os._exit(1 if bad else 0)
    _, status = os.waitpid(pid, 0)
    return not (os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0)


def serve(reap_all):
    """Answers one job per line of stdin ({"id", "request", "protocol", "scratch", "limit_s",
    "builds"}) with one line on stdout, {"ok": true, "record": {...}}, until EOF."""
    replies = os.fdopen(os.dup(sys.stdout.fileno()), "w", encoding="utf-8")
    sys.stdout.flush()
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    sys.stdout = sys.stderr
    set_dumpable(False)
    started = time.perf_counter()
    # Availability through NVML: nothing here may touch the CUDA runtime (a child forked after
    # that could not use CUDA).
    os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"
    try:
        import torch  # noqa: F401 - imported once here; CUDA is initialised only in children
        import torch.utils.cpp_extension  # noqa: F401

        torch_peer()
        EXEC_MODE[0] = fork_poisoned()
        mode = ("exec: this torch cannot fork CUDA users, each job imports torch anew"
                if EXEC_MODE[0] else "fork")
        print(f"kernelbench_eval: serving (torch imported in "
              f"{time.perf_counter() - started:.1f} s; jobs by {mode})", file=sys.stderr,
              flush=True)
    except ImportError as e:
        print(f"kernelbench_eval: torch is not importable ({e})", file=sys.stderr, flush=True)
    # DLRM_KB_EXEC=1 asks for exec mode (tests of it where torch forks fine or is absent).
    EXEC_MODE[0] = EXEC_MODE[0] or os.environ.get("DLRM_KB_EXEC") == "1"
    holder = sets_holder(reap_all)
    for line in sys.stdin:
        if not line.strip():
            continue
        job = {}
        try:
            job = json.loads(line)
            record = held_job(job, reap_all, holder)
            text = json.dumps(json_safe({"ok": True, "record": record}))
        except Exception as e:  # noqa: BLE001 - a bad job (or reply) is answered, the server goes on
            record = {"id": job.get("id") if isinstance(job, dict) else None,
                      "outcome": "failed", "error": f"{type(e).__name__}: {e}"[:4096]}
            text = json.dumps({"ok": True, "record": record})
        replies.write(text + "\n")
        replies.flush()
    if holder:
        holder.stop()
    return 0


def sets_holder(reap_all):
    """The server's set holder (set_holder.Holder): only alone in a PID namespace, forking
    jobs, with torch imported and CUDA IPC not turned off (DLRM_KB_HOLD=0)."""
    if not reap_all or EXEC_MODE[0] or os.environ.get("DLRM_KB_HOLD") == "0" \
            or "torch" not in sys.modules:
        return None
    import set_holder

    return set_holder.Holder(load_for_holder, set_dumpable,
                             lambda m: print(m, file=sys.stderr, flush=True))


def held_job(job, reap_all, holder):
    """run_job with the job's sets held on the device first (their loading counted in the job's
    seconds), and checked after: a job that changed them fails, saying so."""
    if holder is None:
        return run_job(job, reap_all)
    started = time.monotonic()
    HELD[0] = holder.ensure(job)
    holding_s = time.monotonic() - started
    try:
        record = run_job(job, reap_all, spare=holder.pid)
    except Exception as e:  # noqa: BLE001 - the job ran: its writes are checked all the same
        record = {"id": job.get("id"), "outcome": "failed",
                  "error": f"the server failed after the job: {type(e).__name__}: {e}"[:4096]}
    finally:
        HELD[0] = None
    record["seconds"] = record.get("seconds", 0.0) + holding_s
    if record.get("alone") is False:
        # A process of the job outlived the wait for it and may still write the held sets:
        # the next job's are loaded anew.
        print(f"kernelbench_eval: job {job.get('id')} left processes behind; the held sets "
              "are let go", file=sys.stderr, flush=True)
        holder.stop()
    tampered = holder.verify()
    if tampered:
        before = record.get("error") if record.get("outcome") == "failed" else None
        record["outcome"] = "failed"
        record["error"] = tampered + (f"; {before}" if before else "")
        record.pop("result", None)
    return record


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--serve", action="store_true",
                    help="serve jobs, one JSON line each on stdin (see serve())")
    ap.add_argument("--reap-all", action="store_true",
                    help="with --serve: kill every other process it may signal after each job "
                         "(only inside a PID namespace of its own)")
    ap.add_argument("--job", metavar="JOB.json",
                    help="(internal, --serve's exec mode) run one job, replying on --reply-fd")
    ap.add_argument("--reply-fd", type=int, help="with --job: the reply's file descriptor")
    ap.add_argument("--compile", metavar="ANSWER",
                    help="build ANSWER's load_inline extensions into --build-dir")
    ap.add_argument("--build-dir", help="with --compile: where the builds go")
    ap.add_argument("--request", help="the request JSON file")
    ap.add_argument("--protocol", choices=["ours", "kernelbench", "import"])
    ap.add_argument("--out", help="where the result JSON goes")
    args = ap.parse_args(argv)
    if args.serve:
        return serve(args.reap_all)
    if args.job:
        with open(args.job, encoding="utf-8") as f:
            job = json.load(f)
        child_job(job, args.reply_fd)
    if args.compile:
        if not (args.build_dir and args.out):
            ap.error("--compile needs --build-dir and --out")
        try:
            reply = compile_answer(args.compile, args.build_dir)
        except Exception as e:  # noqa: BLE001 - reported as this tool's failure
            traceback.print_exc()
            reply = {"status": "failed", "message": f"{type(e).__name__}: {e}"}
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump(json_safe(reply), f)
        return 0
    if not (args.request and args.protocol and args.out):
        ap.error("--request, --protocol and --out (or --serve, or --compile)")
    with open(args.request, encoding="utf-8") as f:
        req = json.load(f)
    reply = protocol_reply(req, args.protocol)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(json_safe(reply), f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
