"""Tests of tools/torch_peer.py's exact checks that need torch (run on the GPU host by
`tools/gpu_session.sh pytests`; skipped, and reported as skipped, where torch is absent).

    python3 -m unittest -v tools/test_torch_checks.py
"""
import importlib.util
import sys
import unittest
from pathlib import Path

HAVE_TORCH = importlib.util.find_spec("torch") is not None and \
    importlib.util.find_spec("numpy") is not None
sys.path.insert(0, str(Path(__file__).resolve().parent))


@unittest.skipUnless(HAVE_TORCH, "no torch (and numpy) here")
class UniqueCheck(unittest.TestCase):
    def setUp(self):
        import torch

        import torch_peer

        self.torch, self.tp = torch, torch_peer
        self.dev = "cuda" if torch.cuda.is_available() else "cpu"
        g = torch.Generator().manual_seed(7)
        # Skewed ids with repeats, as the problem's Zipf draw has.
        ids = torch.randint(0, 1000, (20000,), generator=g) ** 2 % 5003
        self.indices = ids.to(self.dev)
        self.good = torch.unique(self.indices, sorted=True, return_inverse=True,
                                 return_counts=True)
        torch_peer._UNIQUE_REFS.clear()

    def error(self, out):
        return self.tp._unique_error(out, (self.indices,))

    def test_the_exact_answer_is_proven_on_the_device_without_numpy(self):
        self.assertTrue(self.tp._unique_proven(self.good, self.indices))
        self.assertEqual(self.error(self.good), 0.0)
        self.assertEqual(self.tp._UNIQUE_REFS, {}, "a proven answer needs no numpy reference")

    def test_every_kind_of_wrong_answer_fails_the_proof_and_counts_its_mismatch(self):
        torch = self.torch
        u, inv, cnt = (t.clone() for t in self.good)
        k = u.numel()
        swapped = u.clone()
        swapped[[3, 4]] = swapped[[4, 3]]
        extra_u = torch.cat([u, u[-1:] + 1])
        extra_c = torch.cat([cnt, torch.zeros_like(cnt[:1])])
        bad_inv = inv.clone()
        bad_inv[0] = (bad_inv[0] + 1) % k
        bad_cnt = cnt.clone()
        bad_cnt[0] += 1
        bad_cnt[1] -= 1
        dup = u.clone()
        dup[5] = dup[4]
        wrong = {
            "unsorted unique": (swapped, inv, cnt),
            "an id that is not in the input, counted 0": (extra_u, inv, extra_c),
            "one inverse off": (u, bad_inv, cnt),
            "counts moved, same total": (u, inv, bad_cnt),
            "a repeated entry": (dup, inv, cnt),
            "two outputs": (u, inv),
            "inverse out of range": (u, torch.full_like(inv, k), cnt),
            "negative inverse": (u, torch.full_like(inv, -1), cnt),
            "all zeros": tuple(torch.zeros_like(t) for t in (u, inv, cnt)),
        }
        for what, out in wrong.items():
            with self.subTest(what):
                self.assertFalse(self.tp._unique_proven(out, self.indices))
                self.assertGreater(self.error(out), 0.0)

    def test_another_dtype_is_not_proven(self):
        # Its values may match (the mismatch share is 0): the evaluator's signature check,
        # which compares dtypes with the Model's, rejects it.
        u, inv, cnt = self.good
        self.assertFalse(self.tp._unique_proven((u, inv, cnt.to(self.torch.int32)),
                                                self.indices))

    def test_a_tensor_subclass_is_not_proven(self):
        class Agreeable(self.torch.Tensor):
            pass

        u, inv, cnt = self.good
        self.assertFalse(self.tp._unique_proven((u.as_subclass(Agreeable), inv, cnt),
                                                self.indices))

    def test_an_output_that_shadows_a_method_or_lies_in_its_iterator_is_not_proven(self):
        torch, indices = self.torch, self.indices
        u, inv, cnt = (t.clone() for t in self.good)
        zeros = torch.zeros_like(inv)
        # An instance attribute shadows the method the proof would call.
        zeros.reshape = lambda *a: torch.unique(indices, return_inverse=True)[1]
        self.assertFalse(self.tp._unique_proven((u, zeros, cnt), indices))
        self.assertGreater(self.error((u, torch.zeros_like(inv), cnt)), 0.0)

        class Fickle(tuple):
            reads = 0

            def __iter__(self):
                Fickle.reads += 1
                return iter(super().__iter__() if Fickle.reads == 1 else ())

        self.assertFalse(self.tp._unique_proven(Fickle((u, inv, cnt)), indices))

    def test_an_empty_input_has_an_empty_answer(self):
        torch = self.torch
        empty = torch.empty(0, dtype=torch.int64, device=self.dev)
        self.assertTrue(self.tp._unique_proven((empty, empty, empty), empty))
        one = torch.ones(1, dtype=torch.int64, device=self.dev)
        self.assertFalse(self.tp._unique_proven((one, empty, one), empty))


@unittest.skipUnless(HAVE_TORCH, "no torch (and numpy) here")
class CompileVerdict(unittest.TestCase):
    def test_a_long_compiler_error_is_still_a_compile_error_and_its_message_is_cut(self):
        import tempfile

        import kernelbench_eval as kb

        with tempfile.TemporaryDirectory() as tmp:
            answer = Path(tmp) / "01_embedding_bag_sum.py"
            # torch's message: the phrase first, then the compiler's whole output.
            answer.write_text("raise RuntimeError(\"Error building extension 'k': \" + "
                              "'error: x\\n' * 20000)\n")
            r = kb.compile_answer(str(answer), str(Path(tmp) / "ext"))
        self.assertEqual(r["status"], "compile_error")
        self.assertEqual(len(r["message"]), 64 << 10)
        self.assertTrue(r["message"].endswith("error: x\n"))


if __name__ == "__main__":
    unittest.main()
