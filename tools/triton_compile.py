#!/usr/bin/env python3
"""Compile one Triton `@triton.jit` function ahead of time, for `dlrm-bench run`.

The runner calls this in a process of its own, with a time limit, before it checks or times a
Triton candidate; then it loads the cubin (or PTX) like any other candidate. Nothing of the
candidate's Python runs while it is checked or timed: importing the candidate's file (which
runs its module-level code, as Triton's own JIT does) happens here, in this process, only.

Example:
    python3 tools/triton_compile.py --source candidates/examples/fm_interaction/triton_fused/kernel.py \
        --function fm_triton --signature '{"x": "*fp32", "out": "*fp32", "B": "i32"}' \
        --constexprs '{"F": 39, "K": 16, "BLOCK_B": 32}' --num-warps 4 --num-stages 3 \
        --arch 90 --out answer.json

Answer (one JSON object, to --out, else to stdout), protocol 1:
    {"ok": true, "tool": "triton_compile", "protocol": 1, "triton_version": "3.5.1",
     "target": "cuda:90", "kernel": "<compiled kernel name>",
     "params": [{"name": "x", "type": "*fp32"}, ...],      # passed at launch, in order
     "constexprs": {"F": 39, ...}, "num_warps": 4, "num_stages": 3, "num_ctas": 1,
     "shared": <dynamic shared memory bytes>,
     "launch_cooperative_grid": false, "launch_pdl": false,
     "scratch": [{"name": "global_scratch", "size": <bytes per program>, "align": <bytes>},
                 {"name": "profile_scratch", "size": ..., "align": ...}],
     "cubin_base64": "<the cubin>", "ptx": "<the PTX text>"}
`scratch` lists the trailing pointer parameters the compiled kernel takes after `params`, in
order, as Triton's metadata declares them: Triton 3.0/3.1 declare none, 3.2-3.4
`global_scratch` only, 3.5 and later both (read from the metadata keys, not the version). The
runner passes null for a size of 0, else a buffer of size x (grid x*y*z) bytes, as Triton's
launcher does.
On failure: {"ok": false, "error": "..."}; an error starting "triton is not installed" means
the candidate is skipped, any other is a compile error.

Exit status: 0 compiled; 3 Triton not installed (the answer says so); 1 compile error or bad
request (the answer says why); 2 argparse usage errors. Needs only the standard library until
Triton is imported (--help and argument validation work without it).
"""

import argparse
import base64
import importlib.util
import inspect
import json
import os
import sys
import tempfile
import traceback

PROTOCOL = 1
EXIT_NO_TRITON = 3
NO_TRITON = "triton is not installed"

POINTEE = {"i1", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "fp8e4nv", "fp8e5",
           "fp16", "bf16", "fp32", "fp64"}
SCALARS = {"i32", "u32", "fp32", "i64", "u64"}


class Refused(Exception):
    """A request this tool will not compile (its message is the answer's error)."""


def check_type(name, ty):
    if not isinstance(ty, str):
        raise Refused(f"signature[{name!r}]: expected a type string, got {ty!r}")
    if ty.startswith("*"):
        pointee = ty[1:]
        if pointee.startswith("k"):
            pointee = pointee[1:]
        if pointee in POINTEE:
            return
    elif ty in SCALARS:
        return
    raise Refused(f"signature[{name!r}]: {ty!r} is not a pointer type (*fp32, ...) or one of "
                  f"{', '.join(sorted(SCALARS))}")


def parse_request(argv):
    p = argparse.ArgumentParser(
        description="Compile one @triton.jit function to a cubin and PTX (dlrm-bench's helper).")
    p.add_argument("--source", required=True, help="the .py file holding the function")
    p.add_argument("--function", required=True, help="the @triton.jit function's name")
    p.add_argument("--signature", required=True,
                   help='JSON object: parameter name -> Triton type ("*fp32", "i64", ...)')
    p.add_argument("--constexprs", default="{}",
                   help="JSON object: constexpr parameter name -> integer")
    p.add_argument("--num-warps", type=int, default=4)
    p.add_argument("--num-stages", type=int, default=3)
    p.add_argument("--arch", type=int, required=True,
                   help="compute capability as major*10+minor (90 for H100/H200)")
    p.add_argument("--out", help="write the JSON answer here (default: stdout)")
    args = p.parse_args(argv)
    try:
        args.signature = json.loads(args.signature)
        args.constexprs = json.loads(args.constexprs)
    except json.JSONDecodeError as e:
        p.error(f"--signature/--constexprs: not JSON ({e})")
    if not isinstance(args.signature, dict) or not isinstance(args.constexprs, dict):
        p.error("--signature and --constexprs are JSON objects")
    return args


def validate(args):
    """Checks of the request that need no Triton."""
    for name, ty in args.signature.items():
        check_type(name, ty)
    for name, v in args.constexprs.items():
        if isinstance(v, bool) or not isinstance(v, int):
            raise Refused(f"constexprs[{name!r}]: {v!r} is not an integer")
        if name in args.signature:
            raise Refused(f"{name!r} is both in the signature and a constexpr")
    if args.num_warps not in (1, 2, 4, 8, 16, 32):
        raise Refused(f"num_warps = {args.num_warps}: a power of two from 1 to 32")
    if not 1 <= args.num_stages <= 16:
        raise Refused(f"num_stages = {args.num_stages}: 1 to 16")
    if not os.path.isfile(args.source):
        raise Refused(f"{args.source}: no such file")


def import_triton():
    """Triton and its GPUTarget; NoTriton when either does not import (so a Triton older than
    3.0, without triton.backends.compiler, counts as not installed, not as a compile error)."""
    try:
        import triton
        import triton.compiler  # noqa: F401
        from triton.backends.compiler import GPUTarget
    except Exception as e:  # ImportError, or a broken install
        raise NoTriton(f"{NO_TRITON} ({type(e).__name__}: {e})")
    return triton, GPUTarget


class NoTriton(Exception):
    pass


def load_function(path, name):
    spec = importlib.util.spec_from_file_location("dlrm_bench_triton_candidate", path)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    spec.loader.exec_module(module)
    fn = getattr(module, name, None)
    if fn is None:
        raise Refused(f"{path} defines no `{name}`")
    if not hasattr(fn, "arg_names"):
        raise Refused(f"{path}: `{name}` is not a @triton.jit function")
    return fn


def compile_kernel(args, triton, GPUTarget):
    fn = load_function(args.source, args.function)
    names = list(fn.arg_names)
    missing = [n for n in names if n not in args.signature and n not in args.constexprs]
    extra = [n for n in list(args.signature) + list(args.constexprs) if n not in names]
    if missing or extra:
        raise Refused(f"`{args.function}({', '.join(names)})`: not in the signature or the "
                      f"constexprs: {missing}; not parameters of the function: {extra}")
    params = [{"name": n, "type": args.signature[n]} for n in names if n in args.signature]
    # Pointers are 16-byte aligned (the runner's buffers are at least 256-byte aligned): the
    # hint Triton's JIT gives a torch tensor's pointer.
    hint = [["tt.divisibility", 16]]
    init = inspect.signature(triton.compiler.ASTSource.__init__).parameters
    if "constexprs" in init:
        # Triton >= 3.2: every parameter in the signature by name, constexprs marked.
        signature = {n: ("constexpr" if n in args.constexprs else args.signature[n])
                     for n in names}
        attrs = {(i,): hint for i, n in enumerate(names)
                 if n in args.signature and args.signature[n].startswith("*")}
        src = triton.compiler.ASTSource(fn=fn, signature=signature,
                                        constexprs=dict(args.constexprs), attrs=attrs)
    else:
        # Triton 3.0/3.1: positions, constexprs apart (no alignment hints: their format differs).
        signature = {i: args.signature[n] for i, n in enumerate(names) if n in args.signature}
        constants = {i: args.constexprs[n] for i, n in enumerate(names) if n in args.constexprs}
        src = triton.compiler.ASTSource(fn=fn, signature=signature, constants=constants)
    target = GPUTarget("cuda", args.arch, 32)
    options = {"num_warps": args.num_warps, "num_stages": args.num_stages}
    compiled = triton.compile(src, target=target, options=options)
    md = compiled.metadata
    md = md._asdict() if hasattr(md, "_asdict") else dict(md)
    scratch = []
    for name in ("global_scratch", "profile_scratch"):
        if f"{name}_size" in md:
            scratch.append({"name": name, "size": int(md[f"{name}_size"] or 0),
                            "align": int(md.get(f"{name}_align") or 1)})
    cluster = md.get("cluster_dims") or (1, 1, 1)
    num_ctas = 1
    for c in cluster:
        num_ctas *= int(c)
    asm = compiled.asm
    cubin = asm.get("cubin") if hasattr(asm, "get") else None
    ptx = asm.get("ptx") if hasattr(asm, "get") else None
    if isinstance(ptx, bytes):
        ptx = ptx.decode()
    return {
        "ok": True,
        "tool": "triton_compile",
        "protocol": PROTOCOL,
        "triton_version": getattr(triton, "__version__", ""),
        "target": f"cuda:{args.arch}",
        "kernel": md.get("name") or compiled.name,
        "params": params,
        "constexprs": args.constexprs,
        "num_warps": int(md.get("num_warps", args.num_warps)),
        "num_stages": int(md.get("num_stages", args.num_stages)),
        "num_ctas": max(num_ctas, int(md.get("num_ctas", 1))),
        "shared": int(md.get("shared", 0)),
        "launch_cooperative_grid": bool(md.get("launch_cooperative_grid", False)),
        "launch_pdl": bool(md.get("launch_pdl", False)),
        "scratch": scratch,
        "cubin_base64": base64.b64encode(cubin).decode() if cubin else None,
        "ptx": ptx,
    }


def answer(args_out, obj):
    text = json.dumps(obj)
    if args_out:
        with open(args_out, "w") as f:
            f.write(text + "\n")
    else:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()


def main(argv=None):
    args = parse_request(sys.argv[1:] if argv is None else argv)
    # Triton writes its cache under TRITON_CACHE_DIR (the runner gives a scratch directory);
    # never the user's home when run by hand without it.
    os.environ.setdefault("TRITON_CACHE_DIR", tempfile.mkdtemp(prefix="triton-cache-"))
    try:
        validate(args)
        triton, GPUTarget = import_triton()
        result = compile_kernel(args, triton, GPUTarget)
    except NoTriton as e:
        answer(args.out, {"ok": False, "error": str(e)})
        print(str(e), file=sys.stderr)
        return EXIT_NO_TRITON
    except Refused as e:
        answer(args.out, {"ok": False, "error": str(e)})
        print(str(e), file=sys.stderr)
        return 1
    except Exception as e:  # the compiler's own errors: the log is the message
        tb = traceback.format_exc()
        print(tb, file=sys.stderr)
        answer(args.out, {"ok": False, "error": f"{type(e).__name__}: {e}\n{tb[-4000:]}"})
        return 1
    answer(args.out, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
