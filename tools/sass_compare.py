"""SASS side by side: a CUDA candidate (NVRTC to PTX) and a Rust kernel (the PTX the build
embeds), each through `ptxas` for one architecture, then `cuobjdump -sass`: registers,
instruction counts, an opcode histogram and each loop's size (a backward branch's span).
No GPU needed: the tools come from a CUDA toolkit or Triton's wheel (`triton/backends/nvidia/
bin`), libnvrtc from the build's `target/nvrtc` or the toolkit.

    python3 tools/sass_compare.py --cuda candidates/examples/tbe_forward_fp16/kernel.cu \\
        --rust tbe_forward_fp16_warp_per_bag [--arch sm_90] [--opcodes 20]

Issue 40's side by side of problems 1 and 3 is in docs/guide/results.md.
"""
import argparse
import collections
import ctypes
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINE = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(?:(@!?U?P[0-9T])\s+)?([A-Z0-9_]+)(\S*)\s*([^;]*);")
KERNEL = re.compile(r"Function : (\S+)")


def parse_sass(text):
    """{kernel: [(address, predicate, opcode, modifiers, operands)]} of `cuobjdump -sass`."""
    kernels, current = {}, None
    for line in text.splitlines():
        m = KERNEL.search(line)
        if m:
            current = kernels.setdefault(m.group(1), [])
            continue
        m = LINE.search(line)
        if m and current is not None:
            addr, pred, op, mods, rest = m.groups()
            current.append((int(addr, 16), pred or "", op, mods, rest.strip()))
    return kernels


def loops(instructions):
    """(start, end, instructions, LDGs) for each conditional backward branch `@P BRA target`
    at `end`: a loop's back edge (the unconditional backward branches are the return of a
    divergent shuffle's slow path to where it left)."""
    out = []
    for addr, pred, op, _mods, rest in instructions:
        if op != "BRA" or not pred:
            continue
        target = re.search(r"0x([0-9a-f]+)", rest)
        if target and int(target.group(1), 16) < addr:
            start = int(target.group(1), 16)
            n = sum(1 for a, *_ in instructions if start <= a <= addr)
            loads = sum(1 for a, _p, o, *_ in instructions if start <= a <= addr and o == "LDG")
            out.append((start, addr, n, loads))
    return out


def summary(name, instructions, registers, top):
    hist = collections.Counter(op for _a, _p, op, _m, _r in instructions if op != "NOP")
    print(f"{name}: {sum(hist.values())} instructions (NOP aside), {registers} registers")
    print("  " + ", ".join(f"{op} {n}" for op, n in hist.most_common(top)))
    for start, end, n, loads in loops(instructions):
        print(f"  loop {start:#06x}-{end:#06x}: {n} instructions, {loads} LDG")


def tool(name):
    found = shutil.which(name)
    if found:
        return found
    try:
        import triton  # noqa: F401 - only for its bundled binaries

        path = Path(triton.__file__).parent / "backends/nvidia/bin" / name
        if path.exists():
            return str(path)
    except ImportError:
        pass
    sys.exit(f"sass_compare: no {name} (install a CUDA toolkit or Triton)")


def nvrtc_ptx(source, arch):
    libs = sorted(glob.glob(str(ROOT / "target/nvrtc/nvidia/*/lib/libnvrtc.so*"))) or \
        sorted(glob.glob("/usr/local/cuda/lib64/libnvrtc.so*"))
    if not libs:
        sys.exit("sass_compare: no libnvrtc (build the project once, or install CUDA)")
    lib = ctypes.CDLL(libs[0])
    prog = ctypes.c_void_p()
    src = Path(source).read_bytes()
    assert lib.nvrtcCreateProgram(ctypes.byref(prog), src, b"kernel.cu", 0, None, None) == 0
    opts = [f"--gpu-architecture=compute_{arch[3:]}".encode(), b"--std=c++17"]
    rc = lib.nvrtcCompileProgram(prog, len(opts), (ctypes.c_char_p * len(opts))(*opts))
    size = ctypes.c_size_t()
    if rc:
        lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
        log = ctypes.create_string_buffer(size.value)
        lib.nvrtcGetProgramLog(prog, log)
        sys.exit(f"sass_compare: NVRTC failed:\n{log.value.decode()}")
    lib.nvrtcGetPTXSize(prog, ctypes.byref(size))
    ptx = ctypes.create_string_buffer(size.value)
    lib.nvrtcGetPTX(prog, ptx)
    return ptx.value.decode()


def compile_sass(ptx, arch, work, name, ptxas_version):
    """ptxas then cuobjdump: ({kernel: instructions}, {kernel: registers})."""
    # An older ptxas (Triton's) refuses a newer PTX ISA than it knows; the kernels here use
    # nothing newer than 8.0, so the version line is lowered to what it takes.
    ptx = re.sub(r"^\.version \d+\.\d+", f".version {ptxas_version}", ptx, count=1, flags=re.M)
    src, cubin = work / f"{name}.ptx", work / f"{name}.cubin"
    src.write_text(ptx)
    info = subprocess.run([tool("ptxas"), f"-arch={arch}", "-O3", "-v", str(src), "-o",
                           str(cubin)], capture_output=True, text=True, check=True).stderr
    registers, current = {}, None
    for line in info.splitlines():
        m = re.search(r"Compiling entry function '([^']+)'", line)
        if m:
            current = m.group(1)
        m = re.search(r"Used (\d+) registers", line)
        if m and current:
            registers[current] = int(m.group(1))
    sass = subprocess.run([tool("cuobjdump"), "-sass", str(cubin)], capture_output=True,
                          text=True, check=True).stdout
    return parse_sass(sass), registers


def rust_ptx():
    found = sorted(glob.glob(str(ROOT / "target/*/build/dlrm-bench-*/out/gpu_kernels.ptx")),
                   key=os.path.getmtime)
    if not found:
        sys.exit("sass_compare: no gpu_kernels.ptx (run `cargo build --release` first)")
    return Path(found[-1]).read_text()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cuda", help="a CUDA candidate's kernel.cu")
    ap.add_argument("--rust", help="a Rust kernel's name (in the build's gpu_kernels.ptx)")
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--ptxas-version", default="8.0",
                    help="the PTX ISA version given to ptxas (default 8.0)")
    ap.add_argument("--opcodes", type=int, default=20, help="opcodes shown per kernel")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        if args.cuda:
            kernels, regs = compile_sass(nvrtc_ptx(args.cuda, args.arch), args.arch, work,
                                         "cuda", args.ptxas_version)
            for name, ins in kernels.items():
                summary(f"CUDA {name}", ins, regs.get(name, "?"), args.opcodes)
        if args.rust:
            kernels, regs = compile_sass(rust_ptx(), args.arch, work, "rust",
                                         args.ptxas_version)
            if args.rust not in kernels:
                sys.exit(f"sass_compare: no kernel {args.rust} in the Rust PTX")
            summary(f"Rust {args.rust}", kernels[args.rust], regs.get(args.rust, "?"),
                    args.opcodes)


if __name__ == "__main__":
    main()
