#!/usr/bin/python3
"""`mosaic serve` end to end on tiny random checkpoints with a byte-level tokenizer:

    /usr/bin/python3 tests/serve/test_serve.py --mosaic build/src/cli/mosaic

Every endpoint, streaming, cancellation, the error cases, both batching modes and SIGTERM. The
reference for an answer is `mosaic generate` with the same options and seed, run as its own
process: a served request, alone or among concurrent ones, must give exactly its tokens.
"""

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench", "load"))
import serve_harness as harness  # noqa: E402
import serve_load  # noqa: E402

MOSAIC = None
TMP = LLADA = DREAM = SERVER = None


def setUpModule():
    global TMP, LLADA, DREAM, SERVER
    TMP = tempfile.mkdtemp(prefix="mosaic_serve_test_")
    tokenizer = os.path.join(TMP, "tokenizer.json")
    harness.write_tokenizer(tokenizer)
    LLADA = harness.make_model(MOSAIC, os.path.join(TMP, "llada"), "llada", tokenizer, seed=1)
    DREAM = harness.make_model(MOSAIC, os.path.join(TMP, "dream"), "dream", tokenizer, seed=2)
    SERVER = llada_server()


def llada_server(*args):
    return harness.Server(MOSAIC, LLADA, "--model-name", "tiny-llada", *args)


def tearDownModule():
    if SERVER:
        SERVER.kill()
    shutil.rmtree(TMP, ignore_errors=True)


def completion(prompt, **fields):
    body = {"model": "tiny-llada", "prompt": prompt, "max_tokens": 16, "steps": 8}
    body.update(fields)
    return body


def assert_error(test, status, body, want_status, param=None, code=None, fragment=None):
    test.assertEqual(status, want_status, body)
    test.assertIsInstance(body, dict, body)
    error = body.get("error")
    test.assertIsInstance(error, dict, body)
    test.assertEqual(set(error), {"message", "type", "param", "code"})
    test.assertTrue(error["message"])
    if param is not None:
        test.assertEqual(error["param"], param)
    if code is not None:
        test.assertEqual(error["code"], code)
    if fragment is not None:
        test.assertIn(fragment, error["message"])


def concurrently(send, count):
    """send(0), ..., send(count - 1), each on its own thread, all at once; returns when all did."""
    threads = [threading.Thread(target=send, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def concatenated(events, key):
    pieces = []
    for event in events:
        if event == "[DONE]":
            continue
        if key == "chat":
            pieces.append(event["choices"][0]["delta"].get("content", ""))
        elif key == "completions":
            pieces.append(event["choices"][0]["text"])
        else:
            pieces.append(event["text"])
    return "".join(pieces)


class Endpoints(unittest.TestCase):
    def test_health_and_models(self):
        status, _, body = SERVER.request("GET", "/health")
        self.assertEqual(status, 200)
        self.assertEqual(body["status"], "ok")
        self.assertEqual(body["model"], "tiny-llada")
        status, _, body = SERVER.request("GET", "/v1/models")
        self.assertEqual(status, 200)
        self.assertEqual(body["object"], "list")
        self.assertEqual([m["id"] for m in body["data"]], ["tiny-llada"])
        self.assertEqual(body["data"][0]["object"], "model")
        self.assertEqual(body["data"][0]["mosaic"]["family"], "llada")

    def test_completions_equal_mosaic_generate(self):
        cases = [
            ("Hello world", dict(max_tokens=16, steps=8), dict(gen_length=16, steps=8)),
            ("The sea", dict(max_tokens=16, steps=16, block_length=8, temperature=0.8, seed=5),
             dict(gen_length=16, steps=16, block_length=8, temperature=0.8, seed=5)),
            ("Random", dict(max_tokens=8, steps=4, remasking="random", seed=3),
             dict(gen_length=8, steps=4, remasking="random", seed=3)),
        ]
        for prompt, fields, flags in cases:
            status, _, body = SERVER.post("/v1/completions", completion(prompt, **fields))
            self.assertEqual(status, 200, body)
            reference = harness.generate_cli(MOSAIC, LLADA, prompt, **flags)
            self.assertEqual(body["object"], "text_completion")
            self.assertEqual(body["model"], "tiny-llada")
            choice = body["choices"][0]
            self.assertEqual(choice["text"], reference["text"], prompt)
            self.assertEqual(body["mosaic"]["output_ids"], reference["output_ids"], prompt)
            self.assertIn(choice["finish_reason"], ("stop", "length"))
            self.assertEqual(body["mosaic"]["steps"], reference["steps"])
            self.assertEqual(body["mosaic"]["nfe"], reference["forwards"])
            self.assertEqual(body["mosaic"]["tokens_per_step"], reference["tokens_per_step"])
            self.assertEqual(body["usage"]["prompt_tokens"], len(reference["prompt_ids"]))
            self.assertGreaterEqual(body["mosaic"]["queue_seconds"], 0)

    def test_token_id_prompts(self):
        status, _, body = SERVER.post("/v1/completions", completion([72, 105, 33]))
        self.assertEqual(status, 200, body)
        reference = harness.generate_cli(MOSAIC, LLADA, ids=[72, 105, 33], gen_length=16, steps=8)
        self.assertEqual(body["mosaic"]["output_ids"], reference["output_ids"])

    def test_chat_completions_equal_mosaic_generate_chat(self):
        body = {"messages": [{"role": "user", "content": "Tell me a story"}], "max_tokens": 16, "steps": 8, "seed": 2,
                "temperature": 0.5}
        status, _, answer = SERVER.post("/v1/chat/completions", body)
        self.assertEqual(status, 200, answer)
        reference = harness.generate_cli(MOSAIC, LLADA, "Tell me a story", chat=True, gen_length=16, steps=8,
                                         seed=2, temperature=0.5)
        self.assertEqual(answer["object"], "chat.completion")
        self.assertEqual(answer["choices"][0]["message"]["role"], "assistant")
        self.assertEqual(answer["choices"][0]["message"]["content"], reference["text"])
        self.assertEqual(answer["mosaic"]["output_ids"], reference["output_ids"])

    def test_generate_endpoint_fields(self):
        body = {"prompt": "Guided", "gen_length": 16, "steps": 8, "block_length": 8, "temperature": 0.7,
                "cfg_scale": 1.5, "remasking": "low_confidence", "seed": 9}
        status, _, answer = SERVER.post("/generate", body)
        self.assertEqual(status, 200, answer)
        reference = harness.generate_cli(MOSAIC, LLADA, "Guided", gen_length=16, steps=8, block_length=8,
                                         temperature=0.7, cfg_scale=1.5, remasking="low_confidence", seed=9)
        self.assertEqual(answer["text"], reference["text"])
        self.assertEqual(answer["output_ids"], reference["output_ids"])
        self.assertEqual(answer["nfe"], reference["forwards"])

    def test_streams_concatenate_to_the_answer(self):
        for path, key, body in [
            # Blocks of 4: the left of the answer is committed first, so text arrives in pieces.
            ("/v1/completions", "completions", completion("Stream me", max_tokens=32, steps=16, block_length=4, seed=4)),
            ("/v1/chat/completions", "chat", {"messages": [{"role": "user", "content": "Stream me"}], "max_tokens": 32,
                                              "steps": 16, "block_length": 4, "seed": 4}),
            ("/generate", "generate", {"prompt": "Stream me", "gen_length": 32, "steps": 16, "block_length": 4,
                                       "seed": 4}),
        ]:
            status, _, whole = SERVER.post(path, body)
            self.assertEqual(status, 200, whole)
            status, events = SERVER.stream(path, dict(body, stream=True))
            self.assertEqual(status, 200, events)
            self.assertEqual(events[-1], "[DONE]", path)
            deltas = [e for e in events[:-2] if concatenated([e], key)]
            self.assertGreaterEqual(len(deltas), 2, f"{path}: the text came in pieces")
            text = whole["text"] if key == "generate" else (
                whole["choices"][0]["message"]["content"] if key == "chat" else whole["choices"][0]["text"])
            self.assertEqual(concatenated(events, key), text, path)
            last = events[-2]
            if key == "generate":
                self.assertTrue(last["done"])
                self.assertEqual(last["output_ids"], whole["output_ids"])
            else:
                self.assertIn(last["choices"][0]["finish_reason"], ("stop", "length"))
                self.assertEqual(last["mosaic"]["output_ids"], whole["mosaic"]["output_ids"])
                self.assertTrue(all(e["choices"][0]["finish_reason"] is None for e in events[:-2]))
            if key == "chat":
                self.assertEqual(events[0]["choices"][0]["delta"], {"role": "assistant", "content": ""})
                self.assertEqual(events[0]["object"], "chat.completion.chunk")

    def test_concurrent_requests_get_their_solo_answers(self):
        bodies = [completion(f"prompt number {i}", max_tokens=16 + 8 * (i % 3), steps=8 + 4 * (i % 3),
                             seed=i, temperature=0.6 * (i % 2)) for i in range(8)]
        solo = [SERVER.post("/v1/completions", b)[2]["mosaic"]["output_ids"] for b in bodies]
        answers = [None] * len(bodies)

        def send(i):
            if i % 2:
                status, events = SERVER.stream("/v1/completions", dict(bodies[i], stream=True))
                answers[i] = events[-2]["mosaic"]
            else:
                status, _, body = SERVER.post("/v1/completions", bodies[i])
                answers[i] = body["mosaic"]

        concurrently(send, len(bodies))
        for i, answer in enumerate(answers):
            self.assertEqual(answer["output_ids"], solo[i], f"request {i}")
        self.assertGreater(max(a["largest_batch"] for a in answers), 1, "the requests shared steps")

    def test_cached_requests_among_others_get_their_solo_answers(self):
        bodies = [completion(f"cached prompt {i}", max_tokens=16, steps=16, block_length=4, seed=i,
                             cache=["dual", "prefix", "none", "auto"][i % 4], temperature=0.5 * (i % 2))
                  for i in range(8)]
        solo = [SERVER.post("/v1/completions", b)[2]["mosaic"] for b in bodies]
        for i, answer in enumerate(solo):
            self.assertEqual(answer["cache"], ["dual", "prefix", "none", "none"][i % 4], f"request {i}")
        answers = [None] * len(bodies)

        def send(i):
            answers[i] = SERVER.post("/v1/completions", bodies[i])[2]["mosaic"]

        concurrently(send, len(bodies))
        for i, answer in enumerate(answers):
            self.assertEqual(answer["output_ids"], solo[i]["output_ids"], f"request {i}")
        # A cached answer is `mosaic generate --cache`'s, and every page came back.
        want = harness.generate_cli(MOSAIC, LLADA, "cached prompt 0", gen_length=16, steps=16, block_length=4,
                                    cache="dual", seed=0)
        self.assertEqual(solo[0]["output_ids"], want["output_ids"])
        metrics = SERVER.metrics()
        self.assertEqual(metrics["mosaic_kv_cache_pages_used"], 0)
        self.assertIn("mosaic_kv_cache_bytes", metrics)

    def test_metrics(self):
        SERVER.post("/v1/completions", completion("count me"))
        metrics = SERVER.metrics()
        for name in ["mosaic_queue_depth", "mosaic_batch_size", "mosaic_step_seconds_count", "mosaic_tokens_per_second",
                     "mosaic_arena_mapped_bytes", "mosaic_planned_peak_bytes", "mosaic_step_par",
                     "mosaic_request_queue_seconds_count", "mosaic_request_first_token_seconds_count",
                     "mosaic_request_nfe_count", 'mosaic_requests_total{outcome="completed"}',
                     'mosaic_requests_total{outcome="rejected_queue_full"}']:
            self.assertIn(name, metrics)
        self.assertGreaterEqual(metrics['mosaic_requests_total{outcome="completed"}'], 1)
        self.assertGreater(metrics["mosaic_planned_peak_bytes"], 0)
        self.assertGreater(metrics["mosaic_arena_mapped_bytes"], 0)
        self.assertGreater(metrics["mosaic_step_par"], 1.0)
        self.assertGreater(metrics["mosaic_committed_tokens_total"], 0)


class Errors(unittest.TestCase):
    def test_malformed_json_and_wrong_types(self):
        for raw in ["{", "", "nul", "[1,2]", '"text"', "{\"prompt\": \"x\",}"]:
            status, _, body = SERVER.request("POST", "/v1/completions", raw=raw)
            assert_error(self, status, body, 400)
        cases = [({"prompt": "x", "max_tokens": "16"}, "max_tokens"),
                 ({"prompt": "x", "temperature": "hot"}, "temperature"),
                 ({"prompt": "x", "stream": "yes"}, "stream"),
                 ({"prompt": {"text": "x"}}, "prompt"),
                 ({"prompt": "x", "steps": 2.5}, "steps")]
        for body, param in cases:
            status, _, answer = SERVER.post("/v1/completions", body)
            assert_error(self, status, answer, 400, param=param)
        status, _, answer = SERVER.post("/v1/chat/completions", {"messages": [{"role": "user"}]})
        assert_error(self, status, answer, 400, param="messages[0].content")

    def test_unknown_model(self):
        status, _, body = SERVER.post("/v1/completions", completion("x", model="gpt-4"))
        assert_error(self, status, body, 404, param="model", code="model_not_found", fragment="gpt-4")

    def test_out_of_range_parameters(self):
        cases = [({"max_tokens": 0}, "max_tokens"), ({"max_tokens": 10 ** 9}, "max_tokens"),
                 ({"steps": -3}, "steps"), ({"temperature": -0.5}, "temperature"), ({"top_p": 7}, "top_p"),
                 ({"n": 17}, "n"), ({"prompt": [1, 99999]}, "prompt"), ({"prompt": ""}, "prompt")]
        for fields, param in cases:
            status, _, body = SERVER.post("/v1/completions", dict(completion("x"), **fields))
            assert_error(self, status, body, 400, param=param)
        # Checked against the model: LLaDA takes no Dream options; blocks must divide the length.
        status, _, body = SERVER.post("/v1/completions", completion("x", alg="entropy"))
        assert_error(self, status, body, 400, fragment="apply to Dream models")
        status, _, body = SERVER.post("/v1/completions", completion("x", max_tokens=16, block_length=5))
        assert_error(self, status, body, 400, fragment="not a multiple of block_length")
        status, _, body = SERVER.post("/v1/completions", completion("x", cache="fast"))
        assert_error(self, status, body, 400, param="cache", fragment="auto, none, prefix or dual")
        status, _, body = SERVER.post("/v1/completions", completion("x", cache="dual", cfg_scale=1.5))
        assert_error(self, status, body, 400, fragment="cache dual cannot run cfg_scale")
        status, _, body = SERVER.post("/v1/completions", completion("x" * 4000, max_tokens=512, steps=8))
        assert_error(self, status, body, 400, param="max_tokens", fragment="exceeds the model's context")

    def test_unknown_route_and_method(self):
        status, _, body = SERVER.request("GET", "/v1/nothing")
        assert_error(self, status, body, 404)
        status, headers, body = SERVER.request("GET", "/v1/completions")
        assert_error(self, status, body, 405, code="method_not_allowed")
        self.assertEqual(headers.get("Allow"), "POST, OPTIONS")

    def test_garbage_never_crashes_the_server(self):
        bodies = ["\x00\xff" * 100, "{" * 10000, "[" * 100000 + "]" * 100000, json.dumps({"prompt": ["a"] * 1000}),
                  json.dumps({"prompt": "x", "gen_length": 1e308}), json.dumps({"prompt": "x", "seed": 2 ** 70}),
                  json.dumps({"messages": [{"role": "user", "content": [{"type": "image"}]}]})]
        for raw in bodies:
            for path in ("/v1/completions", "/v1/chat/completions", "/generate"):
                status, _, body = SERVER.request("POST", path, raw=raw)
                self.assertEqual(status, 400, (path, raw[:40], body))
        # A body over the size limit, and a client that sends half a request and leaves.
        status, _, body = SERVER.request("POST", "/v1/completions", raw="x" * (9 << 20))
        self.assertEqual(status, 413, body)
        with socket.create_connection(("127.0.0.1", SERVER.port)) as s:
            s.sendall(b"POST /v1/completions HTTP/1.1\r\nContent-Length: 100\r\n\r\n{\"pro")
        self.assertTrue(SERVER.alive())
        self.assertEqual(SERVER.request("GET", "/health")[0], 200)


class CommandLine(unittest.TestCase):
    def test_a_port_in_use_and_bad_flags_are_clear_errors(self):
        for args, fragment in [(["--port", str(SERVER.port)], f"cannot listen on 127.0.0.1:{SERVER.port}"),
                               (["--batch-timeout", "10"], "--batch-timeout applies to --batching fixed"),
                               (["--batching", "fixed", "--batch-timeout", "soon"], "expected auto or milliseconds")]:
            proc = subprocess.run([MOSAIC, "serve", "--model", LLADA, *args], capture_output=True, text=True, timeout=60)
            self.assertEqual(proc.returncode, 1, proc.stderr)
            self.assertIn(fragment, proc.stderr)
        self.assertTrue(SERVER.alive())


class Cancellation(unittest.TestCase):
    def test_a_client_that_leaves_mid_stream_frees_its_slot(self):
        before = SERVER.metrics().get('mosaic_requests_total{outcome="cancelled"}', 0)
        conn = SERVER.connection()
        body = {"messages": [{"role": "user", "content": "long one"}], "max_tokens": 2048, "steps": 2048,
                "stream": True}
        conn.request("POST", "/v1/chat/completions", body=json.dumps(body), headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        self.assertEqual(response.status, 200)
        self.assertTrue(response.readline().startswith(b"data: "))  # the role chunk: it is admitted
        conn.sock.shutdown(socket.SHUT_RDWR)
        conn.close()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            metrics = SERVER.metrics()
            if metrics['mosaic_requests_total{outcome="cancelled"}'] > before and metrics["mosaic_batch_size"] == 0:
                break
            time.sleep(0.05)
        self.assertEqual(metrics['mosaic_requests_total{outcome="cancelled"}'], before + 1)
        self.assertEqual(metrics["mosaic_batch_size"], 0)
        status, _, body = SERVER.post("/v1/completions", completion("after"))
        self.assertEqual(status, 200, body)


class Admission(unittest.TestCase):
    def test_a_prompt_over_the_memory_budget_is_400_naming_the_bytes(self):
        weights = SERVER.request("GET", "/v1/models")[2]["data"][0]["mosaic"]["weight_bytes"]
        budget = weights + (1 << 20)
        server = llada_server("--budget", str(budget), "--allow-long-context")
        try:
            status, _, body = server.post("/v1/completions", {"prompt": "x" * 3000, "max_tokens": 1024, "steps": 4})
            assert_error(self, status, body, 400, param="prompt", code="prompt_too_large", fragment="bytes")
            needed = int(body["error"]["message"].split(" needs ")[1].split(" bytes")[0])
            self.assertGreater(needed, budget)
            self.assertIn(f"budget is {budget} bytes", body["error"]["message"])
            status, _, body = server.post("/v1/completions", completion("small"))
            self.assertEqual(status, 200, body)
            self.assertEqual(server.metrics()['mosaic_requests_total{outcome="rejected_too_large"}'], 1)
            self.assertEqual(server.metrics()["mosaic_memory_budget_bytes"], budget)
        finally:
            server.kill()

    def test_a_full_queue_is_429(self):
        server = llada_server("--max-batch", "1", "--max-queue", "1")
        try:
            results = []

            def send(i):
                results.append(server.post("/v1/completions", completion(f"q{i}", max_tokens=256, steps=128)))

            concurrently(send, 6)
            statuses = sorted(r[0] for r in results)
            self.assertIn(429, statuses)
            self.assertIn(200, statuses)
            self.assertEqual(set(statuses), {200, 429})
            for status, headers, body in results:
                if status == 429:
                    assert_error(self, status, body, 429, code="queue_full")
                    self.assertEqual(headers.get("Retry-After"), "1")
                else:
                    self.assertEqual(len(body["mosaic"]["output_ids"]), 256)
            metrics = server.metrics()
            self.assertEqual(metrics['mosaic_requests_total{outcome="rejected_queue_full"}'], statuses.count(429))
        finally:
            server.kill()


class Batching(unittest.TestCase):
    def run_concurrently(self, server, bodies):
        answers = [None] * len(bodies)

        def send(i):
            answers[i] = server.post("/v1/completions", bodies[i])

        concurrently(send, len(bodies))
        return answers

    def test_fixed_batching_gives_the_same_answers(self):
        server = llada_server("--batching", "fixed", "--max-batch", "4", "--batch-timeout", "auto")
        try:
            bodies = [completion(f"fixed {i}", seed=i, temperature=0.5) for i in range(8)]
            solo = [SERVER.post("/v1/completions", b)[2]["mosaic"]["output_ids"] for b in bodies]
            for i, (status, _, body) in enumerate(self.run_concurrently(server, bodies)):
                self.assertEqual(status, 200, body)
                self.assertEqual(body["mosaic"]["output_ids"], solo[i])
                self.assertLessEqual(body["mosaic"]["largest_batch"], 4)
            self.assertIn("mosaic_batch_start_timeout_seconds", server.metrics())
        finally:
            server.kill()
        server = llada_server("--batching", "fixed", "--max-batch", "8", "--batch-timeout", "150")
        try:
            status, _, body = server.post("/v1/completions", completion("alone"))
            self.assertEqual(status, 200, body)
            self.assertGreaterEqual(body["mosaic"]["queue_seconds"], 0.14)  # waited for company, then started
        finally:
            server.kill()

    def test_dream_with_mixed_sampling_in_one_batch(self):
        server = harness.Server(MOSAIC, DREAM)
        try:
            cases = [({"alg": "entropy", "temperature": 0.5, "seed": 1}, dict(alg="entropy", temperature=0.5, seed=1)),
                     ({"top_k": 20, "temperature": 1.0, "seed": 2}, dict(top_k=20, temperature=1.0, seed=2)),
                     ({"alg": "maskgit_plus", "top_p": 0.9, "temperature": 0.8, "seed": 3},
                      dict(alg="maskgit_plus", top_p=0.9, temperature=0.8, seed=3)),
                     ({"threshold": 0.2, "seed": 4}, dict(threshold=0.2, seed=4))]
            bodies = [{"prompt": f"dream {i}", "max_tokens": 16, "steps": 8, **fields}
                      for i, (fields, _) in enumerate(cases)]
            answers = self.run_concurrently(server, bodies)
            for i, ((fields, flags), (status, _, body)) in enumerate(zip(cases, answers)):
                self.assertEqual(status, 200, body)
                reference = harness.generate_cli(MOSAIC, DREAM, f"dream {i}", gen_length=16, steps=8, **flags)
                self.assertEqual(body["mosaic"]["output_ids"], reference["output_ids"], fields)
                self.assertEqual(body["choices"][0]["text"], reference["text"], fields)
            status, _, body = server.post("/v1/chat/completions",
                                          {"messages": [{"role": "system", "content": "Be kind."},
                                                        {"role": "user", "content": "Hi"}], "max_tokens": 8})
            self.assertEqual(status, 200, body)
        finally:
            server.kill()


class ParallelRanks(unittest.TestCase):
    """`serve --tensor-parallel 2` and `--context-parallel 2` on CPU ranks (docs/design/tensor-parallel.md,
    context-parallel.md): concurrent requests sharing steps get the one-rank server's answers."""

    def test_concurrent_requests_on_ranks_get_the_one_rank_answers(self):
        bodies = [completion(f"ranked prompt {i}", max_tokens=16, steps=8 + 4 * (i % 2), seed=i,
                             temperature=0.6 * (i % 2)) for i in range(4)]
        solo = [SERVER.post("/v1/completions", b)[2]["mosaic"]["output_ids"] for b in bodies]
        for flags in (("--tensor-parallel", "2"), ("--context-parallel", "2")):
            server = llada_server(*flags)
            try:
                answers = [None] * len(bodies)

                def send(i):
                    answers[i] = server.post("/v1/completions", bodies[i])[2]["mosaic"]

                concurrently(send, len(bodies))
                for i, answer in enumerate(answers):
                    self.assertEqual(answer["output_ids"], solo[i], f"{flags[0]}: request {i}")
            finally:
                server.kill()


class Shutdown(unittest.TestCase):
    def test_sigterm_drains_the_requests_in_flight(self):
        server = llada_server()
        results = {}

        def long_request():
            results["long"] = server.post("/v1/completions", completion("drain me", max_tokens=512, steps=256),
                                          timeout=600)  # slow builds (sanitizers) take minutes

        def long_stream():
            results["stream"] = server.stream("/v1/completions",
                                              completion("drain me", max_tokens=512, steps=256, stream=True),
                                              timeout=600)

        threads = [threading.Thread(target=long_request), threading.Thread(target=long_stream)]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 20
        while server.metrics()["mosaic_batch_size"] < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        server.proc.send_signal(signal.SIGTERM)
        time.sleep(0.2)
        try:
            status, _, body = server.post("/v1/completions", completion("too late"), timeout=10)
            assert_error(self, status, body, 503, code="shutting_down")
        except (ConnectionError, OSError):
            pass  # already closed: also a clear refusal
        for t in threads:
            t.join()
        self.assertEqual(server.wait(timeout=60), 0, "".join(server.log))
        status, _, body = results["long"]
        self.assertEqual(status, 200, body)
        self.assertEqual(len(body["mosaic"]["output_ids"]), 512)
        status, events = results["stream"]
        self.assertEqual(events[-1], "[DONE]")
        self.assertEqual(events[-2]["mosaic"]["output_ids"], body["mosaic"]["output_ids"])


class LoadGenerator(unittest.TestCase):
    def test_overload_loses_and_garbles_nothing(self):
        server = llada_server("--max-batch", "4", "--max-queue", "4")
        try:
            url = f"http://127.0.0.1:{server.port}"
            out = os.path.join(TMP, "load.json")
            code = serve_load.main(["--url", url, "--capacity-concurrency", "4", "--overload", "2", "--requests", "80",
                                    "--duration", "20", "--max-tokens", "16", "--steps", "8", "--stream",
                                    "--json", out])
            self.assertEqual(code, 0)
            with open(out) as f:
                capacity, overload = json.load(f)
            for summary in (capacity, overload):
                self.assertEqual(summary["error"], 0, summary["problems"])
                self.assertEqual(summary["garbled"], 0, summary["problems"])
                self.assertEqual(summary["sent"], summary["completed"] + summary["rejected"])
            self.assertGreater(overload["completed"], 0)
        finally:
            server.kill()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--mosaic", required=True)
    args, rest = parser.parse_known_args()
    MOSAIC = os.path.abspath(args.mosaic)
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
