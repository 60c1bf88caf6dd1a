#!/usr/bin/python3
"""`--streamed-layers N` (the last N layers' weights in pinned host memory, CUDA only;
docs/design/weight-staging.md) through generate, serve, forward and bench step: a count the model
does not have, or streaming on the CPU backend, exits 1 with one line naming the value and what
was expected. The streamed steps themselves are checked on the GPU (tests/gpu/cuda_step_test.cc).

    /usr/bin/python3 tests/cli/test_streamed_layers.py --mosaic build/src/cli/mosaic
"""

import os
import shutil
import tempfile
import unittest

import cli_harness as harness

run = harness.run


class StreamedLayers(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="mosaic_streamed_layers_")
        cls.model = os.path.join(cls.tmp, "model")
        code, _, err = run("make-test-model", "--family", "llada", "--layers", "2", "--hidden", "64",
                           "--heads", "2", "--ffn", "96", "--vocab", "1024", "--seed", "3", "--quiet",
                           "--out", cls.model)
        assert code == 0, err

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def commands(self, count):
        n = str(count)
        return (["generate", "--model", self.model, "--device", "cpu", "--ids", "1,2", "--gen-length", "2",
                 "--steps", "1", "--quiet", "--streamed-layers", n],
                ["serve", "--model", self.model, "--device", "cpu", "--port", "0", "--streamed-layers", n],
                ["forward", "--model", self.model, "--device", "cpu", "--ids", "1,1000", "--streamed-layers", n],
                ["bench", "step", "--model", self.model, "--device", "cpu", "--seq-len", "16", "--warmup", "0",
                 "--repeats", "1", "--streamed-layers", n])

    def test_streaming_on_the_cpu_is_refused(self):
        for args in self.commands(1):
            status, _, err = run(*args)
            harness.assert_error(self, status, err, "streamed layers 1: the CPU backend holds every weight in "
                                 "host memory already (streaming applies to --device cuda)", what=f"{args[0]}: ")

    def test_a_count_the_model_does_not_have_is_refused(self):
        for args in self.commands(3):
            status, _, err = run(*args)
            harness.assert_error(self, status, err, "streamed layers 3: the model has 2 decoder layers "
                                 "(expected 0 to 2)", what=f"{args[0]}: ")

    def test_auto_streams_nothing_on_the_cpu(self):
        for args in self.commands("auto"):
            if args[0] == "serve":
                continue  # it would serve until stopped; its flag is parsed by the same helper
            status, _, err = run(*args)
            self.assertEqual(status, 0, f"{args[0]}: {err}")
            self.assertNotIn("streamed", err)

    def test_a_count_that_is_not_a_number_is_refused(self):
        for value in ("two", "-1", "1.5"):
            for args in self.commands(value):
                status, _, err = run(*args)
                # A usage error (CLI11's exit status 2), as for any option's malformed value.
                harness.assert_error(self, status, err, f"'{value}' is not a layer count (expected auto or 0 to "
                                     "the model's decoder layers)", code=2, what=f"{args[0]} {value}: ")


if __name__ == "__main__":
    _, argv = harness.parse_args()
    unittest.main(argv=argv)
