"""set_holder's server side without a GPU: a holder per problem's sets, kept across jobs of the
same sets, replaced for others; a job that changed the held sets, or killed the holder, is
reported; a holder that cannot load says why once. kill_others spares the holder (in a PID
namespace of bubblewrap's, skipped without it). The device side (CUDA IPC) runs on a GPU only
(`tools/gpu_session.sh kbset`)."""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import set_holder  # noqa: E402

FLAG = os.path.join(tempfile.gettempdir(), f"set-holder-test-{os.getpid()}")


class FakeSets:
    """A store holding nothing on a device: its sets' count as the description; "changed"
    while the flag file exists (a job's write, as the holder would find it)."""

    def __init__(self, sets):
        if sets == "fail":
            raise RuntimeError("no device here")
        self.description = {"tensors": [], "sets": [[{"value": len(sets)}] for _ in sets]}

    def settle(self):
        pass

    def verify(self):
        return [0] if os.path.exists(FLAG) else []


def job(problem, *paths):
    return {"request": {"problem": problem,
                        "check_sets": [{"label": f"s{k}", "path": p} for k, p in
                                       enumerate(paths)]}}


class HolderTest(unittest.TestCase):
    def setUp(self):
        self.logged = []

        def load(problem, paths):
            return "fail" if problem == "broken" else [[1] for _ in paths]

        self.holder = set_holder.Holder(load, lambda on: None, self.logged.append, FakeSets)

    def tearDown(self):
        self.holder.stop()
        if os.path.exists(FLAG):
            os.remove(FLAG)

    def test_one_holder_per_problems_sets_kept_across_its_jobs(self):
        held = self.holder.ensure(job("p1", "/a", "/b"))
        self.assertEqual(held["paths"], ["/a", "/b"])
        pid = self.holder.pid
        self.assertIsNotNone(pid)
        self.assertIsNone(self.holder.verify())
        self.assertIs(self.holder.ensure(job("p1", "/a", "/b")), held)
        self.assertEqual(self.holder.pid, pid)
        other = self.holder.ensure(job("p2", "/c"))
        self.assertEqual(other["paths"], ["/c"])
        self.assertNotEqual(self.holder.pid, pid)
        # The first holder is gone, not left behind.
        with self.assertRaises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)

    def test_a_job_that_changed_the_sets_is_reported(self):
        self.holder.ensure(job("p1", "/a"))
        open(FLAG, "w").close()
        said = self.holder.verify()
        self.assertIn("wrote to 1 of the input tensors", said)

    def test_a_write_no_check_saw_is_found_before_the_next_job(self):
        self.holder.ensure(job("p1", "/a"))
        open(FLAG, "w").close()
        self.holder.ensure(dict(job("p1", "/a"), id=7))
        self.assertIn("before job 7: the answer wrote to 1", self.logged[-1])

    def test_a_killed_holder_is_let_go_without_blame_and_replaced(self):
        self.holder.ensure(job("p1", "/a"))
        pid = self.holder.pid
        os.kill(pid, signal.SIGKILL)
        # The job gains nothing by it (the next holder loads the sets anew): not its failure.
        self.assertIsNone(self.holder.verify())
        self.assertIn("stopped answering", self.logged[-1])
        self.assertIsNone(self.holder.pid)
        self.assertIsNotNone(self.holder.ensure(job("p1", "/a")))
        self.assertNotEqual(self.holder.pid, pid)

    def test_a_holder_that_cannot_load_says_why_once_and_jobs_load_themselves(self):
        # Once: the second job of those sets starts no holder (it would log again).
        self.assertIsNone(self.holder.ensure(job("broken", "/a")))
        self.assertIsNone(self.holder.ensure(job("broken", "/a")))
        self.assertEqual(len(self.logged), 1)
        self.assertIn("RuntimeError: no device here", self.logged[0])
        self.assertIsNone(self.holder.verify())

    def test_a_job_without_check_sets_holds_nothing(self):
        self.assertIsNone(self.holder.ensure({"request": {"problem": "p1"}}))
        self.assertIsNone(self.holder.pid)


class TakeTest(unittest.TestCase):
    def test_sets_not_held_are_loaded_by_the_job(self):
        self.assertIsNone(set_holder.take(None, None, ["/a"]))
        held = {"paths": ["/a", "/b"], "tensors": [{"dtype": "float32"}],
                "sets": [[{"value": 1}], [{"tensor": 0}]]}
        self.assertIsNone(set_holder.take(None, held, ["/c"]))
        # Values travel as they are; a set of values only touches no device (and no tensor of
        # another set is taken).
        self.assertEqual(set_holder.take(None, held, ["/a"]), [[1]])


@unittest.skipUnless(shutil.which("bwrap"), "bubblewrap is not installed")
class KillOthersTest(unittest.TestCase):
    def test_every_process_but_the_holder_is_killed_forkers_included(self):
        here = os.path.dirname(os.path.abspath(__file__))
        script = textwrap.dedent(f"""
            import os, sys, time
            sys.path.insert(0, {here!r})
            import kernelbench_eval as ke
            spare = os.fork()
            if spare == 0:
                time.sleep(30); os._exit(0)
            job = os.fork()
            if job == 0:  # a job whose answer forks on in sessions of their own
                for _ in range(3):
                    if os.fork() == 0:
                        os.setsid()
                        while True:  # each child forks on too
                            if os.fork() == 0:
                                continue
                            time.sleep(0.01)
                time.sleep(30)
            time.sleep(0.3)
            started = time.monotonic()
            ke.kill_others(spare)
            os.waitpid(job, 0)
            ke.wait_alone(time.monotonic() + 10, spare)
            print("took", round(time.monotonic() - started, 1))
            left = ke.others_alive(spare)
            time.sleep(0.1)
            state = open(f"/proc/{{spare}}/stat").read().rsplit(")", 1)[1].split()[0]
            print("left", len(left), "spare", state in ("S", "R"))  # not stopped (T)
        """)
        probe = subprocess.run(["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc",
                                "/proc", "--unshare-pid", "--die-with-parent", "true"],
                               capture_output=True)
        if probe.returncode != 0:
            self.skipTest(f"bwrap does not run here: {probe.stderr.decode()[:200]}")
        out = subprocess.run(["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
                              "--unshare-pid", "--die-with-parent", "python3", "-c", script],
                             capture_output=True, text=True, timeout=60)
        self.assertIn("left 0 spare True", out.stdout, out.stderr[-2000:])
        took = float(out.stdout.split("took")[1].split()[0])
        self.assertLess(took, 5.0, out.stdout)


SERVE_WITH_FILE_SETS = """
import os, sys
sys.path.insert(0, {tools!r})
import kernelbench_eval as ke
import set_holder

DEV = {dev!r}
PRISTINE = b"PRISTINE-INPUTS"


class FileSets:  # the device memory a handle exports, as a file any job can write
    def __init__(self, sets):
        open(DEV, "wb").write(PRISTINE)
        self.description = {{"tensors": [], "sets": [[{{"value": DEV}}] for _ in sets]}}

    def settle(self):
        pass

    def verify(self):
        if open(DEV, "rb").read() != PRISTINE:
            open(DEV, "wb").write(PRISTINE)
            return [0]
        return []


ke.sets_holder = lambda reap_all: set_holder.Holder(
    lambda problem, paths: [[p] for p in paths], ke.set_dumpable,
    lambda m: print(m, file=sys.stderr, flush=True), FileSets)
sys.exit(ke.serve(True))
"""

# Writes the held sets, then a reply too deep for the server's JSON parser (which once skipped
# the check after the job); leaves a link at the next job's scratch name and a file in the
# scratch root for a later answer.
ATTACKER = """
import os, sys
held = (sys.modules.get("kernelbench_eval") or sys.modules["__main__"]).HELD[0]
open(held["sets"][0][0]["value"], "wb").write(b"CORRUPTED")
scratch = os.path.dirname(os.getcwd())
open(os.path.join(scratch, "stash"), "w").write("for a later answer")
for k in range(2, 6):
    try:
        os.symlink("/", os.path.join(scratch, f"job-{{k}}"))
    except OSError:
        pass
for fd in os.listdir("/proc/self/fd"):
    try:
        if int(fd) > 2 and os.readlink(f"/proc/self/fd/{{fd}}").startswith("pipe:"):
            os.write(int(fd), b"[" * 200000)
    except OSError:
        pass
os._exit(0)
"""

HONEST = """
import os, sys
held = (sys.modules.get("kernelbench_eval") or sys.modules["__main__"]).HELD[0]
print("inputs:", open(held["sets"][0][0]["value"]).read())
print("stash:", os.path.exists(os.path.join(os.path.dirname(os.getcwd()), "stash")))
class ModelNew:
    pass
"""


@unittest.skipUnless(shutil.which("bwrap"), "bubblewrap is not installed")
class ServeTest(unittest.TestCase):
    def test_a_job_that_writes_the_held_sets_fails_and_the_next_jobs_read_them_pristine(self):
        import json

        here = os.path.dirname(os.path.abspath(__file__))
        root = tempfile.mkdtemp(prefix="set-holder-serve-")
        try:
            for name, text in (("attacker.py", ATTACKER), ("honest.py", HONEST)):
                with open(os.path.join(root, name), "w") as f:
                    f.write(textwrap.dedent(text.format()))
            server = os.path.join(root, "server.py")
            with open(server, "w") as f:
                f.write(SERVE_WITH_FILE_SETS.format(tools=here, dev=os.path.join(root, "dev")))
            jobs = "".join(json.dumps({
                "id": k, "protocol": "import", "limit_s": 20, "builds": [],
                "scratch": os.path.join(root, "scratch", f"job-{k}"),
                "request": {"problem": "p1", "answer": os.path.join(root, answer),
                            "check_sets": [{"label": "a", "path": "/x/a"}]}}) + "\n"
                for k, answer in ((1, "attacker.py"), (2, "honest.py"), (3, "honest.py")))
            out = subprocess.run(
                ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--bind",
                 root, root, "--unshare-pid", "--die-with-parent", "--new-session",
                 sys.executable, server], input=jobs, capture_output=True, text=True,
                timeout=120)
            records = [json.loads(line)["record"] for line in out.stdout.splitlines()]
            self.assertEqual(len(records), 3, out.stderr[-2000:])
            self.assertEqual(records[0]["outcome"], "failed", records[0])
            self.assertIn("wrote to 1 of the input tensors", records[0]["error"])
            for r in records[1:]:
                self.assertEqual(r["outcome"], "result", r)
                self.assertIn("inputs: PRISTINE-INPUTS", r["log_tail"])
                # Nothing an earlier answer left in the scratch root reaches a later one.
                self.assertIn("stash: False", r["log_tail"])
        finally:
            shutil.rmtree(root, ignore_errors=True)


def cuda_here():
    """Whether torch and an NVIDIA driver are here (a GPU machine; no torch imported here)."""
    import importlib.util

    return importlib.util.find_spec("torch") is not None and shutil.which("nvidia-smi")


@unittest.skipUnless(cuda_here(), "no torch with an NVIDIA GPU here")
class DeviceTest(unittest.TestCase):
    def test_held_sets_come_back_equal_shared_once_and_a_write_through_a_handle_is_found(self):
        here = os.path.dirname(os.path.abspath(__file__))
        # In a fresh interpreter: the holder must fork before this process touches CUDA.
        script = textwrap.dedent(f"""
            import sys
            sys.path.insert(0, {here!r})
            import torch, set_holder

            def load(problem, paths):
                g = torch.Generator(device="cuda").manual_seed(7)
                table = torch.randn(1000, 64, device="cuda", generator=g).to(torch.bfloat16)
                ids = torch.arange(5, device="cuda")
                empty = torch.empty(0, 3, device="cuda")
                return [[table, ids, 3, empty], [table, ids[::2].clone()]]

            holder = set_holder.Holder(load, lambda on: None, print)
            job = {{"request": {{"problem": "p", "check_sets": [
                {{"label": "a", "path": "/x/a"}}, {{"label": "b", "path": "/x/b"}}]}}}}
            held = holder.ensure(job)
            assert held is not None, "not held"
            a, b = set_holder.take(torch, held, ["/x/a", "/x/b"])
            want = load("p", [])
            assert a[0].dtype == torch.bfloat16 and torch.equal(a[0], want[0][0])
            assert a[0] is b[0], "a shared table became two"
            assert a[0].data_ptr() != 0 and a[2] == 3 and a[3].shape == (0, 3)
            assert torch.equal(b[1], want[1][1])
            a[0].zero_()  # a clone: the holder's copy is untouched
            assert holder.verify() is None, "a write to a clone was taken for one to the holder"
            # A write through the handle, as an answer holding it could.
            drv = set_holder.Driver()
            ptr = drv.ipc_open(bytes.fromhex(held["tensors"][0]["handle"]))
            set_holder.bytes_at(torch, ptr, 16).fill_(1)
            torch.cuda.synchronize()
            drv.ipc_close(ptr)
            said = holder.verify()
            assert said and "wrote to 1" in said, said
            again, _ = set_holder.take(torch, held, ["/x/a", "/x/b"])
            assert torch.equal(again[0], want[0][0]), "not put back"
            (only_b,) = set_holder.take(torch, held, ["/x/b"])
            assert torch.equal(only_b[1], want[1][1]) and torch.equal(only_b[0], want[0][0])
            holder.stop()
            print("device ok")
        """)
        out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                             timeout=120)
        self.assertIn("device ok", out.stdout, out.stdout[-2000:] + out.stderr[-3000:])


if __name__ == "__main__":
    unittest.main()
