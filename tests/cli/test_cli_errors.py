#!/usr/bin/python3
"""Damaged checkpoints and bad arguments: `mosaic` must exit non-zero with one clear line.

    /usr/bin/python3 tests/cli/test_cli_errors.py --mosaic build/src/cli/mosaic

Each test writes a tiny random checkpoint with `mosaic make-test-model`, damages one thing the
way real files get damaged (truncated downloads, hand-edited headers, mismatched configs), runs
`mosaic info` or `mosaic forward`, and checks: exit status 1 (2 for usage errors), no crash
(a signal would give a negative status), and the message on stderr naming the culprit.
"""

import json
import os
import shutil
import struct
import tempfile
import unittest

import cli_harness as harness

run = harness.run


def read_safetensors(path):
    """(header dict, data bytes) of a safetensors file, read with the standard library."""
    with open(path, "rb") as f:
        blob = f.read()
    (length,) = struct.unpack("<Q", blob[:8])
    return json.loads(blob[8:8 + length]), blob[8 + length:]


def write_safetensors(path, header, data, declared_length=None):
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    length = len(text) if declared_length is None else declared_length
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", length) + text + data)


class CliErrors(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="mosaic_cli_errors_")
        self.model = os.path.join(self.tmp, "model")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def make(self, family="llada", shards=1):
        code, _, err = run("make-test-model", "--family", family, "--layers", "1", "--hidden", "64",
                           "--heads", "2", "--ffn", "96", "--vocab", "1024", "--seed", "3",
                           "--shards", str(shards), "--quiet", "--out", self.model)
        self.assertEqual(code, 0, err)
        return os.path.join(self.model, "model.safetensors")

    def assert_error(self, args, *fragments, code=1):
        status, _, err = run(*args)
        harness.assert_error(self, status, err, *fragments, code=code)

    def load_error(self, *fragments):
        self.assert_error(["info", "--model", self.model], *fragments)
        self.assert_error(["forward", "--model", self.model, "--ids", "1,1000"], *fragments)

    # --- the damage the foundation issue lists ------------------------------------------
    def test_truncated_file(self):
        path = self.make()
        os.truncate(path, os.path.getsize(path) - 1000)
        self.load_error("model.safetensors: tensor 'model.transformer.ff_out.weight'",
                        "lies outside the file's data section", "(truncated file?)")

    def test_header_length_beyond_file(self):
        path = self.make()
        header, data = read_safetensors(path)
        write_safetensors(path, header, data, declared_length=10**12)
        self.load_error("model.safetensors: header length 1000000000000 extends beyond the end of the file")

    def test_header_not_json(self):
        path = self.make()
        with open(path, "r+b") as f:
            f.seek(8)
            f.write(b"{not json")
        self.load_error("model.safetensors: safetensors header is not valid JSON")

    def test_tensor_data_outside_file(self):
        path = self.make()
        header, data = read_safetensors(path)
        entry = header["model.transformer.ln_f.weight"]
        entry["data_offsets"] = [len(data), len(data) + 128]
        write_safetensors(path, header, data)
        self.load_error("tensor 'model.transformer.ln_f.weight': data [", "lies outside the file's data section")

    def test_overlapping_tensors(self):
        path = self.make()
        header, data = read_safetensors(path)
        header["model.transformer.ln_f.weight"]["data_offsets"] = \
            header["model.transformer.blocks.0.attn_norm.weight"]["data_offsets"]
        write_safetensors(path, header, data)
        self.load_error("overlap in the data section")

    def test_unknown_dtype(self):
        path = self.make()
        header, data = read_safetensors(path)
        header["model.transformer.ln_f.weight"]["dtype"] = "BF17"
        write_safetensors(path, header, data)
        self.load_error("tensor 'model.transformer.ln_f.weight': unknown dtype 'BF17'")

    def test_shape_disagrees_with_config(self):
        self.make()
        config_path = os.path.join(self.model, "config.json")
        with open(config_path) as f:
            config = json.load(f)
        config["mlp_hidden_size"] = 128
        with open(config_path, "w") as f:
            json.dump(config, f)
        self.load_error("tensor 'model.transformer.blocks.0.ff_proj.weight' has shape [96, 64] "
                        "but config.json implies [128, 64]")

    def test_missing_tensor(self):
        path = self.make()
        header, data = read_safetensors(path)
        begin, end = header.pop("model.transformer.blocks.0.v_proj.weight")["data_offsets"]
        for entry in header.values():  # its bytes go too: a gap in the data section is refused first
            if "data_offsets" in entry and entry["data_offsets"][0] >= end:
                entry["data_offsets"] = [offset - (end - begin) for offset in entry["data_offsets"]]
        write_safetensors(path, header, data[:begin] + data[end:])
        self.load_error("missing tensor 'model.transformer.blocks.0.v_proj.weight'")

    def test_unexpected_tensor(self):
        path = self.make()
        header, data = read_safetensors(path)
        header["model.transformer.blocks.0.extra.weight"] = {
            "dtype": "BF16", "shape": [2], "data_offsets": [len(data), len(data) + 4]}
        write_safetensors(path, header, data + bytes(4))
        self.load_error("unexpected tensor 'model.transformer.blocks.0.extra.weight'")

    def test_missing_config_field(self):
        self.make("dream")
        config_path = os.path.join(self.model, "config.json")
        with open(config_path) as f:
            config = json.load(f)
        del config["hidden_size"]
        with open(config_path, "w") as f:
            json.dump(config, f)
        self.load_error("config.json: missing field 'hidden_size' (Dream config)")

    def test_config_not_json(self):
        self.make()
        with open(os.path.join(self.model, "config.json"), "w") as f:
            f.write('{"d_model": 64,')
        self.load_error("config.json: not valid JSON")

    def test_llada_moe_config_errors(self):
        os.makedirs(self.model)
        config = {"architectures": ["LLaDAMoEModelLM"], "model_type": "llada",
                  "hidden_size": 2048, "num_hidden_layers": 16, "num_attention_heads": 16,
                  "num_experts": 64, "num_experts_per_tok": 8, "vocab_size": 157184}
        with open(os.path.join(self.model, "config.json"), "w") as f:
            json.dump(config, f)
        self.load_error("missing field 'expert_intermediate_size' (LLaDA-MoE config)")
        config.update(expert_intermediate_size=1024, moe_layer_freq=[1, 0] * 8)
        with open(os.path.join(self.model, "config.json"), "w") as f:
            json.dump(config, f)
        self.load_error("field 'moe_layer_freq'", "is not supported (every layer of LLaDA-MoE is a mixture of experts")

    def test_missing_shard(self):
        self.make(shards=2)
        os.remove(os.path.join(self.model, "model-00001-of-00002.safetensors"))
        self.load_error("shard 'model-00001-of-00002.safetensors' named by model.safetensors.index.json does not exist")

    def test_not_a_model_folder(self):
        self.assert_error(["info", "--model", os.path.join(self.tmp, "nowhere")], "not a directory")

    # --- bad arguments -------------------------------------------------------------------
    def test_bad_ids_and_rows(self):
        self.make()
        self.assert_error(["forward", "--model", self.model, "--ids", "1,x"], "--ids: 'x' is not an integer")
        self.assert_error(["forward", "--model", self.model, "--ids", "1,5000", "--rows", "0"],
                          "token id 5000 at position 1 is outside the vocabulary [0, 1024)")
        self.assert_error(["forward", "--model", self.model, "--ids", "1,2", "--rows", "2"],
                          "requested row 2 is outside the sequence of length 2")
        self.assert_error(["forward", "--model", self.model, "--ids", "1,2"],
                          "no masked position (mask id 1000) and no --rows")
        self.assert_error(["forward", "--model", self.model, "--ids", "1", "--ids", "2", "--rows", "0"],
                          "--rows was given 1 times but --ids 2 times")

    def test_usage_errors_exit_2(self):
        self.assert_error(["forward", "--ids", "1"], "--model is required", code=2)
        self.assert_error(["no-such-command"], code=2)
        self.assert_error(["make-test-model", "--family", "gpt", "--seed", "1", "--out", self.model], code=2)

    # --- mosaic plan ----------------------------------------------------------------------
    def test_plan_bad_input(self):
        self.assert_error(["plan", "--model", "llada-8b", "--seq-len", "0"], "sequence length must be positive, got 0")
        self.assert_error(["plan", "--model", "llada-8b", "--seq-len", "-5"], "must be positive")
        self.assert_error(["plan", "--model", "llada-8b", "--seq-len", "64", "--masked", "65"],
                          "--masked 65 exceeds the sequence length 64")
        self.assert_error(["plan", "--model", "llada-8b", "--seq-len", "64", "--prompt-len", "70"],
                          "--prompt-len 70 exceeds the sequence length 64")
        self.assert_error(["plan", "--model", "gpt-5", "--seq-len", "64"], "'gpt-5' is neither a preset")
        self.assert_error(["plan", "--model", "llada-8b", "--batch", "64,x"], "--batch: 'x' is not an integer")
        self.assert_error(["plan", "--model", "llada-8b", "--seq-len", "64", "--chunks", "1,2"],
                          "--chunks takes four counts")
        os.makedirs(self.model)
        with open(os.path.join(self.model, "config.json"), "w") as f:
            f.write("{ broken")
        self.assert_error(["plan", "--model", self.model, "--seq-len", "64"], "config.json: not valid JSON")

    def test_plan_report_and_picture(self):
        svg = os.path.join(self.tmp, "timeline.svg")
        status, out, err = run("plan", "--model", "dream-7b", "--batch", "300,200,100", "--json", "--svg", svg)
        self.assertEqual(status, 0, err)
        report = json.loads(out)
        self.assertEqual(report["tokens"], 600)
        self.assertEqual(report["candidates"], 150 + 100 + 50)
        self.assertGreaterEqual(report["activation_peak_bytes"], report["lower_bound_bytes"])
        with open(svg) as f:
            self.assertIn("<svg", f.read())
        self.make()  # a folder works too, weights unread
        status, out, err = run("plan", "--model", self.model, "--seq-len", "128")
        self.assertEqual(status, 0, err)
        self.assertIn("activation peak", out)

    def test_plan_budget(self):
        status, out, err = run("plan", "--model", "llada-8b", "--seq-len", "262144", "--budget", "24GiB", "--json")
        self.assertEqual(status, 0, err)
        report = json.loads(out)
        self.assertLessEqual(report["total_bytes"], 24 * 2**30)
        self.assertGreater(report["chunks"]["ffn"], 1)
        self.assert_error(["plan", "--model", "llada-8b", "--seq-len", "700000", "--budget", "24GiB"],
                          "at L = 700000 tokens the step needs at least", "the residual stream in host memory",
                          "the budget is 24.000 GiB")
        self.assert_error(["plan", "--model", "llada-8b", "--seq-len", "500000", "--budget", "24GiB",
                           "--residual", "device"], "at L = 500000 tokens the step needs at least")
        self.assert_error(["plan", "--model", "llada-8b", "--seq-len", "4096", "--residual", "disk"],
                          "residual 'disk' is not a placement (expected device, host or auto)")
        self.assert_error(["plan", "--model", "llada-8b", "--seq-len", "4096", "--device", "cpu",
                           "--residual", "host"], "the CPU has one memory")
        self.assert_error(["plan", "--model", "llada-8b", "--seq-len", "4096", "--budget", "24XB"],
                          "--budget: '24XB' is not a size")
        self.assert_error(["plan", "--model", "llada-8b", "--seq-len", "4096", "--budget", "24GiB",
                           "--chunks", "1,1,2,1"], "--budget chooses the chunks itself")
        self.assert_error(["plan", "--model", "llada-8b", "--find-lmax"], "--find-lmax needs --budget")
        self.assert_error(["plan", "--model", "llada-8b", "--find-lmax", "--budget", "24GiB", "--seq-len", "4096"],
                          "--find-lmax chooses the length")

    def test_plan_find_lmax(self):
        self.make()
        # The default device (cuda) sets 64 MiB aside for workspaces; the tiny weights take 4.3 MiB.
        status, out, err = run("plan", "--model", self.model, "--find-lmax", "--budget", "128MiB", "--json")
        self.assertEqual(status, 0, err)
        report = json.loads(out)
        self.assertGreater(report["l_max"], 0)
        self.assertEqual(report["l_max"] % 1024, 0)
        self.assertLessEqual(report["at_l_max"]["total_bytes"], 128 * 2**20)

    # --- mosaic bench ----------------------------------------------------------------------
    def test_bench_bad_input(self):
        self.make()
        self.assert_error(["bench", "step", "--model", self.model, "--seq-len", "1", "--device", "cpu"],
                          "--seq-len 1")
        self.assert_error(["bench", "step", "--model", self.model, "--repeats", "0", "--device", "cpu"],
                          "--repeats")
        self.assert_error(["bench", "lmax", "--model", self.model, "--device", "cpu"], "needs --budget")
        self.assert_error(["bench", "step", "--model", self.model, "--seq-len", "64", "--masked", "64",
                           "--device", "cpu"], "--masked 64 leaves no prompt")
        self.assert_error(["bench", "step", "--model", self.tmp + "/missing"], "missing")

    def test_bench_step_reports_the_step(self):
        self.make()
        status, out, err = run("bench", "step", "--model", self.model, "--seq-len", "64,128", "--device", "cpu",
                               "--warmup", "0", "--repeats", "2", "--json")
        self.assertEqual(status, 0, err)
        report = json.loads(out)
        with open(os.path.join(self.model, "config.json")) as f:
            config = json.load(f)
        d, layers, ffn, vocab = config["d_model"], config["n_layers"], config["mlp_hidden_size"], config["vocab_size"]
        for step, length in zip(report["steps"], (64, 128)):
            self.assertEqual((step["length"], step["masked"]), (length, length // 2))
            self.assertEqual(len(step["step_ms"]), 2)
            # FLOPs counted here independently: 4 d x d projections + 3 d x ffn per token and
            # layer, Q K^T and P V over L x L, the head over the masked rows; the last layer
            # computes keys and values for every row but its queries (q and o projections,
            # attention, MLP) only for the masked rows, the only ones the head reads.
            masked = length // 2
            flops = (layers - 1) * (length * 2 * (4 * d * d + 3 * d * ffn) + 4 * length * length * d) \
                + length * 2 * (2 * d * d) + masked * 2 * (2 * d * d + 3 * d * ffn) + 4 * masked * length * d \
                + 2 * masked * d * vocab
            self.assertTrue(step["last_layer_candidates_only"])
            self.assertAlmostEqual(step["flops"], flops, delta=flops * 1e-9)
            self.assertGreaterEqual(step["par"], 1.0)
            self.assertGreaterEqual(step["inflation"], 1.0)
            self.assertLessEqual(step["lower_bound_bytes"], step["planned_peak_bytes"])
            self.assertLessEqual(step["planned_peak_bytes"], step["arena_bytes"])
        status, out, err = run("bench", "step", "--model", self.model, "--seq-len", "64", "--masked", "8",
                               "--device", "cpu", "--warmup", "0", "--repeats", "1", "--json")
        self.assertEqual(status, 0, err)
        self.assertEqual(json.loads(out)["steps"][0]["masked"], 8)

    # --- mosaic generate -------------------------------------------------------------------
    def test_generate_bad_input(self):
        self.make()
        gen = ["generate", "--model", self.model]
        self.assert_error(gen + ["--prompt", "hello"], "no tokenizer.json in the model folder")
        self.assert_error(gen + ["--ids", "1,2", "--gen-length", "16", "--block-length", "5"],
                          "gen_length 16 is not a multiple of block_length 5")
        self.assert_error(gen + ["--ids", "1,2", "--gen-length", "16", "--block-length", "32"],
                          "block_length 32 must be between 1 and gen_length 16")
        self.assert_error(gen + ["--ids", "1,2", "--gen-length", "16", "--block-length", "4", "--steps", "6"],
                          "steps 6 is not divisible by the number of blocks 4")
        self.assert_error(gen + ["--ids", "1,2", "--alg", "entropy"], "apply to Dream models, not LLaDA")
        self.assert_error(gen + ["--ids", "1,2", "--temperature", "-1"], "temperature must be")
        self.assert_error(gen + ["--ids", "1,9999"], "prompt token id 9999 is outside the vocabulary")
        self.assert_error(gen + ["--ids", ",".join(["3"] * 4090), "--gen-length", "16"],
                          "exceeds the model's context of 4096 tokens")
        self.assert_error(gen + ["--ids", "1,2", "--threshold", "0.5", "--factor", "1"],
                          "either threshold or factor")
        self.assert_error(gen + ["--ids", "1,2", "--remasking", "sometimes"], code=2)

    def test_generate_runs_and_is_reproducible(self):
        self.make()
        args = ["generate", "--model", self.model, "--ids", "5,6,7", "--ids", "8", "--gen-length", "8",
                "--steps", "4", "--temperature", "0.8", "--seed", "11", "--json"]
        status, out, err = run(*args)
        self.assertEqual(status, 0, err)
        first = json.loads(out)["results"]
        self.assertEqual(len(first), 2)
        self.assertEqual(len(first[0]["output_ids"]), 8)
        self.assertNotIn(1000, first[0]["output_ids"])  # nothing left masked
        self.assertEqual(sum(first[1]["tokens_per_step"]), 8)
        status, out, _ = run(*args)
        self.assertEqual([r["output_ids"] for r in json.loads(out)["results"]],
                         [r["output_ids"] for r in first])

    def test_generate_text_with_a_real_tokenizer(self):
        tokenizer = os.path.join(os.environ.get("MOSAIC_TOKENIZER_DIR", os.path.join(
            os.path.dirname(__file__), "..", "..", ".cache", "tokenizers")), "qwen3", "tokenizer.json")
        if not os.path.exists(tokenizer):
            self.skipTest("no Qwen3 tokenizer.json (tests/tokenizer/fetch_tokenizers.sh fetches it)")
        code, _, err = run("make-test-model", "--family", "dream", "--layers", "1", "--hidden", "64",
                           "--heads", "4", "--kv-heads", "1", "--ffn", "96", "--tokenizer", tokenizer,
                           "--seed", "3", "--quiet", "--out", self.model)
        self.assertEqual(code, 0, err)
        status, out, err = run("generate", "--model", self.model, "--prompt", "Hello, Mosaic!", "--chat",
                               "--gen-length", "8", "--steps", "4", "--alg", "entropy", "--json")
        self.assertEqual(status, 0, err)
        result = json.loads(out)["results"][0]
        # Dream's chat format, tokenised: it starts with <|im_start|> (151644) and no BOS.
        self.assertEqual(result["prompt_ids"][0], 151644)
        self.assertEqual(len(result["output_ids"]), 8)
        self.assertIsInstance(result["text"], str)

    def test_good_run_succeeds(self):
        self.make()
        status, out, err = run("forward", "--model", self.model, "--ids", "5,1000,1000", "--json")
        self.assertEqual(status, 0, err)
        report = json.loads(out)
        self.assertEqual([row["row"] for row in report["rows"]], [1, 2])


if __name__ == "__main__":
    _, argv = harness.parse_args()
    unittest.main(argv=argv)
