"""A problem's input sets held on the device across the jobs of `kernelbench_eval.py --serve`.

Without it every job's child reads its problem's sets from the input cache and copies them to
the device: 0.2-2 s a protocol (problems 1-5 carry a 1-4.3 GB table), twice an answer. A holder,
forked by the server once per problem's sets, loads them once, copies each distinct tensor into
an allocation of its own (cuMemAlloc: nothing else of the holder's lies in that memory) and
exports it with a CUDA IPC handle. A job's child opens the handles, clones the tensors into its
own memory on the device and closes them, all before it imports the answer (`take`): a device-
to-device copy of milliseconds where the host copy took a second.

The child, and so its answer, holds the handles: it could write through them. The holder keeps a
private copy of each allocation and, after each job, once every process of the job is gone,
compares and puts back (`Holder.verify`): a job that changed a held set is reported (the server
makes it the job's failure) and no later job sees the change; the same compare runs again before
each job (a write no check saw, put back and logged). Where a job's processes outlive the wait
for them, the server lets the holder go and the next job's sets are loaded anew. This needs the
server alone in its PID namespace (`--reap-all`), so that no process of a job outlives it, and
the holder closed to ptrace and /proc/<pid>/mem (PR_SET_DUMPABLE off); elsewhere the server
does not hold sets.
"""

import ctypes
import json
import os
import select
import time

# How long the holder may take to load a problem's sets (else the jobs load them: the runner
# waits at most its job limit and 120 s more for a reply), and to compare them after a job.
LOAD_LIMIT_S = 90.0
VERIFY_LIMIT_S = 20.0
# Exported allocations are whole multiples of this (the driver's granularity): a smaller one may
# be carved out of a larger block, which its handle would then share, unchecked.
ALIGN = 2 << 20
# The compare after a job goes this many bytes at a time (torch.equal makes a temporary of
# its operands' size).
CHUNK = 256 << 20


class IpcHandle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_char * 64)]


class Driver:
    """The few CUDA driver calls the holder and its jobs make, through ctypes (torch's runtime
    has made the device's primary context current on this thread)."""

    def __init__(self):
        self.lib = ctypes.CDLL("libcuda.so.1")
        self.open_fn = getattr(self.lib, "cuIpcOpenMemHandle_v2", None) or \
            self.lib.cuIpcOpenMemHandle
        self.open_fn.argtypes = [ctypes.POINTER(ctypes.c_uint64), IpcHandle, ctypes.c_uint]

    @staticmethod
    def check(rc, what):
        if rc != 0:
            raise RuntimeError(f"{what}: CUDA driver error {rc}")

    def alloc(self, nbytes):
        ptr = ctypes.c_uint64()
        self.check(self.lib.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(nbytes)),
                   "cuMemAlloc")
        return ptr.value

    def ipc_handle(self, ptr):
        handle = IpcHandle()
        self.check(self.lib.cuIpcGetMemHandle(ctypes.byref(handle), ctypes.c_uint64(ptr)),
                   "cuIpcGetMemHandle")
        return ctypes.string_at(ctypes.addressof(handle), 64)

    def ipc_open(self, handle):
        ptr = ctypes.c_uint64()
        h = IpcHandle()
        ctypes.memmove(ctypes.addressof(h), handle, 64)
        # CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS
        self.check(self.open_fn(ctypes.byref(ptr), h, 1), "cuIpcOpenMemHandle")
        return ptr.value

    def ipc_close(self, ptr):
        self.check(self.lib.cuIpcCloseMemHandle(ctypes.c_uint64(ptr)), "cuIpcCloseMemHandle")


class _Raw:
    """`nbytes` of device memory at `ptr`, for torch.as_tensor (no copy, no ownership)."""

    def __init__(self, ptr, nbytes):
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1",
                                         "data": (ptr, False), "version": 2, "strides": None}


def bytes_at(torch, ptr, nbytes):
    return torch.as_tensor(_Raw(ptr, nbytes), device="cuda")


class DeviceSets:
    """The holder's copy of `sets` (lists of a set's inputs): each distinct tensor copied into
    an allocation of its own and exported, with a private copy to compare with. `description`
    is what the jobs get; items that are not tensors travel in it as JSON values; anything
    else cannot be held (TypeError)."""

    def __init__(self, sets):
        import torch

        self.torch = torch
        torch.zeros(1, device="cuda")  # the device's context made and current here
        drv = Driver()
        index, tensors, self.held, described = {}, [], [], []
        for s in sets:
            items = []
            for t in s:
                if isinstance(t, torch.Tensor):
                    if id(t) not in index:
                        index[id(t)] = len(tensors)
                        tensors.append(self.export(drv, t))
                    items.append({"tensor": index[id(t)]})
                elif t is None or isinstance(t, (bool, int, float, str)):
                    items.append({"value": t})
                else:
                    raise TypeError(f"an input of type {type(t).__name__} cannot be held")
            described.append(items)
        torch.cuda.synchronize()
        self.description = {"tensors": tensors, "sets": described}

    def export(self, drv, t):
        """`t` copied into an allocation of its own (whole multiples of ALIGN, the rest zero),
        kept with a private copy of the whole allocation; its entry for the jobs."""
        torch = self.torch
        src = t.contiguous().reshape(-1).view(torch.uint8) if t.numel() else None
        nbytes = 0 if src is None else src.numel()
        entry = {"dtype": str(t.dtype).removeprefix("torch."), "shape": list(t.shape),
                 "nbytes": nbytes, "handle": ""}
        if nbytes:
            size = -(-nbytes // ALIGN) * ALIGN
            mine = bytes_at(torch, drv.alloc(size), size)
            mine.zero_()
            mine[:nbytes].copy_(src)
            self.held.append((mine, mine.clone()))
            entry["handle"] = drv.ipc_handle(mine.data_ptr()).hex()
        return entry

    def settle(self):
        """Once the loaded sets are gone: their memory back to the device (the jobs need it)."""
        self.torch.cuda.empty_cache()

    def verify(self):
        """The indices of the held allocations (padding included) that differ from their
        private copies, put back."""
        changed = []
        for k, (mine, copy) in enumerate(self.held):
            n = mine.numel()
            if any(not self.torch.equal(mine[i:i + CHUNK], copy[i:i + CHUNK])
                   for i in range(0, n, CHUNK)):
                changed.append(k)
                mine.copy_(copy)
        self.torch.cuda.synchronize()
        self.torch.cuda.empty_cache()
        return changed


def take(torch, held, paths):
    """The sets at `paths` from the holder's description `held` (its "paths", "tensors",
    "sets"), cloned into this process's memory with every handle closed again; None when the
    holder does not hold all of them. Tensors shared by several sets stay one tensor."""
    if not held:
        return None
    where = {p: k for k, p in enumerate(held["paths"])}
    wanted = [where.get(os.path.abspath(p)) for p in paths]
    if any(k is None for k in wanted):
        return None
    # Only the tensors of the sets asked for (KernelBench's protocol takes one set of several).
    needed = sorted({i["tensor"] for k in wanted for i in held["sets"][k] if "tensor" in i})
    drv, opened, tensors = None, [], {}
    if needed:
        torch.zeros(1, device="cuda")  # the device's context made and current here
    try:
        for j in needed:
            d = held["tensors"][j]
            dtype = getattr(torch, d["dtype"])
            if not d["nbytes"]:
                tensors[j] = torch.empty(d["shape"], dtype=dtype, device="cuda")
                continue
            drv = drv or Driver()
            ptr = drv.ipc_open(bytes.fromhex(d["handle"]))
            opened.append(ptr)
            view = bytes_at(torch, ptr, d["nbytes"])
            tensors[j] = view.clone().view(dtype).reshape(d["shape"])
            del view
        if tensors:
            torch.cuda.synchronize()
    finally:
        for ptr in opened:
            drv.ipc_close(ptr)
    return [[tensors[i["tensor"]] if "tensor" in i else i["value"] for i in held["sets"][k]]
            for k in wanted]


def holder_main(load, store, key, r, w, set_dumpable):
    """In the forked holder: `store(load(problem, paths))` (`key`: the sets, loaded as a job
    would load them, then held); one JSON line of description on `w`, then one reply line per
    "verify" line on `r` until EOF."""
    set_dumpable(False)
    # Nothing of the server's stays open here (its job pipe, its replies) but the two pipes.
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    high = os.sysconf("SC_OPEN_MAX") if hasattr(os, "sysconf") else 65536
    for lo, hi in ((3, min(r, w)), (min(r, w) + 1, max(r, w)), (max(r, w) + 1, high)):
        if lo < hi:
            os.closerange(lo, hi)
    out = os.fdopen(w, "w", encoding="utf-8")
    try:
        paths = list(key[1])
        sets = store(load(key[0], paths))
        sets.settle()
        description = dict(sets.description, paths=paths)
        out.write(json.dumps({"ok": True, "held": description}) + "\n")
    except BaseException as e:  # noqa: BLE001 - whatever happens, a reply
        out.write(json.dumps({"ok": False, "error": f"{type(e).__name__}: {e}"}) + "\n")
        out.flush()
        os._exit(0)
    out.flush()
    for line in os.fdopen(r, encoding="utf-8"):
        if line.strip() != "verify":
            break
        out.write(json.dumps({"changed": sets.verify()}) + "\n")
        out.flush()
    os._exit(0)


def read_line(fd, deadline):
    """One line from `fd` before `deadline` (None when it ends or the time passes)."""
    data = b""
    while not data.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return None
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return None
        data += chunk
    return data.decode("utf-8", "replace")


class Holder:
    """The server's side: at most one holder process, for one problem's sets."""

    def __init__(self, load, set_dumpable, log, store=DeviceSets):
        self.load, self.set_dumpable, self.log, self.store = load, set_dumpable, log, store
        self.pid = None
        self.key = None
        self.held = None
        self.to_holder = self.from_holder = None

    def sets_of(self, job):
        """The sets a job reads: its request's check sets (the KernelBench protocol's set is one
        of them), absolute."""
        req = job.get("request") or {}
        paths = [os.path.abspath(s["path"]) for s in req.get("check_sets") or []]
        return (req.get("problem"), tuple(paths)) if paths else None

    def ensure(self, job):
        """Holds `job`'s sets (a new holder when they are another problem's), compared with the
        holder's private copies first (a write no check after a job saw is put back): the
        description for its child, or None (the child loads them itself)."""
        key = self.sets_of(job)
        if key is None:
            return None
        if key == self.key and self.pid is not None:
            found = self.verify()
            if found:
                self.log(f"kernelbench_eval: before job {job.get('id')}: {found}")
        if key != self.key:
            self.stop()
            self.start(key)
        return self.held

    def start(self, key):
        """Forks the holder of `key`'s sets and reads its description; where that fails, says
        why once and holds nothing for those sets (their jobs load them)."""
        self.key = key
        down_r, down_w = os.pipe()
        up_r, up_w = os.pipe()
        try:
            pid = os.fork()
        except OSError as e:
            for fd in (down_r, down_w, up_r, up_w):
                os.close(fd)
            self.log(f"kernelbench_eval: no holder for the sets of {key[0]} ({e})")
            return
        if pid == 0:
            os.close(down_w)
            os.close(up_r)
            holder_main(self.load, self.store, key, down_r, up_w, self.set_dumpable)
        os.close(down_r)
        os.close(up_w)
        self.pid, self.to_holder, self.from_holder = pid, down_w, up_r
        line = read_line(up_r, time.monotonic() + LOAD_LIMIT_S)
        try:
            reply = json.loads(line) if line else {"ok": False, "error": "no reply in time"}
            self.held = reply["held"] if reply.get("ok") else None
        except (ValueError, AttributeError, KeyError) as e:
            reply = {"error": f"a bad reply: {type(e).__name__}"}
        if self.held is None:
            self.log(f"kernelbench_eval: the sets of {key[0]} are not held "
                     f"({reply.get('error')}): each job loads them")
            self.stop()
            self.key = key

    def verify(self):
        """After a job: None when the held sets are as loaded, else what was written to them
        (the holder puts them back). A holder that does not answer (killed, or dead of its own
        fault) is let go, and the next job of its sets starts another, which loads them anew:
        nothing is blamed on the job, which gains nothing by it."""
        if self.pid is None:
            return None
        try:
            os.write(self.to_holder, b"verify\n")
            line = read_line(self.from_holder, time.monotonic() + VERIFY_LIMIT_S)
            changed = json.loads(line).get("changed") if line else None
        except (OSError, ValueError, AttributeError):
            line, changed = None, None
        if line is None or not isinstance(changed, list):
            self.log(f"kernelbench_eval: the holder of the sets of {self.key[0]} stopped "
                     "answering; the next job starts another")
            self.stop()
            return None
        if changed:
            return (f"the answer wrote to {len(changed)} of the input tensors held for later "
                    "answers, through their CUDA IPC handles (put back)")
        return None

    def stop(self):
        import signal

        if self.pid is not None:
            for fd in (self.to_holder, self.from_holder):
                try:
                    os.close(fd)
                except OSError:
                    pass
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            try:
                os.waitpid(self.pid, 0)
            except ChildProcessError:
                pass
        self.pid = self.held = self.key = None
