"""CPU tests of tools/kernelbench_eval.py's logic with fake models: no torch, no GPU.

The "tensors" here are Python lists and the "allocator" a free list that hands back old
buffers, as PyTorch's caching allocator does; the expected values are worked out by hand.
Run: python3 -m unittest discover -s tools -p 'test_*.py' (host/tests/check_cli.rs does).
"""

import os
import random
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kernelbench_eval as kb  # noqa: E402

POISON = float("nan")


class Allocator:
    """A caching allocator in miniature: `empty(n)` returns a freed buffer of n elements if
    there is one (with whatever it held), else a fresh one of zeros; `free` returns a buffer."""

    def __init__(self):
        self.free_list = []

    def empty(self, n):
        for i, b in enumerate(self.free_list):
            if len(b) == n:
                return self.free_list.pop(i)
        return [0.0] * n

    def free(self, buf):
        self.free_list.append(buf)

    def poison(self, n):
        self.free_list = [[POISON] * n]


def prefix_sums(x):
    """The fake problem: out[i] = x[0] + ... + x[i]."""
    out, s = [], 0.0
    for v in x:
        s += v
        out.append(s)
    return out


class Reference:
    def __init__(self, alloc):
        self.alloc = alloc

    def __call__(self, x):
        out = self.alloc.empty(len(x))
        out[:] = prefix_sums(x)
        return out


class PartialWrite:
    """Writes only the first element into an allocator buffer."""

    def __init__(self, alloc):
        self.alloc = alloc

    def __call__(self, x):
        out = self.alloc.empty(len(x))
        out[0] = x[0]
        return out


class Cached:
    """Computes on the first call, returns that result ever after."""

    def __init__(self):
        self.result = None

    def __call__(self, x):
        if self.result is None:
            self.result = prefix_sums(x)
        return list(self.result)


class Mutating:
    """Correct output, but sorts its input in place."""

    def __call__(self, x):
        out = prefix_sums(x)
        x.sort()
        return out


def stats(out, ref):
    """TorchOps.float_stats for lists: relative L2, max error over max |ref|, poison count."""
    poisoned = sum(1 for v in out if v != v)
    diff = [0.0 if o != o else o - r for o, r in zip(out, ref)]
    num = sum(d * d for d in diff) ** 0.5
    den = sum(r * r for r in ref) ** 0.5
    return {"elements": len(out), "poisoned": poisoned, "non_finite": 0,
            "rel_l2": num / den if den else 0.0,
            "max_scaled": max(abs(d) for d in diff) / max(abs(r) for r in ref)}


SETS = [[1.0, 2.0, 3.0, 4.0], [4.0, 3.0, 2.0, 1.0], [0.5, 0.25, 2.0, 8.0]]
BOUNDS = (1e-5, 1e-4)


def ours(answer, alloc=None, sets=None, skip=()):
    """judge_sets over copies of SETS (but those in `skip`) with a fake poison and
    fingerprint."""
    sets = [list(s) for s in (sets or SETS)]
    pristine = [list(s) for s in sets]
    calls = []

    def call(k):
        calls.append(("call", k))
        return answer(sets[k])

    def check(k, out):
        return kb.float_verdict(stats(out, prefix_sums(pristine[k])), BOUNDS)

    def changed(k):
        if sets[k] != pristine[k]:
            sets[k][:] = pristine[k]
            return ["#0 x"]
        return []

    def poison():
        calls.append(("poison",))
        if alloc is not None:
            alloc.poison(4)

    result = kb.judge_sets(call, check, [f"set-{k}" for k in range(len(sets))],
                           lambda k: calls.append(("restore", k)), changed, poison, skip=skip)
    return result, calls


def kernelbench(answer_for, alloc):
    """kernelbench_trials with the same inputs every trial (get_inputs loads one file)."""
    calls = []
    ref = Reference(alloc)
    answer = answer_for(alloc)
    state = {}

    def rebind(name, value):
        # `output = model(*inputs)`: the new result is allocated while the previous trial's
        # is still bound; rebinding the name then frees the old buffer.
        if name in state:
            alloc.free(state[name])
        state[name] = value
        return value

    def model(x):
        calls.append("model")
        return rebind("output", ref(x))

    def model_new(x):
        calls.append("model_new")
        return rebind("output_new", answer(x))

    def get_inputs():
        calls.append("get_inputs")
        return [list(SETS[0])]

    def compare(output, output_new):
        ok = all(abs(a - b) <= kb.KB_ATOL + kb.KB_RTOL * abs(a)
                 for a, b in zip(output, output_new))
        return ok, None, "" if ok else "Output mismatch"

    return kb.kernelbench_trials(model, model_new, get_inputs, lambda s: None, lambda: None,
                                 compare), calls


class FloatVerdict(unittest.TestCase):
    def test_bounds_poison_and_non_finite(self):
        base = {"elements": 10, "poisoned": 0, "non_finite": 0, "rel_l2": 9e-6,
                "max_scaled": 9e-5}
        self.assertEqual(kb.float_verdict(base, BOUNDS), (True, ""))
        ok, why = kb.float_verdict({**base, "rel_l2": 2e-5}, BOUNDS)
        self.assertFalse(ok)
        self.assertIn("relative L2 2.000e-05 (bound 1e-05)", why)
        self.assertFalse(kb.float_verdict({**base, "max_scaled": 2e-4}, BOUNDS)[0])
        ok, why = kb.float_verdict({**base, "poisoned": 3}, BOUNDS)
        self.assertIn("3 of 10 elements still hold the poison", why)
        self.assertIn("NaN or infinite", kb.float_verdict({**base, "non_finite": 1}, BOUNDS)[1])
        # A NaN error (an all-NaN output) never passes.
        self.assertFalse(kb.float_verdict({**base, "rel_l2": float("nan")}, BOUNDS)[0])

    def test_exact(self):
        self.assertEqual(kb.exact_verdict(0.0, 0, 8), (True, ""))
        self.assertIn("12.500% of the elements differ", kb.exact_verdict(0.125, 0, 8)[1])
        self.assertIn("poison", kb.exact_verdict(0.0, 1, 8)[1])


class Signature(unittest.TestCase):
    def test_an_answer_returns_as_many_outputs_as_the_model_each_of_its_dtype(self):
        model = ["torch.int64", "torch.int64", "float32", "torch.int64"]
        self.assertEqual(kb.signature_verdict(list(model), model), (True, ""))
        # Two of bucketize's four outputs: the exact check's zip stopped at the shorter side.
        passed, reason = kb.signature_verdict(model[:2], model)
        self.assertFalse(passed)
        self.assertEqual(reason, "2 output(s), the Model returns 4")
        # The same values in half the bytes.
        passed, reason = kb.signature_verdict(["torch.int32"] + model[1:], model)
        self.assertFalse(passed)
        self.assertEqual(reason, "output 0 is torch.int32, the Model's is torch.int64")
        self.assertFalse(kb.signature_verdict(["list"], ["float32"])[0])


class FakeIds:
    """Just what Relabeler asks of a tensor of row ids, over a Python list."""

    def __init__(self, values, dtype="int32"):
        self.values, self.dtype = list(values), dtype

    def clone(self):
        return FakeIds(self.values, self.dtype)

    def to(self, dtype):
        return FakeIds(self.values, dtype)

    def __mul__(self, a):
        return FakeIds([v * a for v in self.values], self.dtype)

    def __add__(self, b):
        return FakeIds([v + b for v in self.values], self.dtype)

    def __mod__(self, m):
        return FakeIds([v % m for v in self.values], self.dtype)

    def copy_(self, other):
        self.values[:] = other.values


class FakeTorch:
    int64 = "int64"

    @staticmethod
    def equal(x, y):
        return x.values == y.values


class Relabel(unittest.TestCase):
    def test_the_affine_map_is_a_bijection_other_than_the_identity(self):
        rng = random.Random(7)
        for bound in (2, 3, 10, 64, 97, 1000, 4096):
            for _ in range(5):
                a, b = kb.affine_bijection(bound, rng)
                image = sorted((a * r + b) % bound for r in range(bound))
                self.assertEqual(image, list(range(bound)), (bound, a, b))
                if bound > 2:
                    self.assertNotEqual(a, 1, bound)

    def test_the_request_names_inputs_the_kernelbench_file_has(self):
        class Kb:
            INPUT_NAMES = ("weight", "indices", "offsets")

        req = {"relabel": [{"name": "indices", "bound": 1000}, {"name": "rows", "bound": 9},
                           {"name": "offsets", "bound": 1}]}
        self.assertEqual(kb.relabel_positions(Kb, req), [(1, 1000)])
        self.assertEqual(kb.relabel_positions(Kb, {}), [])
        self.assertEqual(kb.relabel_positions(object(), req), [])

    def test_every_pair_relabels_from_the_originals_and_a_write_is_seen_and_undone(self):
        original = [0, 5, 9, 5, 3]
        sets = [[None, FakeIds(original)], [None, FakeIds(original)]]
        r = kb.Relabeler(FakeTorch, sets, [(1, 10)], random.Random(3))
        seen = set()
        for _ in range(6):
            self.assertTrue(r.begin(0))
            now = sets[0][1].values
            # A bijection of the originals (equal ids stay equal), never compounded.
            self.assertEqual(sorted(set(now)), sorted({v for v in now}))
            self.assertEqual(now[1], now[3])
            self.assertEqual(len(set(now)), len(set(original)))
            seen.add(tuple(now))
            self.assertEqual(r.changed(0), [])
        self.assertGreater(len(seen), 1)  # fresh ids from pair to pair
        self.assertEqual(sets[1][1].values, original)  # other sets untouched
        relabeled = list(sets[0][1].values)
        sets[0][1].values[2] += 1  # the answer writes its input
        self.assertEqual(r.changed(0), ["#1 (relabeled row ids)"])
        self.assertEqual(sets[0][1].values, relabeled)
        r.restore(0)
        self.assertEqual(sets[0][1].values, original)
        self.assertFalse(kb.Relabeler(FakeTorch, sets, [], random.Random(3)).begin(0))


class Statistics(unittest.TestCase):
    def test_paired_speedup_is_the_median_ratio_with_an_interval_around_it(self):
        eager = [2.0, 2.0, 3.0, 4.0, 10.0]
        answer = [1.0, 1.0, 1.0, 1.0, 1.0]  # ratios 2, 2, 3, 4, 10: median 3
        s = kb.paired_speedup(eager, answer, seed=1)
        self.assertEqual((s["median"], s["pairs"]), (3.0, 5))
        self.assertTrue(2.0 <= s["ci_low"] <= 3.0 <= s["ci_high"] <= 10.0, s)
        self.assertEqual(s, kb.paired_speedup(eager, answer, seed=1))
        with self.assertRaises(ValueError):
            kb.paired_speedup([1.0], [1.0, 2.0], seed=1)

    def test_interleaving_alternates_the_order_and_rotates_the_sets(self):
        calls = []

        def timer(name, ms):
            def t(k):
                calls.append((name, k))
                return ms
            return t

        eager, answer = kb.interleaved_pairs(timer("eager", 2.0), timer("answer", 1.0), 3,
                                             min_pairs=4, max_pairs=50, budget_s=60,
                                             target_half_width=0.01)
        # Identical ratios: the interval is zero-width after min_pairs.
        self.assertEqual((eager, answer), ([2.0] * 4, [1.0] * 4))
        self.assertEqual(calls, [("eager", 0), ("answer", 0), ("answer", 1), ("eager", 1),
                                 ("eager", 2), ("answer", 2), ("answer", 0), ("eager", 0)])

    def test_noisy_pairs_run_to_the_cap(self):
        n = [0]

        def noisy(k):
            n[0] += 1
            return 1.0 + (n[0] % 7) * 0.3

        eager, _ = kb.interleaved_pairs(noisy, lambda k: 1.0, 2, min_pairs=3, max_pairs=12,
                                        budget_s=60, target_half_width=1e-6)
        self.assertEqual(len(eager), 12)


class OurProtocol(unittest.TestCase):
    def test_a_correct_answer_passes_every_set_with_poison_before_each_call(self):
        (passed, message, per_set), calls = ours(Reference(Allocator()))
        self.assertTrue(passed, message)
        self.assertEqual([s["set"] for s in per_set], ["set-0", "set-1", "set-2"])
        self.assertEqual(calls[:3], [("restore", 0), ("poison",), ("call", 0)])
        self.assertEqual(calls.count(("poison",)), 3)

    def test_the_timing_sets_are_skipped_by_the_checks(self):
        (passed, _, per_set), calls = ours(prefix_sums, skip={1})
        self.assertTrue(passed)
        self.assertEqual([s["set"] for s in per_set], ["set-0", "set-2"])
        self.assertNotIn(("call", 1), calls)

    def test_a_partial_write_into_reused_memory_meets_the_poison(self):
        alloc = Allocator()
        (passed, message, _), _ = ours(PartialWrite(alloc), alloc)
        self.assertFalse(passed)
        self.assertIn("set-0: 3 of 4 elements still hold the poison", message)

    def test_a_cached_result_fails_on_the_next_fresh_input(self):
        (passed, message, per_set), _ = ours(Cached())
        self.assertFalse(passed)
        self.assertEqual([s["passed"] for s in per_set], [True, False])
        self.assertTrue(message.startswith("set-1: error too large"), message)

    def test_an_answer_that_changes_its_input_fails_and_the_input_is_put_back(self):
        (passed, message, _), _ = ours(Mutating(), sets=[[3.0, 1.0, 2.0, 0.0]])
        self.assertFalse(passed)
        self.assertIn("changed its input(s) #0 x", message)


class KernelBenchProtocol(unittest.TestCase):
    def test_reference_first_then_the_answer_on_fresh_inputs_every_trial(self):
        verdict, calls = kernelbench(Reference, Allocator())
        self.assertTrue(verdict["passed"])
        self.assertEqual((verdict["passed_trials"], verdict["trials"]), (5, 5))
        self.assertEqual(calls[:3], ["get_inputs", "model", "model_new"])
        self.assertEqual(calls.count("get_inputs"), kb.KB_TRIALS)

    def test_a_partial_write_passes_every_trial_after_the_first(self):
        # From trial 2 on, the answer's buffer is the reference output of the trial before,
        # freed when `output` was rebound, and holds the right values: only trial 1 (fresh
        # zeros) catches it.
        verdict, _ = kernelbench(PartialWrite, Allocator())
        self.assertFalse(verdict["passed"])
        self.assertEqual(verdict["passed_trials"], kb.KB_TRIALS - 1)
        self.assertTrue(verdict["message"].startswith("trial 0:"), verdict)

    def test_a_cached_result_passes_when_every_trial_loads_the_same_inputs(self):
        verdict, _ = kernelbench(lambda alloc: Cached(), Allocator())
        self.assertTrue(verdict["passed"])

    def test_an_exception_in_the_answer_ends_the_trials(self):
        def failing(alloc):
            def f(x):
                raise RuntimeError("illegal memory access")
            return f

        verdict, _ = kernelbench(failing, Allocator())
        self.assertFalse(verdict["passed"])
        self.assertIn("runtime error in trial 0: RuntimeError: illegal memory access",
                      verdict["message"])


class KernelBenchTiming(unittest.TestCase):
    """The speedup over a baseline measured once per problem, or over the Model timed here."""

    def timed(self, baseline):
        timed = []

        def time_ms(fn):
            timed.append(fn)
            return {"answer": 2.0, "model": 5.0}[fn]

        return kb.kernelbench_timing(time_ms, "answer", "model", baseline), timed

    def test_a_baseline_is_used_and_the_model_not_timed_again(self):
        t, timed = self.timed(6.0)
        self.assertEqual(timed, ["answer"])
        self.assertEqual((t["ref_runtime_ms"], t["speedup"]), (6.0, 3.0))
        self.assertEqual(t["ref_runtime_source"], "baseline")

    def test_without_a_usable_baseline_the_model_is_timed_after_the_answer(self):
        for bad in (None, 0, -1.0, float("nan"), float("inf"), True, "6.0", [6.0]):
            t, timed = self.timed(bad)
            self.assertEqual(timed, ["answer", "model"], bad)
            self.assertEqual((t["ref_runtime_ms"], t["speedup"]), (5.0, 2.5), bad)
            self.assertEqual(t["ref_runtime_source"], "this job", bad)

    def test_the_baseline_protocol_is_served(self):
        self.assertIn("kernelbench_eager", kb.PROTOCOLS)


class AheadBuilds(unittest.TestCase):
    """load_inline calls recorded at --compile and found again by their arguments."""

    def fake_extension(self, calls):
        import types

        def load_inline(*args, **kwargs):
            calls.append(kwargs.get("build_directory"))
            return types.SimpleNamespace(__name__=kwargs["name"],
                                         __file__=os.path.join(kwargs["build_directory"],
                                                               kwargs["name"] + ".so"))
        return types.SimpleNamespace(load_inline=load_inline)

    def test_the_key_is_the_arguments(self):
        k = kb.build_key((), {"name": "m", "cuda_sources": "x"})
        self.assertEqual(k, kb.build_key((), {"cuda_sources": "x", "name": "m"}))
        self.assertNotEqual(k, kb.build_key((), {"name": "m", "cuda_sources": "y"}))

    def test_a_recorded_build_names_its_library_inside_the_build_directory(self):
        calls, builds = [], []
        ext = self.fake_extension(calls)
        kb.record_builds(ext, "/builds", builds)
        ext.load_inline(name="m", cuda_sources="x")
        key = kb.build_key((), {"name": "m", "cuda_sources": "x"})
        self.assertEqual(calls, [f"/builds/{key}"])
        self.assertEqual(builds, [{"key": key, "name": "m", "library": f"{key}/m.so"}])

    def test_a_call_built_by_no_one_compiles_as_usual(self):
        calls = []
        ext = self.fake_extension(calls)
        kb.use_builds(ext, [{"key": "other", "name": "m", "library": "/nowhere/m.so"}])
        module = ext.load_inline(name="m", cuda_sources="x", build_directory="/scratch")
        self.assertEqual(calls, ["/scratch"])
        self.assertEqual(module.__name__, "m")


class PlainOutputs(unittest.TestCase):
    """Our protocol takes only what a Model returns: plain tensors, alone or in an exact tuple
    or list, with no attributes of their own."""

    class FakeTorch:
        class Tensor:
            pass

    def test_plain_tensors_pass_and_anything_else_is_named(self):
        torch = self.FakeTorch
        t, u = torch.Tensor(), torch.Tensor()
        for ok in (t, (t, u), [t, u]):
            self.assertEqual(kb.plain_output_problem(torch, ok), "")

        class Lazy(tuple):
            pass

        class Sub(torch.Tensor):
            pass

        shadowed = torch.Tensor()
        shadowed.double = lambda: None
        for bad, says in ((Lazy((t, u)), "output 0 is a"), ((t, Sub()), "output 1 is a"),
                          ((t, 3), "output 1 is a builtins.int"), (None, "output 0 is a"),
                          ((shadowed,), "attributes of its own (double)")):
            with self.subTest(bad=bad):
                self.assertIn(says, kb.plain_output_problem(torch, bad))


class HiddenWork(unittest.TestCase):
    """Work an answer runs on a stream of its own is outside the CUDA events that time it, not
    outside the host's span to a device-wide synchronize."""

    def test_an_honest_answer_and_eager_differ_only_by_noise(self):
        eager = [1.0, 1.01, 0.99] * 10
        answer = [0.3, 0.31, 0.29] * 10
        # Both spans exceed their events by the launch and synchronize latency alone.
        passed, reason, figures = kb.hidden_work_verdict(
            answer, [m + 0.02 for m in answer], eager, [m + 0.018 for m in eager])
        self.assertTrue(passed, reason)
        self.assertAlmostEqual(figures["eager_gap_ms"], 0.018)
        self.assertAlmostEqual(figures["bound_ms"], 0.1)

    def test_work_on_a_side_stream_fails_with_what_was_seen(self):
        eager = [1.0] * 20
        # The events see 0.01 ms; the device was busy for 0.9 ms.
        passed, reason, figures = kb.hidden_work_verdict(
            [0.01] * 20, [0.9] * 20, eager, [1.02] * 20)
        self.assertFalse(passed)
        self.assertIn("another stream", reason)
        self.assertAlmostEqual(figures["answer_gap_ms"], 0.89)

    def test_the_bound_grows_with_the_answers_own_time(self):
        eager = [10.0] * 20
        # 2 ms past the events of a 10 ms answer: under 25% of it.
        self.assertTrue(kb.hidden_work_verdict([10.0] * 20, [12.0] * 20, eager, eager)[0])
        self.assertFalse(kb.hidden_work_verdict([10.0] * 20, [13.0] * 20, eager, eager)[0])

    def test_no_timed_calls_no_verdict(self):
        self.assertEqual(kb.hidden_work_verdict([], [], [], []), (True, "", {}))


if __name__ == "__main__":
    unittest.main()
