#!/usr/bin/env python3
"""Convert Meta's dlrm_datasets embedding-bag traces to the safetensors layout DLRM-Bench replays.

Input: a `.pt` (or `.pt.gz`) file of facebookresearch/dlrm_datasets, e.g.
`embedding_bag/2021/fbgemm_t856_bs65536_0.pt.gz`; `torch.load` gives `(indices, offsets, lengths)`,
laid out table-major: bag `t*B + b` is sample `b` of table `t`, `offsets` has `T*B + 1` entries,
`lengths` is `[T, B]`.

Output (what `data_gen::trace::Trace::read_safetensors` and `dlrm-bench gen --trace` /
`dlrm-bench stats --trace` read):
  indices  int64 [N]          lookups of the kept tables, table-major, each local to its table
  offsets  int64 [T'*B + 1]   CSR over the T'*B bags, starting at 0
  lengths  int32 [T', B]      the same bags as lengths (redundant; handy from PyTorch)
  metadata: tables = T', batch_size = B, source = input file name, source_tables = kept tables

Usage:
  python tools/convert_dlrm_trace.py fbgemm_t856_bs65536_0.pt.gz trace.safetensors [--tables 0,17]
  python tools/convert_dlrm_trace.py --selftest

Needs PyTorch (and NumPy) only to load the `.pt` file; the slicing and the safetensors writer are
plain Python, so `--selftest` runs anywhere.
"""
import argparse
import gzip
import json
import os
import re
import struct
import sys
from array import array


def write_safetensors(path, tensors, metadata):
    """tensors: name -> (dtype 'I64'|'I32', shape list, array). Writes safetensors format."""
    header, offset, blobs = {}, 0, []
    for name in sorted(tensors):
        dtype, shape, data = tensors[name]
        raw = data.tobytes()
        if sys.byteorder != "little":
            swapped = array(data.typecode, data)
            swapped.byteswap()
            raw = swapped.tobytes()
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
        blobs.append(raw)
    header["__metadata__"] = {k: str(v) for k, v in metadata.items()}
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def select_tables(indices, offsets, batch, tables):
    """Keep `tables` (in that order) of a table-major trace. Returns (indices, offsets), both array('q')."""
    n_tables = (len(offsets) - 1) // batch
    out_idx, out_off = array("q"), array("q", [0])
    for t in tables:
        if not 0 <= t < n_tables:
            raise SystemExit(f"table {t} is out of range: the trace has {n_tables} tables")
        o = offsets[t * batch:(t + 1) * batch + 1]
        base, shift = o[0], out_off[-1] - o[0]
        out_idx.extend(indices[base:o[-1]])
        out_off.extend(x + shift for x in o[1:])
    return out_idx, out_off


def convert(indices, offsets, batch, tables, out, source):
    if (len(offsets) - 1) % batch:
        raise SystemExit(f"{len(offsets) - 1} bags is not a multiple of the batch size {batch}")
    n_tables = (len(offsets) - 1) // batch
    tables = list(range(n_tables)) if tables is None else tables
    idx, off = select_tables(indices, offsets, batch, tables)
    lengths = array("i", (off[i + 1] - off[i] for i in range(len(off) - 1)))
    write_safetensors(
        out,
        {
            "indices": ("I64", [len(idx)], idx),
            "offsets": ("I64", [len(off)], off),
            "lengths": ("I32", [len(tables), batch], lengths),
        },
        {
            "tables": len(tables),
            "batch_size": batch,
            "source": os.path.basename(source),
            "source_tables": ",".join(map(str, tables)),
        },
    )
    print(f"{out}: {len(tables)} tables x batch {batch}, {len(idx)} lookups")


def load_pt(path):
    import torch  # only needed for real traces

    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        try:
            obj = torch.load(f, weights_only=True)
        except Exception:  # older files may need the full unpickler; they are Meta's own data
            f.seek(0)
            obj = torch.load(f, weights_only=False)
    indices, offsets = obj[0], obj[1]
    lengths = obj[2] if len(obj) > 2 else None

    def to_array(t):
        return array("q", t.to(torch.int64).contiguous().numpy().tobytes())

    shape = tuple(lengths.shape) if lengths is not None else None
    return to_array(indices), to_array(offsets), shape


def selftest():
    import tempfile

    # Two tables, batch 3: table 0 bags [5 6] [] [7]; table 1 bags [1] [2 3] [4]; offsets start at 10.
    indices = array("q", [0] * 10 + [5, 6, 7, 1, 2, 3, 4])
    offsets = array("q", [10, 12, 12, 13, 14, 16, 17])
    idx, off = select_tables(indices, offsets, 3, [1])
    assert list(idx) == [1, 2, 3, 4] and list(off) == [0, 1, 3, 4], (idx, off)
    idx, off = select_tables(indices, offsets, 3, [1, 0])
    assert list(idx) == [1, 2, 3, 4, 5, 6, 7] and list(off) == [0, 1, 3, 4, 6, 6, 7], (idx, off)
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "t.safetensors")
        convert(indices, offsets, 3, None, p, "synthetic.pt")
        raw = open(p, "rb").read()
        n = struct.unpack("<Q", raw[:8])[0]
        h = json.loads(raw[8:8 + n])
        assert h["__metadata__"]["tables"] == "2" and h["offsets"]["shape"] == [7], h
        a, b = h["offsets"]["data_offsets"]
        got = array("q", raw[8 + n + a:8 + n + b])
        assert list(got) == [0, 2, 2, 3, 4, 6, 7], got
    print("selftest ok")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("input", nargs="?", help="dlrm_datasets .pt or .pt.gz")
    ap.add_argument("output", nargs="?", help="output .safetensors")
    ap.add_argument("--tables", help="comma-separated tables to keep (default: all)")
    ap.add_argument("--batch-size", type=int, help="B (default: from lengths' shape or 'bs<N>' in the name)")
    ap.add_argument("--selftest", action="store_true", help="check the conversion logic without PyTorch")
    a = ap.parse_args()
    if a.selftest:
        return selftest()
    if not (a.input and a.output):
        ap.error("input and output are required")
    indices, offsets, shape = load_pt(a.input)
    batch = a.batch_size
    if batch is None and shape is not None and len(shape) == 2:
        batch = shape[1]
    if batch is None:
        m = re.search(r"bs(\d+)", os.path.basename(a.input))
        if not m:
            raise SystemExit("cannot tell the batch size: pass --batch-size")
        batch = int(m.group(1))
    tables = [int(t) for t in a.tables.split(",")] if a.tables else None
    convert(indices, offsets, batch, tables, a.output, a.input)


if __name__ == "__main__":
    main()
