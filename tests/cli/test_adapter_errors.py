#!/usr/bin/python3
"""Damaged or mismatched LoRA adapters: `mosaic forward|generate|serve --adapter` must exit 1
with one line naming the tensor or field and what was expected (docs/design/lora-adapters.md).

    /usr/bin/python3 tests/cli/test_adapter_errors.py --mosaic build/src/cli/mosaic

Each test writes a tiny random LLaDA base (`mosaic make-test-model`) and a good random adapter
(tests/reference/make_lora_adapter.py), damages one thing, and checks the refusal.
"""

import json
import os
import shutil
import sys
import tempfile
import unittest

import cli_harness as harness

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reference"))
import make_lora_adapter  # noqa: E402
import safetensors_np as st  # noqa: E402

run = harness.run
Q0 = "base_model.model.model.transformer.blocks.0.q_proj"


class AdapterErrors(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="mosaic_adapter_errors_")
        cls.model = os.path.join(cls.tmp, "model")
        code, _, err = run("make-test-model", "--family", "llada", "--layers", "1", "--hidden", "64",
                           "--heads", "2", "--ffn", "96", "--vocab", "1024", "--seed", "3", "--quiet",
                           "--out", cls.model)
        assert code == 0, err

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def setUp(self):
        self.adapter = os.path.join(self.tmp, self.id().rsplit(".", 1)[-1])
        make_lora_adapter.write_adapter(self.model, self.adapter, 4, 8, ["q_proj", "attn_out"], seed=1)

    def edit_config(self, **changes):
        path = os.path.join(self.adapter, "adapter_config.json")
        with open(path, encoding="utf-8") as f:
            config = json.load(f)
        config.update(changes)
        with open(path, "w", encoding="utf-8") as f:
            json.dump(config, f)

    def edit_tensors(self, edit):
        path = os.path.join(self.adapter, "adapter_model.safetensors")
        tensors = st.load_file(path)
        edit(tensors)
        st.save_file(path, tensors, dtype="F32")

    def assert_refused(self, *fragments):
        for args in (["forward", "--model", self.model, "--ids", "1,1000", "--adapter", self.adapter],
                     ["generate", "--model", self.model, "--ids", "1,2", "--gen-length", "2", "--steps", "1",
                      "--quiet", "--adapter", self.adapter],
                     ["serve", "--model", self.model, "--device", "cpu", "--port", "0", "--adapter", self.adapter],
                     ["plan", "--model", self.model, "--seq-len", "64", "--device", "cpu", "--adapter", self.adapter]):
            status, _, err = run(*args)
            harness.assert_error(self, status, err, *fragments, what=f"{args[0]}: ")

    def test_plan_counts_the_merged_copies(self):
        # A bf16 base: on the CPU each merged projection (q and attn_out, 64 x 64, one layer) is an
        # fp32 copy instead of the bf16 tensor, 2 more bytes an element; CUDA holds bf16: nothing.
        base = os.path.join(self.tmp, "bf16-model")
        code, _, err = run("make-test-model", "--family", "llada", "--layers", "1", "--hidden", "64",
                           "--heads", "2", "--ffn", "96", "--vocab", "1024", "--seed", "3", "--quiet",
                           "--dtype", "bf16", "--out", base)
        self.assertEqual(code, 0, err)
        adapter = os.path.join(self.tmp, "bf16-adapter")
        make_lora_adapter.write_adapter(base, adapter, 4, 8, ["q_proj", "attn_out"], seed=2)
        plans = {}
        for device in ("cpu", "cuda"):
            for with_adapter in (False, True):
                args = ["plan", "--model", base, "--seq-len", "64", "--device", device, "--json"]
                status, out, err = run(*(args + (["--adapter", adapter] if with_adapter else [])))
                self.assertEqual(status, 0, err)
                plans[device, with_adapter] = json.loads(out)
        extra = 2 * 64 * 64 * 2
        self.assertEqual(plans["cpu", True]["weight_bytes"], plans["cpu", False]["weight_bytes"] + extra)
        self.assertEqual(plans["cuda", True]["weight_bytes"], plans["cuda", False]["weight_bytes"])
        self.assertEqual(plans["cpu", True]["adapter"],
                         {"path": adapter, "projections": 2, "rank": 4, "merged_extra_bytes": extra})
        self.assertEqual(plans["cuda", True]["adapter"]["merged_extra_bytes"], 0)
        self.assertNotIn("adapter", plans["cpu", False])
        status, out, err = run("plan", "--model", base, "--seq-len", "64", "--device", "cpu", "--adapter", adapter)
        self.assertEqual(status, 0, err)
        self.assertIn("adapter", out)
        self.assertIn("rank 4 on 2 projections", out)

    def test_good_adapter_is_merged(self):
        status, out, err = run("forward", "--model", self.model, "--ids", "1,1000", "--json",
                               "--adapter", self.adapter)
        self.assertEqual(status, 0, err)
        self.assertEqual(json.loads(out)["adapter"]["adapted_projections"], 2)

    def test_missing_lora_b(self):
        self.edit_tensors(lambda t: t.pop(Q0 + ".lora_B.weight"))
        self.assert_refused(f"missing tensor '{Q0}.lora_B.weight'")

    def test_missing_module(self):
        self.edit_tensors(lambda t: [t.pop(Q0 + ".lora_A.weight"), t.pop(Q0 + ".lora_B.weight")])
        self.assert_refused(f"missing tensors '{Q0}.lora_A.weight'", "expected [4, 64] and [64, 4]")

    def test_wrong_base_shape(self):
        self.edit_tensors(lambda t: t.update({Q0 + ".lora_B.weight": t[Q0 + ".lora_B.weight"][:32]}))
        self.assert_refused(f"'{Q0}.lora_B.weight' has shape [32, 4]", "needs lora_B [64, 4]")

    def test_unknown_target_module(self):
        self.edit_config(target_modules=["q_proj", "o_proj"])
        self.assert_refused("target_modules entry 'o_proj' names no projection of this llada checkpoint")

    def test_rank_zero(self):
        self.edit_config(r=0)
        self.assert_refused("adapter_config.json: 'r' must be a positive integer (the LoRA rank), got 0")

    def test_rank_mismatch(self):
        self.edit_config(r=8)
        self.assert_refused("has rank 4 (shape [4, 64]) but adapter_config.json says r = 8: expected [8, 64]")

    def test_non_finite_scaling(self):
        self.edit_config(lora_alpha=1e300)
        self.assert_refused("'lora_alpha' 1e+300 with r 4 gives the scaling", "not a finite fp32 number")

    def test_dora_and_bias_refused(self):
        self.edit_config(use_dora=True)
        self.assert_refused("'use_dora' is true; DoRA adapters are not supported")
        self.edit_config(use_dora=False, bias="lora_only")
        self.assert_refused("'bias' is \"lora_only\"; only \"none\" is supported")

    def test_bin_adapter_refused(self):
        os.remove(os.path.join(self.adapter, "adapter_model.safetensors"))
        with open(os.path.join(self.adapter, "adapter_model.bin"), "wb") as f:
            f.write(b"PK\x03\x04 not read")
        self.assert_refused("holds PyTorch adapter_model.bin; Mosaic reads safetensors")

    def test_not_a_folder(self):
        self.adapter = os.path.join(self.tmp, "nowhere")
        self.assert_refused("nowhere: not a directory (expected a PEFT adapter folder")

    def test_adapter_for_another_family(self):
        self.edit_tensors(lambda t: t.update({
            "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight": t.pop(Q0 + ".lora_A.weight"),
            "base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight": t.pop(Q0 + ".lora_B.weight")}))
        self.assert_refused("is for module 'model.layers.0.self_attn.q_proj', which is no projection of this "
                            "llada checkpoint")


if __name__ == "__main__":
    _, argv = harness.parse_args()
    unittest.main(argv=argv)
