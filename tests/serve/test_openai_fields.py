#!/usr/bin/python3
"""The OpenAI request fields `mosaic serve` honours (docs/design/openai-surface.md), end to end on a
tiny random checkpoint with a byte-level tokenizer (ids 0-255 are the bytes) and on the built-in
model (a 256-token context):

    /usr/bin/python3 tests/serve/test_openai_fields.py --mosaic build/src/cli/mosaic

Each answer is compared with an independent expectation: `mosaic generate` run as its own process
(seeds, n, suffix), `mosaic forward`'s full-vocabulary probabilities (logprobs), the reference
text cut by hand (stop), the bytes of the prompt (special-token text), the model's context
(default max_tokens).
"""

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_harness as harness  # noqa: E402

REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
BUILTIN = os.path.join(REPO, "models", "kjv-llada-12m")
MOSAIC = None
TMP = LLADA = SERVER = None


def setUpModule():
    global TMP, LLADA, SERVER
    TMP = tempfile.mkdtemp(prefix="mosaic_openai_fields_")
    tokenizer = os.path.join(TMP, "tokenizer.json")
    harness.write_tokenizer(tokenizer)
    LLADA = harness.make_model(MOSAIC, os.path.join(TMP, "llada"), "llada", tokenizer, seed=1)
    SERVER = harness.Server(MOSAIC, LLADA, "--model-name", "tiny")


def tearDownModule():
    if SERVER:
        SERVER.kill()
    shutil.rmtree(TMP, ignore_errors=True)


def completion(prompt, **fields):
    body = {"model": "tiny", "prompt": prompt, "max_tokens": 16, "steps": 8}
    body.update(fields)
    return body


def ok(test, status, body):
    test.assertEqual(status, 200, body)
    return body


def assert_error(test, status, body, want_status, param, fragment=None):
    test.assertEqual(status, want_status, body)
    test.assertEqual(body["error"]["param"], param, body)
    if fragment:
        test.assertIn(fragment, body["error"]["message"])


def answer_length(output_ids):
    """Tokens before the first EOS (256) or end of turn (257) of the byte-level tokenizer."""
    ends = [i for i, t in enumerate(output_ids) if t in (256, 257)]
    return ends[0] if ends else len(output_ids)


def stream_text(events):
    return "".join(e["choices"][0]["text"] for e in events if e != "[DONE]" and e["choices"])


class Lengths(unittest.TestCase):
    def test_max_completion_tokens_is_the_length(self):
        body = ok(self, *SERVER.post("/v1/completions", completion("Hi", max_tokens=None, max_completion_tokens=8))[::2])
        self.assertEqual(len(body["mosaic"]["output_ids"]), 8)
        chat = {"messages": [{"role": "user", "content": "Hi"}], "max_completion_tokens": 4, "steps": 4}
        body = ok(self, *SERVER.post("/v1/chat/completions", chat)[::2])
        self.assertEqual(len(body["mosaic"]["output_ids"]), 4)
        status, _, body = SERVER.post("/v1/completions", completion("Hi", max_tokens=8, max_completion_tokens=4))
        assert_error(self, status, body, 400, "max_completion_tokens", "disagree")

    def test_steps_are_bounded_by_what_the_request_can_use(self):
        status, _, body = SERVER.post("/v1/completions", completion("Hi", max_tokens=4, steps=65536))
        assert_error(self, status, body, 400, "steps", "exceeds the 4 this request can use")

    def test_block_errors_name_their_field(self):
        status, _, body = SERVER.post("/v1/completions", completion("Hi", max_tokens=16, steps=7, block_length=8))
        assert_error(self, status, body, 400, "steps", "not divisible")
        status, _, body = SERVER.post("/v1/completions", completion("Hi", max_tokens=16, steps=8, block_length=5))
        assert_error(self, status, body, 400, "block_length", "not a multiple of block_length")


class BuiltinContext(unittest.TestCase):
    """The built-in model's context is 256 tokens: max_tokens left out is what the prompt leaves."""

    @classmethod
    def setUpClass(cls):
        cls.server = harness.Server(MOSAIC, BUILTIN, "--model-name", "kjv")

    @classmethod
    def tearDownClass(cls):
        cls.server.kill()

    def test_the_default_length_is_the_context_left(self):
        body = ok(self, *self.server.post("/v1/completions", {"prompt": [100] * 200, "steps": 8})[::2])
        self.assertEqual(len(body["mosaic"]["output_ids"]), 256 - 200)
        body = ok(self, *self.server.post("/v1/completions", {"prompt": [100] * 20, "steps": 8})[::2])
        self.assertEqual(len(body["mosaic"]["output_ids"]), 128)  # the server's default, when it fits

    def test_the_field_at_fault_is_named(self):
        status, _, body = self.server.post("/v1/completions", {"prompt": [100] * 300})
        assert_error(self, status, body, 400, "prompt", "leaving none to generate")
        status, _, body = self.server.post("/v1/completions", {"prompt": [100] * 200, "max_tokens": 100})
        assert_error(self, status, body, 400, "max_tokens", "exceeds the model's context of 256 tokens")
        status, _, body = self.server.post("/v1/chat/completions", {"messages": [{"role": "user", "content": "x " * 400}]})
        assert_error(self, status, body, 400, "messages", "leaving none to generate")


class Seeds(unittest.TestCase):
    def test_sampling_without_a_seed_draws_one(self):
        bodies = [ok(self, *SERVER.post("/v1/completions", completion("Hi", temperature=1.0))[::2]) for _ in range(2)]
        seeds = [b["mosaic"]["seed"] for b in bodies]
        self.assertNotEqual(seeds[0], seeds[1])
        self.assertNotEqual(bodies[0]["mosaic"]["output_ids"], bodies[1]["mosaic"]["output_ids"])
        # The seed reported reproduces the answer.
        again = ok(self, *SERVER.post("/v1/completions", completion("Hi", temperature=1.0, seed=seeds[0]))[::2])
        self.assertEqual(again["mosaic"]["output_ids"], bodies[0]["mosaic"]["output_ids"])

    def test_a_seed_is_honoured(self):
        body = ok(self, *SERVER.post("/v1/completions", completion("Hi", temperature=0.9, seed=42))[::2])
        reference = harness.generate_cli(MOSAIC, LLADA, "Hi", gen_length=16, steps=8, temperature=0.9, seed=42)
        self.assertEqual(body["mosaic"]["output_ids"], reference["output_ids"])
        self.assertEqual(body["mosaic"]["seed"], 42)


class Choices(unittest.TestCase):
    def test_n_choices_have_consecutive_seeds(self):
        body = ok(self, *SERVER.post("/v1/completions", completion("Tell", n=3, temperature=0.8, seed=7))[::2])
        self.assertEqual([c["index"] for c in body["choices"]], [0, 1, 2])
        for i, choice in enumerate(body["choices"]):
            reference = harness.generate_cli(MOSAIC, LLADA, "Tell", gen_length=16, steps=8, temperature=0.8, seed=7 + i)
            self.assertEqual(choice["mosaic"]["output_ids"], reference["output_ids"], i)
            self.assertEqual(choice["text"], reference["text"], i)
        self.assertEqual(body["usage"]["completion_tokens"], sum(answer_length(c["mosaic"]["output_ids"])
                                                                 for c in body["choices"]))

    def test_n_choices_stream_with_their_index(self):
        whole = ok(self, *SERVER.post("/v1/completions", completion("Tell", n=2, temperature=0.8, seed=3,
                                                                      block_length=4))[::2])
        status, events = SERVER.stream("/v1/completions", completion("Tell", n=2, temperature=0.8, seed=3,
                                                                      block_length=4, stream=True))
        self.assertEqual(status, 200, events)
        for index in (0, 1):
            text = "".join(e["choices"][0]["text"] for e in events
                           if e != "[DONE]" and e["choices"] and e["choices"][0]["index"] == index)
            self.assertEqual(text, whole["choices"][index]["text"], index)
        finals = [e for e in events if e != "[DONE]" and e["choices"][0]["finish_reason"]]
        self.assertEqual(sorted(e["choices"][0]["index"] for e in finals), [0, 1])


class Stop(unittest.TestCase):
    def reference_text(self, **flags):
        return harness.generate_cli(MOSAIC, LLADA, "Once", **flags)

    def test_the_answer_ends_before_the_stop_string(self):
        flags = dict(gen_length=32, steps=32, block_length=4)
        reference = self.reference_text(**flags)["text"]
        self.assertGreater(len(reference), 12, reference)
        stop = reference[8:11]
        cut = reference[:reference.index(stop)]
        fields = dict(max_tokens=32, steps=32, block_length=4)
        for stops in (stop, [stop, "\u2603never"]):
            body = ok(self, *SERVER.post("/v1/completions", completion("Once", stop=stops, **fields))[::2])
            self.assertEqual(body["choices"][0]["text"], cut)
            self.assertEqual(body["choices"][0]["finish_reason"], "stop")
        # Blocks commit left to right: the request ends once the stop string is committed, steps
        # before the reference's 32.
        self.assertLess(body["mosaic"]["steps"], 32)
        status, events = SERVER.stream("/v1/completions", completion("Once", stop=stop, stream=True, **fields))
        self.assertEqual(status, 200, events)
        self.assertEqual(stream_text(events), cut)
        self.assertEqual(events[-2]["choices"][0]["finish_reason"], "stop")

    def test_a_stop_string_that_never_occurs_changes_nothing(self):
        reference = self.reference_text(gen_length=16, steps=8)
        body = ok(self, *SERVER.post("/v1/completions", completion("Once", stop=["\u2603"]))[::2])
        self.assertEqual(body["choices"][0]["text"], reference["text"])


class Logprobs(unittest.TestCase):
    def forward_top(self, ids, row):
        out = subprocess.run([MOSAIC, "forward", "--model", LLADA, "--ids", ",".join(map(str, ids)), "--rows", str(row),
                              "--top", "2", "--json"], capture_output=True, text=True, timeout=120, check=True)
        return json.loads(out.stdout)["rows"][0]["top"]

    def test_a_committed_tokens_logprob_is_its_log_softmax(self):
        # One token in one step: its log-probability is log softmax of the full row's logits,
        # which `mosaic forward` computes over the whole vocabulary.
        prompt = [72, 105, 33]
        body = ok(self, *SERVER.post("/v1/completions", completion(prompt, max_tokens=1, steps=1, logprobs=2))[::2])
        top = self.forward_top(prompt + [258], len(prompt))  # 258: the mask id
        self.assertEqual(body["mosaic"]["output_ids"], [top[0]["id"]])
        lp = body["choices"][0]["logprobs"]
        self.assertAlmostEqual(lp["token_logprobs"][0], math.log(top[0]["probability"]), places=4)
        best = sorted(lp["top_logprobs"][0].values(), reverse=True)
        self.assertAlmostEqual(best[0], math.log(top[0]["probability"]), places=4)
        self.assertAlmostEqual(best[1], math.log(top[1]["probability"]), places=4)

    def test_completions_and_chat_shapes(self):
        body = ok(self, *SERVER.post("/v1/completions", completion("Hello", logprobs=1))[::2])
        choice = body["choices"][0]
        lp = choice["logprobs"]
        self.assertEqual(len(lp["tokens"]), body["usage"]["completion_tokens"])
        self.assertEqual("".join(lp["tokens"]), choice["text"])
        self.assertTrue(all(v <= 0 for v in lp["token_logprobs"]))
        self.assertTrue(all(len(t) == 1 for t in lp["top_logprobs"]))
        self.assertEqual(lp["text_offset"][0], 0)
        chat = {"messages": [{"role": "user", "content": "Hello"}], "max_tokens": 8, "steps": 8, "logprobs": True,
                "top_logprobs": 2}
        body = ok(self, *SERVER.post("/v1/chat/completions", chat)[::2])
        content = body["choices"][0]["logprobs"]["content"]
        self.assertEqual(len(content), body["usage"]["completion_tokens"])
        for entry in content:
            self.assertEqual(bytes(entry["bytes"]), entry["token"].encode("utf-8"))
            self.assertLessEqual(len(entry["top_logprobs"]), 2)
            self.assertGreaterEqual(entry["top_logprobs"][0]["logprob"], entry["logprob"] - 1e-6)
        status, _, body = SERVER.post("/v1/completions", completion("Hello", logprobs=3))
        assert_error(self, status, body, 400, "logprobs", "at most 2")


class EchoUsageSuffix(unittest.TestCase):
    def test_echo_puts_the_prompt_first(self):
        plain = ok(self, *SERVER.post("/v1/completions", completion("Echo me"))[::2])
        body = ok(self, *SERVER.post("/v1/completions", completion("Echo me", echo=True))[::2])
        self.assertEqual(body["choices"][0]["text"], "Echo me" + plain["choices"][0]["text"])
        status, events = SERVER.stream("/v1/completions", completion("Echo me", echo=True, stream=True))
        self.assertEqual(events[0]["choices"][0]["text"], "Echo me")
        self.assertEqual(stream_text(events), body["choices"][0]["text"])

    def test_include_usage_adds_a_usage_chunk(self):
        whole = ok(self, *SERVER.post("/v1/completions", completion("Count"))[::2])
        status, events = SERVER.stream("/v1/completions", completion("Count", stream=True,
                                                                     stream_options={"include_usage": True}))
        self.assertEqual(status, 200, events)
        self.assertEqual(events[-1], "[DONE]")
        self.assertEqual(events[-2]["choices"], [])
        self.assertEqual(events[-2]["usage"], whole["usage"])
        status, events = SERVER.stream("/v1/completions", completion("Count", stream=True))
        self.assertNotEqual(events[-2]["choices"], [])  # not asked for: no usage chunk

    def test_suffix_infills_as_mosaic_generate_does(self):
        body = ok(self, *SERVER.post("/v1/completions", completion("Start:", suffix=" the end.", max_tokens=8,
                                                                   steps=8))[::2])
        reference = subprocess.run([MOSAIC, "generate", "--model", LLADA, "--prompt", "Start:", "--suffix", " the end.",
                                    "--gen-length", "8", "--steps", "8", "--json", "--quiet"],
                                   capture_output=True, text=True, timeout=120, check=True)
        want = json.loads(reference.stdout)["results"][0]
        self.assertEqual(body["mosaic"]["output_ids"], want["output_ids"])
        self.assertEqual(body["usage"]["prompt_tokens"], len("Start:") + len(" the end."))
        status, _, body = SERVER.post("/v1/completions", completion("Start:", suffix="x", cache="dual", block_length=8))
        assert_error(self, status, body, 400, "suffix", "without a KV cache")


class SpecialTokens(unittest.TestCase):
    def test_special_token_text_is_plain_unless_asked(self):
        text = "<|mdm_mask|>"
        body = ok(self, *SERVER.post("/v1/completions", completion(text))[::2])
        self.assertEqual(body["usage"]["prompt_tokens"], len(text))  # one token per byte
        body = ok(self, *SERVER.post("/v1/completions", completion(text, parse_special=True))[::2])
        self.assertEqual(body["usage"]["prompt_tokens"], 1)
        chat = {"messages": [{"role": "user", "content": "<|eot_id|>"}], "max_tokens": 4, "steps": 4}
        plain = ok(self, *SERVER.post("/v1/chat/completions", chat)[::2])["usage"]["prompt_tokens"]
        parsed = ok(self, *SERVER.post("/v1/chat/completions", dict(chat, parse_special=True))[::2])
        self.assertEqual(plain - parsed["usage"]["prompt_tokens"], len("<|eot_id|>") - 1)


class Messages(unittest.TestCase):
    def test_roles(self):
        chat = {"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": None},
                             {"role": "user", "content": "Again"}], "max_tokens": 4, "steps": 4}
        ok(self, *SERVER.post("/v1/chat/completions", chat)[::2])
        status, _, body = SERVER.post("/v1/chat/completions",
                                      {"messages": [{"role": "wizard", "content": "Hi"}], "max_tokens": 4})
        assert_error(self, status, body, 400, "messages[0].role", "wizard")

    def test_unknown_model_is_404(self):
        status, _, body = SERVER.post("/v1/completions", completion("x", model="gpt-4"))
        self.assertEqual(status, 404, body)
        self.assertEqual(body["error"]["code"], "model_not_found")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--mosaic", required=True)
    args, rest = parser.parse_known_args()
    MOSAIC = os.path.abspath(args.mosaic)
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
