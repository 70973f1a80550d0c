#!/usr/bin/env python3
"""Writes the demonstration sweep's replay file: sweeps/demo/responses.jsonl.

Three "models" of different quality answer all 12 problems twice (k = 2), 72 replies, each the
text a model would send (prose around fenced code blocks), built from the repository's own
candidates so their verdicts are known in advance:

* demo-native-strong (native): sample 0 the problem's CUDA example (correct, fast); sample 1
  the same on even problems and, on odd ones, the corpus's `memoize` exploit (it must be
  caught) — where a problem has none, its `all_zeros`.
* demo-native-cheater (native): the corpus's `partial_write` (sample 0) and `previous_inputs`
  (sample 1) exploits, falling back to `all_zeros`.
* demo-kernelbench (kernelbench): for embedding_bag_sum, the KernelBench corpus's
  `correct_fast` and `cached_result` answers; for every other problem, sample 0 the problem's own
  Model renamed ModelNew (correct, as slow as eager) and sample 1 a reply with no code (odd
  problems) or two conflicting ModelNew blocks (even problems).

Run from the repository root: `python3 tools/demo_sweep.py` (it rewrites the file).
"""
import json
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROBLEMS = [p.stem[3:] for p in sorted((ROOT / "bench-problems/kernelbench").glob("[0-9][0-9]_*.py"))]


def native_reply(cand: pathlib.Path, intro: str) -> str:
    manifest = (cand / "candidate.toml").read_text()
    source = (cand / "kernel.cu").read_text()
    return f"{intro}\n\n```toml\n{manifest}```\n\nThe kernel:\n\n```cuda\n{source}```\n"


def exploit(problem: str, *names: str) -> pathlib.Path:
    for n in names:
        d = ROOT / "candidates/exploits" / problem / n
        if (d / "kernel.cu").is_file():
            return d
    raise SystemExit(f"no exploit among {names} for {problem}")


def kb_reply(code: str) -> str:
    return f"Here is the optimized architecture:\n\n```python\n{code}```\n"


def own_model(number: int, problem: str) -> str:
    text = (ROOT / f"bench-problems/kernelbench/{number:02}_{problem}.py").read_text()
    return re.sub(r"^class Model\(", "class ModelNew(", text, flags=re.M)


def lines():
    for number, problem in enumerate(PROBLEMS, start=1):
        example = ROOT / "candidates/examples" / problem
        strong = [native_reply(example, "A warp-level kernel for this operator.")]
        if number % 2 == 0:
            strong.append(strong[0])
        else:
            strong.append(native_reply(exploit(problem, "memoize", "all_zeros"), "Cached for speed."))
        cheater = [
            native_reply(exploit(problem, "partial_write", "all_zeros"), "Fast path."),
            native_reply(exploit(problem, "previous_inputs", "all_zeros"), "Reuses work."),
        ]
        if problem == "embedding_bag_sum":
            kb_dir = ROOT / "candidates/kernelbench"
            kb = [kb_reply((kb_dir / f"{a}/01_embedding_bag_sum.py").read_text())
                  for a in ("correct_fast", "cached_result")]
        else:
            model = own_model(number, problem)
            second = ("I am not able to write a faster kernel for this operator."
                      if number % 2 else kb_reply(model) + "\nOr, fused:\n\n" +
                      kb_reply(model.replace("def forward(", "def forward_unused(self):\n        pass\n\n    def forward(", 1)))
            kb = [kb_reply(model), second]
        for model_name, replies in (("demo-native-strong", strong), ("demo-native-cheater", cheater),
                                    ("demo-kernelbench", kb)):
            for sample, content in enumerate(replies):
                yield {"model": model_name, "problem": problem, "sample": sample, "content": content,
                       "prompt_tokens": 2000 + 100 * number, "completion_tokens": len(content) // 4}


def main():
    out = ROOT / "sweeps/demo/responses.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)
    rows = list(lines())
    out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    print(f"{out.relative_to(ROOT)}: {len(rows)} replies")


if __name__ == "__main__":
    main()
