#!/usr/bin/python3
"""Hostile and careless arguments: every one refused by name, none silently ignored, wrapped or
turned into a crash, a hang or a runaway allocation.

    /usr/bin/python3 tests/cli/test_hostile_args.py --mosaic build/src/cli/mosaic

The expectations are what a careful user would ask for (issue 29): exit status 1 and one line
"mosaic: error: ..." naming the option (2 for CLI usage errors), within seconds, never a signal
and never "internal error". Non-finite weights must be detected, not decoded into token id -1.
"""

import json
import os
import shutil
import struct
import tempfile
import time
import unittest

import cli_harness as harness

SECONDS = 60  # a refusal is immediate; anything near this is the runaway the test guards against


def run(*args, timeout=SECONDS):
    return harness.run(*args, timeout=timeout)


class HostileArgs(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # head_dim 64 (hidden 128, 2 heads): a shape the CUDA kernels take, so that on a GPU machine
        # the same cases run the CUDA backend.
        cls.tmp = tempfile.mkdtemp(prefix="mosaic_hostile_args_")
        cls.llada = os.path.join(cls.tmp, "llada")
        cls.dream = os.path.join(cls.tmp, "dream")
        for family, out in (("llada", cls.llada), ("dream", cls.dream)):
            code, _, err = run("make-test-model", "--family", family, "--layers", "1", "--hidden", "128",
                               "--heads", "2", "--ffn", "96", "--vocab", "1024", "--seed", "3", "--quiet",
                               "--out", out)
            assert code == 0, err

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def assert_error(self, args, *fragments, code=1):
        start = time.monotonic()
        status, out, err = run(*args)
        self.assertLess(time.monotonic() - start, 20, f"{args} took too long to refuse")
        self.assertNotIn("internal error", err)
        harness.assert_error(self, status, err, *fragments, code=code, what=f"{args}: stdout {out[:300]}; ")

    def generate(self, *extra, model=None, gen_length="8", steps="8"):
        return ["generate", "--model", model or self.llada, "--ids", "1,2,3", "--gen-length", gen_length,
                "--steps", steps, "--quiet", *extra]

    # --- sampling values the engine must refuse, not ignore --------------------------------
    def test_temperature_too_small_to_compute(self):
        self.assert_error(self.generate("--temperature", "1e-320"),
                          "temperature must be 0 (greedy) or at least 1e-05, got 1e-320")
        self.assert_error(self.generate("--temperature", "nan"), "temperature must be a finite number")

    def test_cfg_scale_out_of_range(self):
        self.assert_error(self.generate("--cfg-scale", "1e39"), "cfg_scale must be in [0, 1000000], got 1e+39")
        self.assert_error(self.generate("--cfg-scale", "-1"), "cfg_scale must be in [0, 1000000]")

    def test_rule_values(self):
        for value in ("-1", "nan", "1.5"):
            self.assert_error(self.generate("--threshold", value), "threshold must be in [0, 1], got")
        for value in ("-1", "nan", "0"):
            self.assert_error(self.generate("--factor", value), "factor must be > 0, got")

    def test_dream_values(self):
        for flag, value, message in (("--top-p", "-1", "top_p must be in (0, 1], got -1"),
                                     ("--top-p", "nan", "top_p must be in (0, 1], got nan"),
                                     ("--top-k", "-1", "top_k must be at least 1, got -1"),
                                     ("--top-k", "0", "top_k must be at least 1, got 0"),
                                     ("--alg-temp", "nan", "alg_temp must be >= 0, got nan"),
                                     ("--alg-temp", "-1", "alg_temp must be >= 0, got -1")):
            self.assert_error(self.generate(flag, value, model=self.dream), message)
        # The Dream options given to a LLaDA model at all, whatever their value.
        self.assert_error(self.generate("--top-k", "-1"), "apply to Dream models, not LLaDA")

    def test_block_length_zero(self):
        self.assert_error(self.generate("--block-length", "0"), "--block-length must be at least 1, got 0")

    def test_token_ids(self):
        self.assert_error(self.generate("--eot-id", "-7"), "--eot-id must be a token id (>= 0), got -7")
        self.assert_error(self.generate("--eot-id", "1024"), "eot id 1024 is outside the vocabulary of 1024 tokens")

    def test_seed_outside_64_bits(self):
        self.assert_error(self.generate("--seed", "-1"), "--seed: '-1' is not an integer in [0, 2^64)")
        self.assert_error(self.generate("--seed", "18446744073709551616"),
                          "--seed: '18446744073709551616' is not an integer in [0, 2^64)")
        status, _, err = run(*self.generate("--seed", "18446744073709551615"))
        self.assertEqual(status, 0, err)

    def test_empty_budget(self):
        self.assert_error(self.generate("--budget", ""), "--budget")

    def test_chat_with_ids(self):
        self.assert_error(self.generate("--chat"), "--chat wraps text in the model's chat format; --ids are token ids")

    # --- sizes checked before anything is allocated ----------------------------------------
    def test_gen_length_overflow(self):
        self.assert_error(self.generate(gen_length="9223372036854775807"),
                          "gen_length 9223372036854775807 exceeds the 2147483647 positions a step can hold")

    def test_gen_length_beyond_the_budget(self):
        self.assert_error(["generate", "--model", self.llada, "--ids", "1,2,3", "--gen-length", "1000000000",
                           "--steps", "8", "--allow-long-context", "--budget", "256MiB", "--quiet"],
                          "needs", "the budget is 256.00 MiB")
        # No budget: the machine's memory is the limit, and the plan says so before allocating.
        self.assert_error(["generate", "--model", self.llada, "--ids", "1,2,3", "--gen-length", "1000000000",
                           "--steps", "8", "--allow-long-context", "--quiet"], "needs", "the budget is")

    def test_steps_beyond_what_the_request_can_use(self):
        self.assert_error(self.generate(steps="100000000000"), "steps 100000000000 exceeds gen_length 8")

    def test_prompt_file_not_a_file(self):
        self.assert_error(["generate", "--model", self.llada, "--prompt-file", self.tmp, "--quiet"],
                          "--prompt-file:", "is not a regular file")
        self.assert_error(["generate", "--model", self.llada, "--prompt-file", os.path.join(self.tmp, "none"),
                           "--quiet"], "--prompt-file:", "does not exist")

    def test_plan_sizes(self):
        for length in ("9223372036854775807", "4611686018427387904", "2147483648"):
            self.assert_error(["plan", "--model", self.llada, "--seq-len", length],
                              "more than 2147483647 positions", "positions are 32-bit")
        self.assert_error(["plan", "--model", self.llada, "--seq-len", "1024", "--chunks", "1,1,100000,1"],
                          "chunk counts must be between 1 and 4096")

    def test_empty_lists(self):
        self.assert_error(["forward", "--model", self.llada, "--ids", "1,2,3", "--rows", ""], "--rows: the list is empty")
        self.assert_error(["forward", "--model", self.llada, "--ids", ""], "--ids: the list is empty")
        self.assert_error(self.generate("--ids", ""), "--ids: the list is empty")

    # --- non-finite weights: detected and named, never decoded ------------------------------
    def damaged_copy(self, tensor, value_bits):
        """A copy of the LLaDA model with every element of `tensor` set to one bf16 bit pattern."""
        out = os.path.join(self.tmp, f"nonfinite_{tensor.replace('.', '_')}_{value_bits:04x}")
        shutil.rmtree(out, ignore_errors=True)
        shutil.copytree(self.llada, out)
        path = os.path.join(out, "model.safetensors")
        with open(path, "r+b") as f:
            (length,) = struct.unpack("<Q", f.read(8))
            header = json.loads(f.read(length))
            entry = header[tensor]
            self.assertEqual(entry["dtype"], "BF16")
            begin, end = entry["data_offsets"]
            f.seek(8 + length + begin)
            f.write(struct.pack("<H", value_bits) * ((end - begin) // 2))
        return out

    def test_nan_and_inf_weights(self):
        for bits in (0x7FC0, 0x7F80):  # bf16 NaN, +Inf
            model = self.damaged_copy("model.transformer.ln_f.weight", bits)
            for steps in ("1", "8"):
                self.assert_error(["generate", "--model", model, "--ids", "1,2,3", "--gen-length", "8",
                                   "--steps", steps, "--quiet"], "not finite")

    # --- the sweep: nothing ends by a signal or an internal error ---------------------------
    def test_no_argument_ends_in_a_signal(self):
        hostile = [
            ["generate", "--model", self.llada, "--ids", "1", "--gen-length", "-1"],
            ["generate", "--model", self.llada, "--ids", "1", "--steps", "-9223372036854775808"],
            ["generate", "--model", self.llada, "--ids", "1", "--block-length", "9223372036854775807"],
            ["generate", "--model", self.llada, "--ids", "2147483647"],
            ["generate", "--model", self.llada, "--ids", "-2147483648"],
            ["generate", "--model", self.llada, "--ids", "0-99999999"],
            ["generate", "--model", self.llada, "--ids", "1", "--temperature", "inf"],
            ["generate", "--model", self.llada, "--ids", "1", "--cfg-scale", "nan"],
            ["generate", "--model", self.llada, "--ids", "1", "--budget", "-1"],
            ["generate", "--model", self.llada, "--ids", "1", "--budget", "99999999999999999999TiB"],
            ["generate", "--model", self.llada, "--ids", "1", "--device", "cuda:9999999999"],
            ["forward", "--model", self.llada, "--ids", "1,2", "--rows", "-1"],
            ["forward", "--model", self.llada, "--ids", "1,2", "--rows", "2147483647"],
            ["forward", "--model", self.llada, "--ids", "1,1000", "--top", "-5"],
            ["forward", "--model", self.llada, "--ids", "1,1000", "--top", "9223372036854775807"],
            ["plan", "--model", self.llada, "--seq-len", "1024", "--masked", "-3"],
            ["plan", "--model", self.llada, "--seq-len", "1024", "--prompt-len", "-3"],
            ["plan", "--model", self.llada, "--batch", "1,-1"],
            ["plan", "--model", self.llada, "--batch", ",".join(["2147483647"] * 3)],
            ["plan", "--model", self.llada, "--seq-len", "1024", "--cached-rows", "-1"],
            ["plan", "--model", self.llada, "--seq-len", "1024", "--chunks", "0,0,0,0"],
            ["plan", "--model", self.llada, "--seq-len", "1024", "--budget", "1B"],
            ["plan", "--model", self.llada, "--find-lmax", "--budget", "1B"],
            ["make-test-model", "--family", "llada", "--seed", "-1", "--out", os.path.join(self.tmp, "m")],
            ["make-test-model", "--family", "llada", "--preset", "tiny", "--layers", "-1", "--seed", "1",
             "--out", os.path.join(self.tmp, "m")],
            ["make-test-model", "--family", "llada", "--preset", "tiny", "--hidden", "3", "--seed", "1",
             "--out", os.path.join(self.tmp, "m")],
            ["make-test-model", "--family", "llada", "--preset", "tiny", "--vocab", "9223372036854775807",
             "--seed", "1", "--out", os.path.join(self.tmp, "m")],
        ]
        for args in hostile:
            status, out, err = run(*args)
            self.assertGreaterEqual(status, 0, f"{args} ended by signal {-status}: {err}")
            self.assertIn(status, (0, 1, 2), f"{args}: status {status}: {err}")
            self.assertNotIn("internal error", err, f"{args}")
            if status == 1:
                self.assertTrue(err.startswith("mosaic: error: ") and err.count("\n") == 1, f"{args}: {err}")


if __name__ == "__main__":
    _, argv = harness.parse_args()
    unittest.main(argv=argv)
