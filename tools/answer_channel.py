"""The channel between the judge of a KernelBench answer and the answer's own process.

The suite's protocol (`--protocol ours`, tools/kb_ours.py) runs an answer in a process of its
own that holds no oracle, no verdict and no clock the judge trusts: the judge forks it before it
computes anything secret, then drives it call by call through this channel. The answer's process
only runs `ModelNew` on its own copy of the input sets and hands back what it was asked for:

  prepare {set, fresh, poison}  put set `set`'s in-out inputs back, relabel its row ids with
                                `fresh` = [input, a, b, bound] (ids r -> (a*r + b) mod bound, from
                                the untouched copy) or none, poison the allocator if asked
  go                            call ModelNew on that set and synchronise: the timed call (the
                                judge's wall clock around the round trip)
  output                        the last call's outputs: their dtypes and shapes, bytes after
  input {set, input, start, len}   a window of an input's bytes (the judge compares it with its
                                own copy: an answer that changes its inputs is seen)

Each message is a header (two little-endian u64: the JSON's length, the payload's length), the
JSON, the payload. Whatever the answer's process sends is bounded (`max_json`, `max_payload`)
and any fault of it (an exit, a malformed message, an error it reports) is an `AnswerFault` on
the judge's side, never the judge's own failure.

The wall clock of a `go` holds the pipe's round trip as well as the call: `spawn_echo` forks a
process that only answers, so the judge can measure that round trip on a process the answer
does not control (an answer that replied slowly to pings could otherwise have its own time
made smaller). No torch here: tools/test_answer_channel.py tests it with fake answers.
"""

import json
import os
import struct
import sys
import time

HEADER = struct.Struct("<QQ")
MAX_JSON = 1 << 20


class ChannelClosed(Exception):
    """The other end exited or closed the pipe."""


class AnswerFault(Exception):
    """What the answer's process did wrong: its verdict's status and a message."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


class Channel:
    """Messages over a pair of pipe file descriptors."""

    def __init__(self, r, w):
        self.r, self.w = r, w

    def send(self, msg, payload=b""):
        data = json.dumps(msg).encode()
        self._write(HEADER.pack(len(data), len(payload)) + data)
        if payload:
            self._write(payload)

    def _write(self, data):
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(self.w, view):]
            except BrokenPipeError as e:
                raise ChannelClosed("the other end closed its pipe") from e

    def recv(self, max_payload=0, max_json=MAX_JSON):
        """(message, payload): a message longer than the bounds is a ValueError (the sender is
        not read further)."""
        n_json, n_payload = HEADER.unpack(self._read(HEADER.size))
        if n_json > max_json:
            raise ValueError(f"a message of {n_json} bytes (at most {max_json})")
        if n_payload > max_payload:
            raise ValueError(f"a payload of {n_payload} bytes (at most {max_payload})")
        try:
            msg = json.loads(self._read(n_json))
        except ValueError as e:
            raise ValueError(f"a message that is not JSON: {e}") from e
        if not isinstance(msg, dict):
            raise ValueError("a message that is not a JSON object")
        return msg, self._read(n_payload) if n_payload else b""

    def _read(self, n):
        buf = bytearray(n)
        view, got = memoryview(buf), 0
        while got < n:
            k = os.readv(self.r, [view[got:]])
            if k == 0:
                raise ChannelClosed("the other end exited")
            got += k
        return bytes(buf)


def spawn(child_main):
    """Forks a process that runs `child_main(channel)` and exits (0, or 1 if it raised).
    Returns (pid, channel) on this side. The child keeps nothing of this process's descriptors
    but its two ends and stdin/out/err."""
    to_child_r, to_child_w = os.pipe()
    from_child_r, from_child_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            keep = {0, 1, 2, to_child_r, from_child_w}
            for fd in _open_fds():
                if fd not in keep:
                    try:
                        os.close(fd)
                    except OSError:
                        pass
            child_main(Channel(to_child_r, from_child_w))
        except BaseException:  # noqa: BLE001 - the judge sees the closed pipe
            import traceback

            traceback.print_exc()
            code = 1
        finally:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(code)
    os.close(to_child_r)
    os.close(from_child_w)
    return pid, Channel(from_child_r, to_child_w)


def _open_fds():
    try:
        return [int(fd) for fd in os.listdir("/proc/self/fd")]
    except OSError:
        return list(range(3, 1024))


def echo_main(ch):
    """The echo process: answers every message with {"ok": true} until the pipe closes."""
    while True:
        try:
            ch.recv()
        except ChannelClosed:
            return
        ch.send({"ok": True})


def spawn_echo():
    return spawn(echo_main)


def round_trip_s(ch, n=64):
    """The median seconds of `n` round trips of a `go` message through `ch` (an echo)."""
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        ch.send({"op": "go"})
        ch.recv()
        times.append(time.perf_counter() - t0)
    times.sort()
    return times[len(times) // 2]


def serve_answer(ch, runner):
    """The answer's side: `runner` has prepare(set, fresh, poison), go(), output() -> (metas,
    bytes) and input_window(set, input, start, length) -> bytes; each may raise, which is
    reported to the judge as that command's error. Runs until the pipe closes."""
    ops = {
        "prepare": lambda m: (runner.prepare(m["set"], m.get("fresh"), m.get("poison", False)),
                              None, b""),
        "go": lambda m: (runner.go(), None, b""),
        "output": lambda m: (None,) + tuple(runner.output()),
        "input": lambda m: (None, None, runner.input_window(m["set"], m["input"], m["start"],
                                                            m["len"])),
    }
    while True:
        try:
            msg, _ = ch.recv()
        except ChannelClosed:
            return
        op = ops.get(msg.get("op"))
        try:
            if op is None:
                raise ValueError(f"no command {msg.get('op')!r}")
            _, metas, payload = op(msg)
        except Exception as e:  # noqa: BLE001 - the answer's failure, reported
            metas, payload = None, None
            reply = {"ok": False, "message": f"{type(e).__name__}: {e}"}
        else:
            reply = {"ok": True, "tensors": metas} if metas is not None else {"ok": True}
        try:
            ch.send(reply, payload or b"")
        except ChannelClosed:
            return


class AnswerProxy:
    """The judge's handle on the answer's process: each method sends one command and returns
    what came back, or raises AnswerFault (runtime_error: the answer raised, exited or sent
    something malformed or too large)."""

    def __init__(self, pid, ch, max_payload):
        self.pid, self.ch, self.max_payload = pid, ch, max_payload

    def _ask(self, msg, what, max_payload=0):
        try:
            self.ch.send(msg)
            reply, payload = self.ch.recv(max_payload=max_payload)
        except ChannelClosed as e:
            raise AnswerFault("runtime_error", f"{what}: the answer's process {self.exited()}"
                              ) from e
        except ValueError as e:
            raise AnswerFault("runtime_error", f"{what}: the answer's process sent {e}") from e
        if reply.get("ok") is not True:
            raise AnswerFault("runtime_error", f"{what}: the answer raised "
                              f"{str(reply.get('message', '(no message)'))[:2000]}")
        return reply, payload

    def exited(self):
        """How the answer's process ended, in words (it is waited for a moment)."""
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline:
            done, status = os.waitpid(self.pid, os.WNOHANG)
            if done:
                if os.WIFSIGNALED(status):
                    return f"was killed by signal {os.WTERMSIG(status)}"
                return f"exited with status {os.WEXITSTATUS(status)}"
            time.sleep(0.01)
        return "closed its pipe"

    def setup(self):
        """The answer's process's first message: {"ok": true, "stages_s": ...} once ModelNew is
        built, else its status and message (compile_error, runtime_error) as an AnswerFault."""
        try:
            reply, _ = self.ch.recv()
        except ChannelClosed as e:
            raise AnswerFault("runtime_error", f"while loading the answer, its process "
                              f"{self.exited()}") from e
        except ValueError as e:
            raise AnswerFault("runtime_error", f"the answer's process sent {e}") from e
        if reply.get("ok") is not True:
            status = reply.get("status")
            raise AnswerFault(status if status in ("compile_error", "runtime_error")
                              else "runtime_error", str(reply.get("message", ""))[:4000])
        return reply

    def prepare(self, k, fresh=None, poison=False, what="prepare"):
        self._ask({"op": "prepare", "set": k, "fresh": fresh, "poison": poison}, what)

    def go(self, what="call"):
        """Seconds of wall clock of one call, the round trip included."""
        t0 = time.perf_counter()
        self._ask({"op": "go"}, what)
        return time.perf_counter() - t0

    def output(self, what="output"):
        """The last call's outputs: [(dtype name, shape, bytes)], each checked to fit."""
        reply, payload = self._ask({"op": "output"}, what, self.max_payload)
        metas = reply.get("tensors")
        if not isinstance(metas, list):
            raise AnswerFault("runtime_error", f"{what}: the answer's process sent no outputs")
        out, at = [], 0
        for m in metas:
            try:
                n = int(m["bytes"])
                shape = [int(s) for s in m["shape"]]
                dtype = str(m["dtype"])
            except (KeyError, TypeError, ValueError) as e:
                raise AnswerFault("runtime_error", f"{what}: a malformed output "
                                  f"description {str(m)[:200]}") from e
            if n < 0 or at + n > len(payload):
                raise AnswerFault("runtime_error", f"{what}: outputs longer than their bytes")
            out.append((dtype, shape, payload[at:at + n]))
            at += n
        return out

    def input_window(self, k, i, start, length, what="input"):
        _, payload = self._ask({"op": "input", "set": k, "input": i, "start": start,
                                "len": length}, what, length)
        return payload
