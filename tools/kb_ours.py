"""The suite's protocol on a KernelBench answer (`--protocol ours`), judged outside the answer's
process.

The judge (the job's process) forks the answer's process and an echo before it computes
anything secret, then loads the input sets, computes the float64 oracles and builds the eager
`Model`; the answer's process loads its own copy of the sets, imports the answer and builds
`ModelNew`. From then on the answer's process only runs calls it is told to run and hands back
their outputs (tools/answer_channel.py). It never holds an oracle, a verdict or a time the
judge believes: an answer that walks the interpreter's frames, patches the verdict functions or
the clocks, or reads device memory finds nothing of the judge's (a CUDA context is its
process's own).

  - checks: every check set but the timing's, each call's outputs copied to the judge and
    compared with the oracle there (the suite's float bounds; integers and copies exactly); the
    answer's allocator is poisoned before each call (an output never written shows the poison);
    windows of each input at random places are compared with the judge's copy afterwards;
  - timing: pairs of eager (the judge's own call, wall clock around call and synchronise) and
    the answer (the judge's wall clock around the `go` round trip, less the round trip of the
    echo, which the answer does not control), L2 flushed by the judge before each (the cache is
    the device's, not a context's), the timing's sets rotated; for the bag problems every pair
    relabels the row ids first (`r -> (a*r + b) mod E`, drawn in the judge from os.urandom), so
    a result kept from an earlier call is wrong for the next; every timed call's outputs are
    compared with eager's on the same inputs.
  Both sides are timed by wall clock, so both carry their Python dispatch; the answer's time
  holds the echo-corrected pipe and its process's wake-up too (tens of microseconds).
"""

import os
import random
import signal
import time

import answer_channel as chan
from kernelbench_eval import (AnswerError, TorchOps, as_tuple, dtype_name, exact_verdict,
                              float_verdict, interleaved_pairs, judge_sets, load_answer,
                              paired_speedup, set_dumpable, timing_summary, torch_peer)

# Bytes of each input window compared after a checked call (two windows per input).
WINDOW_BYTES = 1 << 16
DTYPES = ("float32", "float16", "bfloat16", "float64", "int64", "int32", "int16", "int8",
          "uint8", "bool")


def evaluate_ours(req):
    """The job's process: forks the answer's process and the echo, judges, kills both."""
    set_dumpable(False)  # the answer's process (same user) cannot read this one's memory
    pid, ch = chan.spawn(lambda c: answer_main(c, req))
    echo_pid, echo = chan.spawn_echo()
    try:
        return judge(req, chan.AnswerProxy(pid, ch, max_payload=1 << 20), echo)
    except chan.AnswerFault as e:
        return {"protocol": "ours", "status": e.status, "message": str(e)}
    finally:
        for p in (pid, echo_pid):
            try:
                os.kill(p, signal.SIGKILL)
                os.waitpid(p, 0)
            except (ProcessLookupError, ChildProcessError):
                pass


# ---------------------------------------------------------------------------------------------
# The answer's process.
# ---------------------------------------------------------------------------------------------

def answer_main(ch, req):
    try:
        runner = AnswerRunner(req)
    except AnswerError as e:
        ch.send({"ok": False, "status": e.status, "message": str(e)})
        return
    except Exception as e:  # noqa: BLE001 - the answer's verdict
        ch.send({"ok": False, "status": "runtime_error",
                 "message": f"{type(e).__name__}: {e}"})
        return
    ch.send({"ok": True, "stages_s": runner.stages})
    chan.serve_answer(ch, runner)


class AnswerRunner:
    """Runs ModelNew on its own copy of the check sets, as the judge asks."""

    def __init__(self, req):
        tp = torch_peer()
        self.torch = torch = tp.import_torch_cuda()
        self.stages = {}
        started = time.perf_counter()
        spec = tp.PROBLEMS[req["problem"]]
        kb = tp.import_kernelbench(tp.find_kernelbench_file(req["problem"]), req["problem"])
        shared = {}
        self.sets = [tp.load_set(kb, s["path"], shared) for s in req["check_sets"]]
        self.pristine = tp.pristine_copies(self.sets, spec.get("inout", ()))
        self.originals = {}
        torch.cuda.synchronize()
        self.stages["answer_load"] = time.perf_counter() - started
        started = time.perf_counter()
        answer = load_answer(req["answer"])
        self.stages["compile"] = time.perf_counter() - started
        try:
            self.model = answer.ModelNew(*kb.get_init_inputs()).cuda().eval()
        except Exception as e:  # noqa: BLE001
            raise AnswerError("runtime_error", f"ModelNew(*get_init_inputs()) failed: "
                              f"{type(e).__name__}: {e}") from e
        self.k, self.out = 0, None

    def prepare(self, k, fresh, poison):
        torch = self.torch
        for i, t in self.pristine[k].items():
            self.sets[k][i].copy_(t)
        if fresh:
            i, a, b, bound = (int(x) for x in fresh)
            key = (k, i)
            if key not in self.originals:
                self.originals[key] = self.sets[k][i].clone()
            orig = self.originals[key]
            self.sets[k][i].copy_(((orig.to(torch.int64) * a + b) % bound).to(orig.dtype))
        if poison:
            self.out = None
            TorchOps(torch).poison_allocator([int(s) for s in poison])
        self.k = k
        torch.cuda.synchronize()

    def go(self):
        with self.torch.inference_mode():
            self.out = self.model(*self.sets[self.k])
        self.torch.cuda.synchronize()

    def output(self):
        metas, parts = [], []
        for j, o in enumerate(as_tuple(self.out)):
            if not hasattr(o, "numel") or not hasattr(o, "dtype"):
                raise ValueError(f"output {j} is a {type(o).__name__}, not a tensor")
            raw = raw_bytes(self.torch, o.detach())
            metas.append({"dtype": str(o.dtype).removeprefix("torch."), "shape": list(o.shape),
                          "bytes": len(raw)})
            parts.append(raw)
        return metas, b"".join(parts)

    def input_window(self, k, i, start, length):
        raw = self.sets[k][i].reshape(-1).view(self.torch.uint8)
        return bytes(raw[start:start + length].cpu().numpy().tobytes())


def raw_bytes(torch, t):
    if t.numel() == 0:
        return b""
    return t.contiguous().reshape(-1).view(torch.uint8).cpu().numpy().tobytes()


# ---------------------------------------------------------------------------------------------
# The judge.
# ---------------------------------------------------------------------------------------------

class Judge:
    """The judge's side of one answer: its sets, oracles, eager Model and checks."""

    def __init__(self, req, proxy):
        tp = torch_peer()
        self.req, self.proxy, self.tp = req, proxy, tp
        self.torch = torch = tp.import_torch_cuda()
        self.ops = TorchOps(torch)
        self.spec = tp.PROBLEMS[req["problem"]]
        self.stages = {}
        started = time.perf_counter()
        self.kb = kb = tp.import_kernelbench(tp.find_kernelbench_file(req["problem"]),
                                             req["problem"])
        shared = {}
        self.labels = [s["label"] for s in req["check_sets"]]
        self.sets = [tp.load_set(kb, s["path"], shared) for s in req["check_sets"]]
        check_paths = [os.path.abspath(s["path"]) for s in req["check_sets"]]
        self.time_idx = [check_paths.index(os.path.abspath(p)) for p in req["time_sets"]]
        self.inout = self.spec.get("inout", ())
        self.pristine = {}
        for s in self.sets:
            for t in s:
                if hasattr(t, "clone") and id(t) not in self.pristine:
                    self.pristine[id(t)] = (t, t.clone())
        torch.cuda.synchronize()
        self.stages["load"] = time.perf_counter() - started
        started = time.perf_counter()
        with torch.inference_mode():
            self.oracles = [self.spec["oracle_f64"](s) if "oracle_f64" in self.spec else None
                            for s in self.sets]
        self.model = kb.Model(*kb.get_init_inputs()).cuda().eval()
        torch.cuda.synchronize()
        self.stages["oracle"] = time.perf_counter() - started
        self.rng = random.Random(int.from_bytes(os.urandom(8), "little"))

    def restore_inputs(self, k):
        for i in self.inout:
            self.sets[k][i].copy_(self.pristine[id(self.sets[k][i])][1])

    def fetch(self, what):
        """The answer's last outputs as tensors on this device."""
        torch, outs = self.torch, []
        for j, (dtype, shape, data) in enumerate(self.proxy.output(what)):
            if dtype not in DTYPES:
                raise chan.AnswerFault("incorrect", f"{what}: output {j} is {dtype}")
            dt = getattr(torch, dtype)
            n = 1
            for s in shape:
                n *= s
            size = torch.empty((), dtype=dt).element_size()
            if min(shape, default=0) < 0 or n * size != len(data):
                raise chan.AnswerFault("runtime_error", f"{what}: output {j}'s shape {shape} "
                                       f"does not match its {len(data)} bytes")
            t = torch.frombuffer(bytearray(data), dtype=torch.uint8) if data else \
                torch.empty(0, dtype=torch.uint8)
            outs.append(t.view(dt).reshape(shape).cuda())
        return tuple(outs)

    def check(self, k, outs, refs=None):
        """(passed, reason) for outputs `outs` on set k: against the oracle, or against
        `refs` (eager's outputs on the same inputs) where given."""
        spec, torch = self.spec, self.torch
        # The inputs the call saw: in-out ones as they were before it, the others as they are
        # (the timing relabels row ids on this side too).
        initial = [self.pristine[id(t)][1] if i in self.inout else t
                   for i, t in enumerate(self.sets[k])]
        if "error" in spec:
            poisoned = sum(self.ops.poisoned(o) for o in outs)
            elements = sum(o.numel() for o in outs)
            try:
                err = spec["error"](outs if len(outs) > 1 else outs[0], initial)
            except Exception as e:  # noqa: BLE001 - a malformed output
                return False, f"the output could not be compared: {type(e).__name__}: {e}"
            if self.inout:
                if poisoned:
                    return False, f"{poisoned} of {elements} elements hold the poison"
                bound = self.req["update_bounds"][0]
                if not (err <= bound):
                    return False, (f"the update is off: relative L2 {err:.3e} (bound "
                                   f"{bound:.0e}), or a row that no lookup names changed")
                return True, ""
            return exact_verdict(err, poisoned, elements)
        refs = as_tuple(self.oracles[k] if refs is None else refs)
        if len(outs) != len(refs):
            return False, f"{len(outs)} output(s), the Model returns {len(refs)}"
        for j, (o, r) in enumerate(zip(outs, refs)):
            if tuple(o.shape) != tuple(r.shape):
                return False, (f"output {j} has shape {list(o.shape)}, the Model's is "
                               f"{list(r.shape)}")
            name = dtype_name(torch, o.dtype)
            if name not in self.req["bounds"]:
                return False, (f"output {j} is {name}; the Model's outputs are "
                               f"{sorted(self.req['bounds'])}")
            passed, reason = float_verdict(self.ops.float_stats(o, r), self.req["bounds"][name])
            if not passed:
                return False, f"output {j}: {reason}"
        return True, ""

    def inputs_changed(self, k, what):
        """Inputs of set k whose bytes at two random windows differ from this side's."""
        changed = []
        for i, t in enumerate(self.sets[k]):
            if i in self.inout or not hasattr(t, "numel") or t.numel() == 0:
                continue
            raw = t.reshape(-1).view(self.torch.uint8)
            for _ in range(2):
                n = min(WINDOW_BYTES, raw.numel())
                start = self.rng.randrange(raw.numel() - n + 1)
                got = self.proxy.input_window(k, i, start, n, what)
                if got != bytes(raw[start:start + n].cpu().numpy().tobytes()):
                    changed.append(f"#{i} {list(t.shape)} {dtype_name(self.torch, t.dtype)} "
                                   f"(bytes {start}..{start + n})")
                    break
        return changed

    def output_sizes(self):
        torch = self.torch
        self.restore_inputs(0)
        with torch.inference_mode():
            sizes = [o.numel() * o.element_size() for o in as_tuple(self.model(*self.sets[0]))
                     if hasattr(o, "numel")]
        self.restore_inputs(0)
        torch.cuda.synchronize()
        return sizes

    def relabels(self):
        """[(input position, bound)] of the inputs relabeled before each timed pair."""
        names = list(getattr(self.kb, "INPUT_NAMES", ()))
        return [(names.index(r["name"]), int(r["bound"])) for r in self.req.get("relabel", [])
                if r["name"] in names and int(r["bound"]) >= 2]


def judge(req, proxy, echo):
    j = Judge(req, proxy)
    started = time.perf_counter()
    setup = proxy.setup()
    j.stages["answer_setup_wait"] = time.perf_counter() - started
    for name, s in (setup.get("stages_s") or {}).items():
        if isinstance(s, (int, float)):
            j.stages[f"answer_{name}" if not name.startswith("answer_") else name] = float(s)
    sizes = j.output_sizes()
    proxy.max_payload = 4 * sum(sizes) + (1 << 20)
    result = check_sets(j, sizes)
    if result["status"] == "correct":
        time_answer(j, result, echo)
    result["stages_s"] = j.stages
    return result


def check_sets(j, sizes):
    started = time.perf_counter()

    def call(k):
        j.proxy.prepare(k, None, poison=sizes, what=j.labels[k])
        j.proxy.go(what=j.labels[k])
        return j.fetch(j.labels[k])

    with j.torch.inference_mode():
        passed, message, per_set = judge_sets(
            call, j.check, j.labels, j.restore_inputs,
            lambda k: j.inputs_changed(k, j.labels[k]), lambda: None, skip=set(j.time_idx))
    j.stages["check"] = time.perf_counter() - started
    return {"protocol": "ours", "status": "correct" if passed else "incorrect",
            "message": message, "checks": per_set}


class Pairs:
    """The timed pairs' state: each pair relabels its set first, and once both calls are done
    the answer's outputs are compared with eager's."""

    def __init__(self, j, echo):
        torch = j.torch
        self.j = j
        self.rtt_s = chan.round_trip_s(echo)
        self.flush = None if j.req["warm_l2"] else torch.empty(
            j.tp.L2_FLUSH_BYTES, dtype=torch.uint8, device="cuda")
        self.relabels = j.relabels()
        self.originals = {}
        self.calls = 0
        self.checked = 0
        self.eager_out = None

    def begin(self, k):
        if self.calls % 2 == 0:
            fresh = None
            for i, bound in self.relabels:
                a, b = affine_bijection(bound, self.j.rng)
                fresh = [i, a, b, bound]
                self.relabel(k, i, a, b, bound)
            self.j.proxy.prepare(k, fresh, what=f"timed call on {self.j.labels[k]}")
            self.eager_out = None
        self.calls += 1

    def relabel(self, k, i, a, b, bound):
        torch, t = self.j.torch, self.j.sets[k][i]
        orig = self.originals.setdefault((k, i), t.clone())
        t.copy_(((orig.to(torch.int64) * a + b) % bound).to(orig.dtype))

    def wipe_l2(self):
        if self.flush is not None:
            self.flush.zero_()
        self.j.torch.cuda.synchronize()

    def eager(self, k):
        j = self.j
        time_set = j.time_idx[k]
        self.begin(time_set)
        j.restore_inputs(time_set)
        self.wipe_l2()
        t0 = time.perf_counter()
        out = j.model(*j.sets[time_set])
        j.torch.cuda.synchronize()
        ms = (time.perf_counter() - t0) * 1e3
        self.eager_out = tuple(o.clone() for o in as_tuple(out)) if j.inout else as_tuple(out)
        self.end(time_set)
        return ms

    def answer(self, k):
        time_set = self.j.time_idx[k]
        self.begin(time_set)
        self.wipe_l2()
        what = f"timed call {self.checked + 1} on {self.j.labels[time_set]}"
        ms = (self.j.proxy.go(what) - self.rtt_s) * 1e3
        self.end(time_set)
        return max(ms, 1e-3)

    def end(self, k):
        if self.calls % 2 != 0:
            return
        j = self.j
        self.checked += 1
        what = f"timed call {self.checked} on {j.labels[k]}"
        outs = j.fetch(what)
        j.restore_inputs(k)
        ok, reason = j.check(k, outs, refs=self.eager_out)
        if not ok:
            raise chan.AnswerFault("incorrect", f"{what}: {reason} (every timed call is "
                                   "checked, on row ids relabeled for each pair where the "
                                   "problem has them)")


def affine_bijection(bound, rng):
    """(a, b) of r -> (a*r + b) mod bound, a coprime to bound (and not 1 unless none other)."""
    import math

    b = rng.randrange(bound)
    for _ in range(64):
        a = 2 + rng.randrange(max(bound - 2, 1))
        if a < bound and math.gcd(a, bound) == 1:
            return a, b
    return 1, b


def time_answer(j, result, echo):
    started = time.perf_counter()
    pairs = Pairs(j, echo)
    req = j.req
    try:
        with j.torch.inference_mode():
            for i in range(req["warmup"]):
                pairs.eager(i % len(j.time_idx))
                pairs.answer(i % len(j.time_idx))
            eager, ans = interleaved_pairs(pairs.eager, pairs.answer, len(j.time_idx),
                                           req["min_pairs"], req["max_pairs"], req["budget_s"],
                                           req["target_half_width"])
            changed = []
            for k in sorted(set(j.time_idx)):
                changed += j.inputs_changed(k, f"after the timing, {j.labels[k]}")
    except chan.AnswerFault as e:
        result["status"], result["message"] = e.status, str(e)
        j.stages["time"] = time.perf_counter() - started
        return
    j.stages["time"] = time.perf_counter() - started
    if changed:
        result["status"] = "incorrect"
        result["message"] = f"the answer changed its input(s) {', '.join(changed)}"
        return
    result["timing"] = timing_summary(ans)
    result["eager_timing"] = timing_summary(eager)
    result["speedup_eager"] = paired_speedup(eager, ans, req["seed"])
    result["timed_runs_checked"] = pairs.checked
    result["answer_ms"] = ans
    result["eager_ms"] = eager
    result["round_trip_ms"] = pairs.rtt_s * 1e3
    result["timing_clock"] = "wall (judge process; answer less the echo round trip)"
