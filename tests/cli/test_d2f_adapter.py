#!/usr/bin/python3
"""The shipped D2F adapter (models/kjv-llada-12m-d2f, tools/train/train_d2f.py) loads on the built-in
model and decodes with `mosaic generate --adapter ... --d2f`: exit 0, steps == forwards + 1
(docs/design/d2f-decoding.md, step 3), gen_length tokens and no mask left; at the characterization's
thresholds (skip 1.0, tau_add 0.5, tau_act 0.9, B = 32) the step count is 29 n + 4 for n blocks.

    /usr/bin/python3 tests/cli/test_d2f_adapter.py --mosaic build/src/cli/mosaic
"""

import json
import os
import unittest

import cli_harness as harness

run = harness.run
MODELS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "models")
BASE = os.path.join(MODELS, "kjv-llada-12m")
ADAPTER = os.path.join(MODELS, "kjv-llada-12m-d2f")
MASK_ID = 4095


class D2fAdapter(unittest.TestCase):
    def generate(self, *options, gen_length=64):
        status, out, err = run("generate", "--model", BASE, "--adapter", ADAPTER, "--d2f", "--device", "cpu",
                               "--prompt", "And it came to pass", "--prompt", "The LORD is my",
                               "--gen-length", str(gen_length), "--json", "--quiet", *options)
        self.assertEqual(status, 0, err)
        results = json.loads(out)["results"]
        self.assertEqual(len(results), 2)
        for r in results:
            self.assertEqual(r["steps"], r["forwards"] + 1, r)
            self.assertEqual(len(r["output_ids"]), gen_length)
            self.assertNotIn(MASK_ID, r["output_ids"])
        return results

    def test_adapter_is_merged(self):
        status, out, err = run("forward", "--model", BASE, "--adapter", ADAPTER, "--ids", "1054,355,4095",
                               "--json")
        self.assertEqual(status, 0, err)
        self.assertEqual(json.loads(out)["adapter"]["adapted_projections"], 48)  # q, k, v, attn_out x 12

    def test_paper_thresholds(self):
        self.generate("--block-length", "16", "--skip-threshold", "0.9", "--block-add-threshold", "0.1",
                      "--decoded-token-threshold", "0.95")

    def test_low_skip_threshold(self):
        for r in self.generate("--block-length", "16", "--skip-threshold", "0.3", "--block-add-threshold", "0.1",
                               "--decoded-token-threshold", "0.95"):
            self.assertLessEqual(r["forwards"], 64)

    def test_characterization_steps(self):
        for r in self.generate("--block-length", "32", "--skip-threshold", "1.0", "--block-add-threshold", "0.5",
                               "--decoded-token-threshold", "0.9"):
            self.assertIn(r["steps"], (29 * 1 + 4, 29 * 2 + 4), r)


if __name__ == "__main__":
    _, argv = harness.parse_args()
    unittest.main(argv=argv)
