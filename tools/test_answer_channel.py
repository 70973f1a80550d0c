"""CPU tests of tools/answer_channel.py (the judge's channel to a KernelBench answer's process)
with fake answers in real forked processes: no torch, no GPU.

Run: python3 -m unittest discover -s tools -p 'test_*.py' (host/tests/check_cli.rs does).
"""

import os
import random
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import answer_channel as chan  # noqa: E402
import kb_ours  # noqa: E402


class PrefixSums:
    """A fake answer: set k's inputs are a list of ints; the output is their prefix sums,
    as little-endian int64 bytes. `fresh` = [input, a, b, bound] relabels like the judge."""

    SETS = [[3, 1, 4, 1, 5], [9, 2, 6, 5, 3]]

    def __init__(self):
        self.sets = [list(s) for s in self.SETS]
        self.k, self.out = 0, None

    def prepare(self, k, fresh, poison):
        self.k = k
        self.sets[k] = list(self.SETS[k])
        if fresh:
            _, a, b, bound = fresh
            self.sets[k] = [(a * r + b) % bound for r in self.SETS[k]]

    def compute(self):
        out, s = [], 0
        for v in self.sets[self.k]:
            s += v
            out.append(s)
        return out

    def go(self):
        self.out = self.compute()

    def output(self):
        data = b"".join(v.to_bytes(8, "little", signed=True) for v in self.out)
        return [{"dtype": "int64", "shape": [len(self.out)], "bytes": len(data)}], data

    def input_window(self, k, i, start, length):
        data = b"".join(v.to_bytes(8, "little") for v in self.sets[k])
        return data[start:start + length]


def proxy_for(runner_factory, max_payload=1 << 20):
    def main(ch):
        ch.send({"ok": True, "stages_s": {}})
        chan.serve_answer(ch, runner_factory())

    pid, ch = chan.spawn(main)
    proxy = chan.AnswerProxy(pid, ch, max_payload)
    proxy.setup()
    return proxy


def ints(out):
    _, _, data = out[0]
    return [int.from_bytes(data[i:i + 8], "little", signed=True) for i in range(0, len(data), 8)]


class Channel(unittest.TestCase):
    def test_the_judge_gets_the_outputs_and_input_windows_of_the_calls_it_asks_for(self):
        p = proxy_for(PrefixSums)
        p.prepare(1)
        p.go()
        self.assertEqual(ints(p.output()), [9, 11, 17, 22, 25])
        p.prepare(0, fresh=[0, 3, 1, 7])
        p.go()
        relabeled = [(3 * r + 1) % 7 for r in PrefixSums.SETS[0]]
        self.assertEqual(ints(p.output()), [sum(relabeled[:i + 1]) for i in range(5)])
        self.assertEqual(p.input_window(0, 0, 8, 8), relabeled[1].to_bytes(8, "little"))

    def test_an_answer_that_raises_exits_or_sends_too_much_is_a_runtime_error_not_ours(self):
        class Raises(PrefixSums):
            def go(self):
                raise RuntimeError("illegal memory access")

        class Exits(PrefixSums):
            def go(self):
                os._exit(3)

        class TooBig(PrefixSums):
            def output(self):
                return [{"dtype": "uint8", "shape": [1 << 16], "bytes": 1 << 16}], \
                    b"\0" * (1 << 16)

        class Lies(PrefixSums):
            def output(self):
                return [{"dtype": "int64", "shape": [5], "bytes": 400}], b"\0" * 40

        cases = [(Raises, "go", "illegal memory access"), (Exits, "go", "exited with status 3"),
                 (TooBig, "output", "payload of 65536 bytes (at most 4096)"),
                 (Lies, "output", "outputs longer than their bytes")]
        for runner, step, expected in cases:
            p = proxy_for(runner, max_payload=4096)
            p.prepare(0)
            with self.assertRaises(chan.AnswerFault) as e:
                p.go(what="public-0")
                p.output(what="public-0")
            self.assertEqual(e.exception.status, "runtime_error", runner.__name__)
            self.assertIn(expected, str(e.exception), runner.__name__)
            self.assertIn("public-0", str(e.exception), runner.__name__)
            del step

    def test_a_failed_setup_keeps_the_answers_status(self):
        def main(ch):
            ch.send({"ok": False, "status": "compile_error", "message": "nvcc: error"})

        pid, ch = chan.spawn(main)
        with self.assertRaises(chan.AnswerFault) as e:
            chan.AnswerProxy(pid, ch, 0).setup()
        self.assertEqual((e.exception.status, str(e.exception)), ("compile_error", "nvcc: error"))

    def test_the_judges_clock_holds_the_answers_work_whatever_its_process_does_to_clocks(self):
        class Slow(PrefixSums):
            def go(self):
                # The answer's own clocks say no time passed; the judge's are its own.
                time.perf_counter = lambda: 0.0
                time.monotonic = lambda: 0.0
                time.sleep(0.05)
                super().go()

        p = proxy_for(Slow)
        p.prepare(0)
        self.assertGreaterEqual(p.go(), 0.05)
        echo_pid, echo = chan.spawn_echo()
        rtt = chan.round_trip_s(echo, n=16)
        self.assertGreater(rtt, 0.0)
        self.assertLess(rtt, 0.05)
        os.kill(echo_pid, 9)

    def test_the_answers_process_keeps_no_descriptor_of_the_judges_but_its_own(self):
        r, w = os.pipe()  # the judge's reply pipe, say
        judges = {os.fstat(r).st_ino}

        class Inodes(PrefixSums):
            def output(self):
                fds = [int(f) for f in os.listdir("/proc/self/fd")]
                inodes = []
                for fd in fds:
                    try:
                        inodes.append(os.fstat(fd).st_ino)
                    except OSError:
                        pass  # listdir's own, closed by now
                data = b"".join(i.to_bytes(8, "little") for i in inodes)
                return [{"dtype": "int64", "shape": [len(inodes)], "bytes": len(data)}], data

        p = proxy_for(Inodes)
        p.prepare(0)
        p.go()
        inodes = set(ints(p.output()))
        self.assertFalse(judges & inodes)
        self.assertLessEqual(len(inodes), 5)  # stdin/out/err and its two pipe ends
        os.close(r)
        os.close(w)


class Relabel(unittest.TestCase):
    def test_the_affine_map_is_a_bijection_other_than_the_identity(self):
        rng = random.Random(7)
        for bound in (2, 3, 10, 64, 97, 1000, 4096):
            for _ in range(5):
                a, b = kb_ours.affine_bijection(bound, rng)
                image = sorted((a * r + b) % bound for r in range(bound))
                self.assertEqual(image, list(range(bound)), (bound, a, b))
                if bound > 2:
                    self.assertNotEqual(a, 1, bound)


if __name__ == "__main__":
    unittest.main()
