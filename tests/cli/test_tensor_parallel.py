#!/usr/bin/python3
"""`--tensor-parallel N` and `--context-parallel N` (docs/design/tensor-parallel.md, context-parallel.md) through generate, serve, forward and plan:
a rank count the model does not split into exits 1 with one line naming the dimension, a count
below 1 is a usage error, and on the CPU the ranks generate what one rank does. The logits and
generations against the NumPy reference are tests/reference (check_forward, check_generate,
check_cached_generate).

    /usr/bin/python3 tests/cli/test_tensor_parallel.py --mosaic build/src/cli/mosaic
"""

import json
import os
import shutil
import tempfile
import unittest

import cli_harness as harness

run = harness.run


class TensorParallel(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="mosaic_tensor_parallel_")
        cls.model = os.path.join(cls.tmp, "model")
        code, _, err = run("make-test-model", "--family", "llada", "--layers", "2", "--hidden", "64",
                           "--heads", "4", "--ffn", "96", "--vocab", "1024", "--seed", "3", "--quiet",
                           "--out", cls.model)
        assert code == 0, err

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def commands(self, ranks):
        n = str(ranks)
        return (["generate", "--model", self.model, "--device", "cpu", "--ids", "1,2", "--gen-length", "4",
                 "--steps", "4", "--quiet", "--json", "--tensor-parallel", n],
                ["serve", "--model", self.model, "--device", "cpu", "--port", "0", "--tensor-parallel", n],
                ["forward", "--model", self.model, "--device", "cpu", "--ids", "1,1000", "--tensor-parallel", n],
                ["plan", "--model", self.model, "--seq-len", "64", "--tensor-parallel", n])

    def test_a_count_the_model_does_not_split_into_is_refused(self):
        for args in self.commands(3):
            status, _, err = run(*args)
            harness.assert_error(self, status, err, "--tensor-parallel 3: the model's 4 attention heads do not "
                                 "divide into 3 equal parts", what=f"{args[0]}: ")

    def test_a_count_below_one_is_a_usage_error(self):
        for args in self.commands(0):
            status, _, err = run(*args)
            self.assertEqual(status, 2, f"{args[0]}: {err}")
            self.assertIn("--tensor-parallel", err)

    def test_ranks_generate_what_one_rank_does(self):
        one, four = self.commands(1)[0], self.commands(4)[0]
        results = []
        for args in (one, four):
            status, out, err = run(*args)
            self.assertEqual(status, 0, err)
            results.append(json.loads(out))
        self.assertEqual(results[0]["results"][0]["output_ids"], results[1]["results"][0]["output_ids"])

    def test_plan_reports_one_ranks_collectives(self):
        status, out, err = run("plan", "--model", self.model, "--seq-len", "64", "--tensor-parallel", "2", "--json")
        self.assertEqual(status, 0, err)
        report = json.loads(out)["tensor_parallel"]
        self.assertEqual(report["ranks"], 2)
        self.assertEqual(report["all_reduces"], 1 + 2 * 2)
        # x's 64 rows, then per layer the output and down projections' (32 candidate rows in the last).
        self.assertEqual(report["all_reduce_bytes"], 2 * 64 * (64 + 2 * 64 + 2 * 32))


class ContextParallel(unittest.TestCase):
    """`--context-parallel N`: the ranks' rows predict what one rank does; the KV cache and tensor
    parallelism beside it are refused by name."""

    @classmethod
    def setUpClass(cls):
        TensorParallel.setUpClass.__func__(cls)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def generate(self, *extra):
        return run("generate", "--model", self.model, "--device", "cpu", "--ids", "1,2,3,4,5", "--gen-length", "8",
                   "--steps", "8", "--quiet", "--json", *extra)

    def test_ranks_generate_what_one_rank_does(self):
        outputs = []
        for extra in ((), ("--context-parallel", "3")):
            status, out, err = self.generate(*extra)
            self.assertEqual(status, 0, err)
            outputs.append(json.loads(out)["results"][0]["output_ids"])
        self.assertEqual(outputs[0], outputs[1])

    def test_the_cache_and_tensor_parallelism_beside_it_are_refused(self):
        status, _, err = self.generate("--context-parallel", "2", "--cache", "dual")
        harness.assert_error(self, status, err, "--context-parallel 2: ", "not supported", "(expected --cache none)")
        status, _, err = self.generate("--context-parallel", "2", "--tensor-parallel", "2")
        harness.assert_error(self, status, err, "--tensor-parallel 2 with --context-parallel 2: not supported yet")

    def test_plan_reports_the_busiest_ranks_gathers(self):
        status, out, err = run("plan", "--model", self.model, "--seq-len", "64", "--context-parallel", "4", "--json")
        self.assertEqual(status, 0, err)
        report = json.loads(out)["context_parallel"]
        self.assertEqual((report["ranks"], report["rank"], report["rank_tokens"]), (4, 2, 16))
        self.assertEqual(report["all_gathers"], 2 * 2)


if __name__ == "__main__":
    _, argv = harness.parse_args()
    unittest.main(argv=argv)
