"""CPU tests of tools/kernel_classes.py (name rules, trace attribution, aggregation, the TOML and
CSV it writes) and of the torch-free parts of tools/profile_workload.py.

    python3 -m unittest discover -s tools -p 'test_*.py'

(`cargo test --workspace kernelbench_evaluator_logic` runs every tools/test_*.py so.)
"""

import csv
import io
import json
import pathlib
import py_compile
import sys
import tempfile
import unittest

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import kernel_classes as kc  # noqa: E402

FIXTURES = HERE / "fixtures"


def _load_toml(text):
    try:
        import tomllib
    except ImportError:  # Python < 3.11
        return None
    return tomllib.loads(text)


class NameRules(unittest.TestCase):
    def test_every_fixture_kernel_gets_its_class(self):
        files = sorted(FIXTURES.glob("kernel_names_*.txt"))
        self.assertTrue(files)
        seen = set()
        for f in files:
            rows = kc.read_kernel_list(f.read_text())
            self.assertGreater(len(rows), 40, f)
            for want, name in rows:
                self.assertIn(want, kc.CLASSES, f"{f.name}: {name}")
                self.assertEqual(kc.classify_name(name), want, f"{f.name}: {name}")
                seen.add(want)
        # The fixture exercises every class.
        self.assertEqual(seen, set(kc.CLASSES))

    def test_triton_kinds_and_fused_op_names(self):
        self.assertEqual(kc.classify_name("triton_poi_fused_relu_0"), "elementwise")
        self.assertEqual(kc.classify_name("triton_red_fused_sum_1"), "reduction")
        self.assertEqual(kc.classify_name("triton_per_fused__softmax_2"), "reduction")
        self.assertEqual(kc.classify_name("triton_tem_fused_mm_3"), "matmul")
        self.assertEqual(kc.classify_name("triton_poi_fused_addmm_4"), "matmul")
        self.assertEqual(kc.classify_name("triton_poi_fused_index_select_5"), "indexing")
        # a lambda in an ATen template is not the LAMB optimizer
        self.assertEqual(kc.classify_name(
            "void at::native::vectorized_elementwise_kernel<4, {lambda(float)#1}>"),
            "elementwise")
        self.assertEqual(kc.classify_name("mystery"), "other")

    def test_regions_name_problems_only(self):
        self.assertEqual(kc.region_problem("dlrm_bench::fm_interaction"), "fm_interaction")
        self.assertIsNone(kc.region_problem("dlrm_bench::fm_interactionn"))
        self.assertIsNone(kc.region_problem("aten::mm"))
        self.assertEqual(len(kc.PROBLEMS), 12)
        self.assertTrue(set(kc.BACKWARD_OF.values()) <= set(kc.PROBLEMS))


class TraceAttribution(unittest.TestCase):
    def setUp(self):
        self.trace = json.loads((FIXTURES / "trace_small.json").read_text())
        self.intervals = [(50, 60, "dot_interaction"), (70, 80, "fm_interaction")]
        self.records = kc.attribute_trace(self.trace, self.intervals)

    def by_dur(self, dur):
        (r,) = [r for r in self.records if r["dur_us"] == dur]
        return r

    def test_each_activity_once_and_annotations_left_out(self):
        self.assertEqual(len(self.records), 10)
        self.assertAlmostEqual(sum(r["dur_us"] for r in self.records), 324.0)

    def test_regions_backward_optimizer_and_names(self):
        self.assertEqual(self.by_dur(50)["cls"], "embedding_bag_sum")
        self.assertEqual(self.by_dur(2)["cls"], "embedding_bag_sum")  # memset in the region
        self.assertEqual(self.by_dur(100)["cls"], "matmul")
        self.assertEqual(self.by_dur(30)["cls"], "dot_interaction")  # a GEMM in the region
        bwd = self.by_dur(40)
        self.assertEqual((bwd["cls"], bwd["how"]), ("dot_interaction_backward", "backward"))
        fm = self.by_dur(5)  # fm_interaction's backward has no problem: by name
        self.assertEqual((fm["cls"], fm["region"], fm["how"]),
                         ("elementwise", "backward:fm_interaction", "name"))
        self.assertEqual(self.by_dur(60)["cls"], "matmul")  # backward outside any region
        self.assertEqual(self.by_dur(60)["region"], "")
        self.assertEqual(self.by_dur(10)["cls"], "optimizer")
        self.assertEqual(self.by_dur(7)["cls"], "embedding_backward_rowwise_adagrad")
        self.assertEqual(self.by_dur(20)["cls"], "communication")

    def test_without_intervals_the_backward_goes_by_name(self):
        records = kc.attribute_trace(self.trace["traceEvents"])
        (r,) = [r for r in records if r["dur_us"] == 40]
        self.assertEqual(r["cls"], "matmul")

    def test_aggregate_per_step_and_coverage(self):
        agg = kc.aggregate(self.records, steps=2)
        self.assertAlmostEqual(agg["total_us"], 162.0)
        s = agg["shares"]
        self.assertAlmostEqual(sum(s.values()), 1.0)
        self.assertAlmostEqual(s["embedding_bag_sum"], 52 / 324)
        self.assertAlmostEqual(s["matmul"], 160 / 324)
        self.assertAlmostEqual(kc.coverage(s), 1.0)
        self.assertAlmostEqual(kc.coverage({"other": 0.25, "matmul": 0.75}), 0.75)
        top = agg["rows"][0]
        self.assertEqual((top["cls"], top["us"], top["calls"]), ("matmul", 50.0, 0.5))
        # the two cutlass GEMMs differ by class: two rows
        cut = [r for r in agg["rows"] if r["name"].startswith("void cutlass")]
        self.assertEqual(sorted(r["cls"] for r in cut),
                         ["dot_interaction", "dot_interaction_backward"])

    def test_toml_and_csv(self):
        agg = kc.aggregate(self.records, steps=2)
        text = kc.profile_toml("w-train-eager", 'a "quoted" model', "measured by a test",
                               agg["shares"], 1.5, agg["total_us"] / 1000, "how", "w.csv")
        self.assertIn("[fractions]\nembedding_bag_sum = 0.1605\n", text)
        self.assertIn("\n[classes]\nmatmul = 0.4938\n", text)
        self.assertIn("other = 0.0000\n", text)
        self.assertNotIn("fm_interaction =", text)  # absent problems are not listed
        doc = _load_toml(text)
        if doc is not None:
            self.assertEqual(doc["description"], 'a "quoted" model')
            self.assertEqual(doc["kernels_csv"], "w.csv")
            self.assertAlmostEqual(doc["step_ms"], 1.5)
            self.assertAlmostEqual(doc["coverage"], 1.0)
            total = sum(doc["fractions"].values()) + sum(doc["classes"].values())
            self.assertAlmostEqual(total, 1.0, delta=0.001)
            self.assertEqual(list(doc["classes"]), list(kc.CLASSES))
        rows = list(csv.DictReader(io.StringIO(kc.kernel_csv(agg["rows"]))))
        self.assertEqual(len(rows), len(agg["rows"]))
        self.assertEqual(list(rows[0]), ["kernel", "class", "region", "calls_per_step",
                                         "us_per_step", "share"])
        self.assertAlmostEqual(sum(float(r["share"]) for r in rows), 1.0, places=4)

    def test_kernel_list_round_trips(self):
        text = kc.kernel_list(self.records)
        rows = kc.read_kernel_list("# header\n\n" + text)
        self.assertEqual(len(rows), len(set(r["name"] for r in self.records)))
        for cls, name in rows:
            self.assertEqual(cls, kc.classify_name(name))


class ProfileWorkloadWithoutTorch(unittest.TestCase):
    def test_compiles_and_imports_without_torch(self):
        for f in ("profile_workload.py", "workload_models.py", "kernel_classes.py"):
            py_compile.compile(str(HERE / f), doraise=True)
        import profile_workload as pw
        self.assertNotIn("torch", vars(pw))  # torch is imported inside profile_one only
        self.assertTrue(callable(pw.profile_one))

    def test_configs_cover_six_profiles_and_three_families(self):
        import profile_workload as pw
        names = [pw.config_name(*c) for c in pw.ALL_CONFIGS]
        self.assertEqual(len(names), len(set(names)))
        self.assertIn("dlrm-dlrmv2-train-eager", names)
        eager = [c for c in pw.ALL_CONFIGS if not c[2]]
        self.assertGreaterEqual(len(eager), 6)
        self.assertGreaterEqual(len({pw.FAMILIES[c[0]] for c in eager}), 3)
        for w, mode, _ in pw.ALL_CONFIGS:
            self.assertIn(w, pw.WORKLOAD_NAMES)
            self.assertIn(mode, ("train", "infer"))
        # eager before compiled, so a spent budget drops compiled ones
        flags = [c[2] for c in pw.ALL_CONFIGS]
        self.assertEqual(flags, sorted(flags))

    def test_all_driver_records_failures_and_the_budget(self):
        import profile_workload as pw
        with tempfile.TemporaryDirectory() as d:
            out = pathlib.Path(d)
            args = pw.parser().parse_args(["--all", "--out-dir", d, "--budget", "170",
                                           "--only", "dlrm-dlrmv2-train-eager,"
                                           "dlrm-dlrmv2-infer-eager,gpt-768x12-train-eager,"
                                           "gpt-768x12-train-compile"])
            now = [0.0]
            calls = []

            def run(argv, timeout, log):
                name = pathlib.Path(argv[argv.index("--dump-kernels") + 1]).name
                name = name[: -len(".kernels.txt")]
                calls.append((name, timeout, "--compile" in argv))
                log.write_text("log\n")
                if name == "dlrm-dlrmv2-train-eager":
                    now[0] += 50
                    (out / f"{name}.toml").write_text(
                        "name = \"x\"\nstep_ms = 2.5\ngpu_ms = 2.0\ncoverage = 0.99\n"
                        "\n[fractions]\nembedding_bag_sum = 0.25\ndot_interaction = 0.05\n"
                        "\n[classes]\nmatmul = 0.7\n")
                    return 0, False
                if name == "dlrm-dlrmv2-infer-eager":
                    now[0] += 10
                    return 1, False  # e.g. a torch.compile error
                now[0] += timeout
                return -9, True

            rows = pw.run_all(args, run=run, clock=lambda: now[0])
            self.assertEqual([r["name"] for r in rows],
                             ["dlrm-dlrmv2-train-eager", "dlrm-dlrmv2-infer-eager",
                              "gpt-768x12-train-eager", "gpt-768x12-train-compile"])
            self.assertEqual(rows[0]["status"], "ok")
            self.assertAlmostEqual(rows[0]["addressable"], 0.30)
            self.assertEqual(rows[0]["coverage"], 0.99)
            self.assertTrue(rows[1]["status"].startswith("failed: exit 1"))
            self.assertTrue(rows[2]["status"].startswith("failed: over its 100 s"))
            self.assertEqual(rows[3]["status"], "skipped (budget spent)")
            self.assertEqual([c[1] for c in calls], [100, 100, 100])
            summary = (out / "summary.txt").read_text()
            self.assertIn("1 of 4 configs profiled", summary)
            self.assertEqual(len(json.loads((out / "summary.json").read_text())), 4)

    def test_source_options_drop_paths(self):
        import profile_workload as pw
        self.assertEqual(pw.source_options(["--workload", "gpt-768x12", "--out-dir", "/x",
                                            "--dump-kernels=/y", "--compile"]),
                         "--workload gpt-768x12 --compile")
        self.assertEqual(pw.source_options([]), "(defaults)")

    def test_child_command_line_parses(self):
        import profile_workload as pw
        args = pw.parser().parse_args(["--all", "--out-dir", "/tmp/wl", "--tf32"])
        argv = pw.child_argv(args, "sasrec-seq256", "infer", True)
        child = pw.parser().parse_args(argv[2:])
        self.assertEqual((child.workload, child.mode, child.compile, child.tf32),
                         ("sasrec-seq256", "infer", True, True))
        self.assertEqual(child.dump_kernels.name, "sasrec-seq256-infer-compile.kernels.txt")
        self.assertFalse(child.all)


if __name__ == "__main__":
    unittest.main()
