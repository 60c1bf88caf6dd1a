#!/usr/bin/python3
"""`mosaic serve` as operators run it, on a tiny random checkpoint:

    /usr/bin/python3 tests/serve/test_operations.py --mosaic build/src/cli/mosaic

--api-key / MOSAIC_API_KEY, CORS (--allowed-origins), X-Request-Id, the access log, response ids
unique across restarts, /version, /tokenize and /detokenize, GET /v1/models/{id}, and the
vLLM-named metrics. Design: docs/design/http-hardening.md, docs/design/serving.md.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_harness as harness  # noqa: E402

MOSAIC = None
TMP = MODEL = SERVER = KEYED = None
STARTED = None
KEY = "sk-test-7f3a9c"
REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def setUpModule():
    global TMP, MODEL, SERVER, KEYED, STARTED
    TMP = tempfile.mkdtemp(prefix="mosaic_operations_test_")
    tokenizer = os.path.join(TMP, "tokenizer.json")
    harness.write_tokenizer(tokenizer)
    MODEL = harness.make_model(MOSAIC, os.path.join(TMP, "llada"), "llada", tokenizer, seed=1)
    STARTED = time.time()
    SERVER = harness.Server(MOSAIC, MODEL, "--model-name", "tiny-llada")
    KEYED = harness.Server(MOSAIC, MODEL, "--model-name", "tiny-llada",
                           "--allowed-origins", "http://app.example, http://localhost:3000", env={"MOSAIC_API_KEY": KEY})


def tearDownModule():
    for server in (SERVER, KEYED):
        if server:
            server.kill()
    shutil.rmtree(TMP, ignore_errors=True)


def bearer(key=KEY):
    return {"Authorization": f"Bearer {key}"}


def completion(prompt="hello", **fields):
    return {"prompt": prompt, "max_tokens": 8, "steps": 4, **fields}


def header(headers, name):
    """A response header by name, whatever its case (None when absent)."""
    for key, value in headers.items():
        if key.lower() == name.lower():
            return value
    return None


def access_lines(server, request_id):
    """The access-log lines about `request_id`, each as a dict of its key=value pairs."""
    lines = []
    for line in list(server.log):
        if " access " in line and f"request_id={request_id} " in line:
            lines.append(dict(re.findall(r'(\w+)=("(?:[^"\\]|\\.)*"|\S+)', line.split(" access ", 1)[1])))
    return lines


def wait_for_access_lines(server, request_id, count=1, timeout=5):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        lines = access_lines(server, request_id)
        if len(lines) >= count:
            return lines
        time.sleep(0.02)
    return access_lines(server, request_id)


def context_length_of(model):
    with open(os.path.join(model, "config.json")) as f:
        config = json.load(f)
    return config.get("max_position_embeddings", config.get("max_sequence_length"))


class ApiKey(unittest.TestCase):
    def assert_unauthorized(self, status, headers, body):
        self.assertEqual(status, 401, body)
        self.assertEqual(set(body["error"]), {"message", "type", "param", "code"})
        self.assertEqual(body["error"]["code"], "invalid_api_key")
        self.assertEqual(header(headers, "WWW-Authenticate"), "Bearer")

    def test_every_route_but_health_needs_the_key(self):
        self.assertEqual(KEYED.request("GET", "/health")[0], 200)
        for method, path, body in [("GET", "/v1/models", None), ("GET", "/v1/models/tiny-llada", None),
                                   ("GET", "/metrics", None), ("GET", "/version", None),
                                   ("POST", "/v1/completions", completion()),
                                   ("POST", "/v1/chat/completions",
                                    {"messages": [{"role": "user", "content": "x"}], "max_tokens": 4, "steps": 2}),
                                   ("POST", "/generate", {"prompt": "x", "gen_length": 4, "steps": 2}),
                                   ("POST", "/tokenize", {"prompt": "x"}),
                                   ("POST", "/detokenize", {"tokens": [72]})]:
            status, headers, answer = KEYED.request(method, path, body=body)
            self.assert_unauthorized(status, headers, answer)
            self.assertIn("Authorization: Bearer", answer["error"]["message"])
            for wrong in ({"Authorization": "Bearer sk-test-7f3a9d"}, {"Authorization": "Bearer " + KEY[:-1]},
                          {"Authorization": "Basic " + KEY}, {"Authorization": KEY}):
                status, headers, answer = KEYED.request(method, path, body=body, headers=wrong)
                self.assert_unauthorized(status, headers, answer)
            status, _, answer = KEYED.request(method, path, body=body, headers=bearer())
            self.assertEqual(status, 200, (path, answer))

    def test_the_key_may_come_from_the_command_line(self):
        server = harness.Server(MOSAIC, MODEL, "--api-key", "cli-key", "--no-access-log")
        try:
            self.assertEqual(server.request("GET", "/v1/models")[0], 401)
            self.assertEqual(server.request("GET", "/v1/models", headers=bearer("cli-key"))[0], 200)
            status, _, body = server.post("/v1/completions", completion(), headers=bearer("cli-key"))
            self.assertEqual(status, 200, body)
        finally:
            server.kill()


class Cors(unittest.TestCase):
    PREFLIGHT = {"Origin": "http://app.example", "Access-Control-Request-Method": "POST",
                 "Access-Control-Request-Headers": "authorization, content-type, x-stainless-os"}

    def test_off_by_default(self):
        status, headers, body = SERVER.request("OPTIONS", "/v1/completions", headers=self.PREFLIGHT)
        self.assertEqual(status, 403, body)
        self.assertEqual(body["error"]["code"], "origin_not_allowed")
        self.assertIn("--allowed-origins", body["error"]["message"])
        self.assertIsNone(header(headers, "Access-Control-Allow-Origin"))
        status, headers, _ = SERVER.request("GET", "/v1/models", headers={"Origin": "http://app.example"})
        self.assertEqual(status, 200)
        self.assertIsNone(header(headers, "Access-Control-Allow-Origin"))

    def test_a_listed_origin_may_call_and_its_preflight_needs_no_key(self):
        status, headers, _ = KEYED.request("OPTIONS", "/v1/completions", headers=self.PREFLIGHT)
        self.assertEqual(status, 204)
        self.assertEqual(header(headers, "Access-Control-Allow-Origin"), "http://app.example")
        self.assertEqual(header(headers, "Access-Control-Allow-Methods"), "GET, POST, OPTIONS")
        self.assertEqual(header(headers, "Access-Control-Allow-Headers"), "authorization, content-type, x-stainless-os")
        self.assertEqual(header(headers, "Access-Control-Max-Age"), "600")
        self.assertEqual(header(headers, "Vary"), "Origin")
        status, headers, body = KEYED.post("/v1/completions", completion(),
                                           headers={**bearer(), "Origin": "http://localhost:3000"})
        self.assertEqual(status, 200, body)
        self.assertEqual(header(headers, "Access-Control-Allow-Origin"), "http://localhost:3000")
        self.assertEqual(header(headers, "Access-Control-Expose-Headers"), "X-Request-Id")
        # An error answer carries the header too, so the page can read why.
        status, headers, _ = KEYED.request("GET", "/v1/models", headers={"Origin": "http://app.example"})
        self.assertEqual(status, 401)
        self.assertEqual(header(headers, "Access-Control-Allow-Origin"), "http://app.example")

    def test_another_origin_is_refused(self):
        status, headers, body = KEYED.request("OPTIONS", "/v1/completions",
                                              headers=dict(self.PREFLIGHT, Origin="http://evil.example"))
        self.assertEqual(status, 403, body)
        self.assertIn("http://evil.example", body["error"]["message"])
        self.assertIsNone(header(headers, "Access-Control-Allow-Origin"))
        status, headers, _ = KEYED.request("GET", "/v1/models", headers={**bearer(), "Origin": "http://evil.example"})
        self.assertEqual(status, 200)
        self.assertIsNone(header(headers, "Access-Control-Allow-Origin"))

    def test_a_malformed_origin_list_is_a_clear_error(self):
        proc = subprocess.run([MOSAIC, "serve", "--model", MODEL, "--allowed-origins", "app.example/path"],
                              capture_output=True, text=True, timeout=60)
        self.assertEqual(proc.returncode, 1, proc.stderr)
        self.assertIn("--allowed-origins: 'app.example/path' is not an origin", proc.stderr)


class RequestIds(unittest.TestCase):
    def test_a_client_id_is_returned_sanitised_and_a_missing_one_is_made(self):
        status, headers, _ = SERVER.post("/v1/completions", completion(), headers={"X-Request-Id": "trace-42.a"})
        self.assertEqual(status, 200)
        self.assertEqual(header(headers, "X-Request-Id"), "trace-42.a")
        status, headers, _ = SERVER.request("GET", "/health", headers={"X-Request-Id": "a b<c>\"d\"" + "e" * 300})
        self.assertEqual(header(headers, "X-Request-Id"), "abcd" + "e" * 124)  # kept characters, 128 at most
        made = {header(SERVER.request("GET", "/health")[1], "X-Request-Id") for _ in range(5)}
        self.assertEqual(len(made), 5)
        for request_id in made:
            self.assertRegex(request_id, r"^req-[0-9a-f]{16}[0-9a-f]{8,}$")
        # Errors carry it as well, including those answered before a handler runs.
        status, headers, _ = SERVER.request("POST", "/v1/completions", raw="{", headers={"X-Request-Id": "bad-json-1"})
        self.assertEqual((status, header(headers, "X-Request-Id")), (400, "bad-json-1"))

    def test_every_log_line_about_a_request_names_it(self):
        SERVER.post("/v1/completions", completion(), headers={"X-Request-Id": "logged-1"})
        lines = wait_for_access_lines(SERVER, "logged-1")
        self.assertEqual(len(lines), 1, "one access line per request")


class AccessLog(unittest.TestCase):
    def test_a_generation_line_has_its_tokens_steps_and_times(self):
        body = completion("The sea", max_tokens=16, steps=8)
        status, _, answer = SERVER.post("/v1/completions", body, headers={"X-Request-Id": "access-gen-1"})
        self.assertEqual(status, 200, answer)
        reference = harness.generate_cli(MOSAIC, MODEL, "The sea", gen_length=16, steps=8)
        [line] = wait_for_access_lines(SERVER, "access-gen-1")
        self.assertEqual(line["method"], "POST")
        self.assertEqual(line["path"], "/v1/completions")
        self.assertEqual(line["status"], "200")
        self.assertEqual(int(line["prompt_tokens"]), len(reference["prompt_ids"]))
        self.assertEqual(int(line["steps"]), 8)
        self.assertEqual(int(line["completion_tokens"]), answer["usage"]["completion_tokens"])
        self.assertEqual(line["finish_reason"], answer["choices"][0]["finish_reason"])
        self.assertGreaterEqual(float(line["queue_s"]), 0)
        self.assertGreaterEqual(float(line["total_s"]), float(line["queue_s"]))

    def test_streams_errors_and_other_routes_get_a_line_too(self):
        conn = SERVER.connection()
        conn.request("POST", "/v1/completions", body=json.dumps(completion(stream=True)),
                     headers={"Content-Type": "application/json", "X-Request-Id": "access-stream-1"})
        response = conn.getresponse()
        self.assertEqual(response.status, 200)
        response.read()
        conn.close()
        [line] = wait_for_access_lines(SERVER, "access-stream-1")
        self.assertEqual(int(line["steps"]), 4)
        SERVER.post("/v1/completions", {"prompt": "x", "temperature": "hot"}, headers={"X-Request-Id": "access-err-1"})
        [line] = wait_for_access_lines(SERVER, "access-err-1")
        self.assertEqual(line["status"], "400")
        self.assertNotIn("prompt_tokens", line)
        SERVER.request("GET", "/metrics", headers={"X-Request-Id": "access-metrics-1"})
        [line] = wait_for_access_lines(SERVER, "access-metrics-1")
        self.assertEqual((line["method"], line["path"], line["status"]), ("GET", "/metrics", "200"))

    def test_no_access_log_silences_it(self):
        server = harness.Server(MOSAIC, MODEL, "--no-access-log")
        try:
            server.request("GET", "/health", headers={"X-Request-Id": "quiet-1"})
            time.sleep(0.2)
            self.assertEqual(access_lines(server, "quiet-1"), [])
        finally:
            server.kill()


class Identity(unittest.TestCase):
    def test_response_ids_are_unique_across_restarts(self):
        ids = []
        for _ in range(2):
            server = harness.Server(MOSAIC, MODEL, "--no-access-log")
            try:
                for _ in range(2):
                    ids.append(server.post("/v1/completions", completion())[2]["id"])
                    ids.append(server.post("/v1/chat/completions",
                                           {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4,
                                            "steps": 2})[2]["id"])
            finally:
                server.kill()
        self.assertEqual(len(set(ids)), len(ids), ids)
        self.assertTrue(all(i.startswith("cmpl-") for i in ids[0::2]))
        self.assertTrue(all(i.startswith("chatcmpl-") for i in ids[1::2]))

    def test_models_carry_creation_time_and_context_length(self):
        status, _, listing = SERVER.request("GET", "/v1/models")
        self.assertEqual(status, 200)
        [model] = listing["data"]
        status, _, retrieved = SERVER.request("GET", "/v1/models/tiny-llada")
        self.assertEqual(status, 200, retrieved)
        self.assertEqual(retrieved, model)
        self.assertEqual(model["id"], "tiny-llada")
        self.assertEqual(model["object"], "model")
        self.assertGreaterEqual(model["created"], int(STARTED) - 1)
        self.assertLessEqual(model["created"], int(time.time()) + 1)
        self.assertEqual(model["max_model_len"], context_length_of(MODEL))
        status, _, body = SERVER.request("GET", "/v1/models/other-model")
        self.assertEqual(status, 404, body)
        self.assertEqual(body["error"]["code"], "model_not_found")

    def test_version_names_this_build(self):
        with open(os.path.join(REPO, "CMakeLists.txt")) as f:
            project_version = re.search(r"project\(mosaic VERSION ([\d.]+)", f.read()).group(1)
        cli_version = subprocess.run([MOSAIC, "--version"], capture_output=True, text=True, timeout=30).stdout.strip()
        status, _, body = SERVER.request("GET", "/version")
        self.assertEqual(status, 200)
        self.assertEqual(body["version"], project_version)
        self.assertIn(project_version, cli_version)
        self.assertEqual(body["build"]["http_library"], "cpp-httplib 0.11.4")
        self.assertIn(body["build"]["cuda"], (True, False))
        self.assertEqual(body["device"], "cpu")


class Tokenize(unittest.TestCase):
    def test_tokenize_gives_the_ids_a_completion_runs(self):
        reference = harness.generate_cli(MOSAIC, MODEL, "Hello world", gen_length=4, steps=2)
        status, _, body = SERVER.post("/tokenize", {"prompt": "Hello world"})
        self.assertEqual(status, 200, body)
        self.assertEqual(body["tokens"], reference["prompt_ids"])
        self.assertEqual(body["count"], len(reference["prompt_ids"]))
        self.assertEqual(body["max_model_len"], context_length_of(MODEL))
        chat = harness.generate_cli(MOSAIC, MODEL, "Tell me", chat=True, gen_length=4, steps=2)
        status, _, body = SERVER.post("/tokenize", {"messages": [{"role": "user", "content": "Tell me"}]})
        self.assertEqual(status, 200, body)
        self.assertEqual(body["tokens"], chat["prompt_ids"])

    def test_detokenize_inverts_it(self):
        text = "Hello, wörld"
        tokens = SERVER.post("/tokenize", {"prompt": text})[2]["tokens"]
        status, _, body = SERVER.post("/detokenize", {"tokens": tokens})
        self.assertEqual(status, 200, body)
        self.assertEqual(body["prompt"], text)
        self.assertEqual(SERVER.post("/detokenize", {"tokens": list(text.encode("utf-8"))})[2]["prompt"], text)

    def test_bad_bodies_name_the_field(self):
        for body, param in [({"tokens": [1, 99999]}, "tokens"), ({"tokens": "abc"}, "tokens"), ({}, "tokens"),
                            ({"tokens": [1.5]}, "tokens")]:
            status, _, answer = SERVER.post("/detokenize", body)
            self.assertEqual(status, 400, answer)
            self.assertEqual(answer["error"]["param"], param)
        for body, param in [({"prompt": ""}, "prompt"), ({"prompt": 7}, "prompt")]:
            status, _, answer = SERVER.post("/tokenize", body)
            self.assertEqual(status, 400, answer)
            self.assertEqual(answer["error"]["param"], param)
        status, _, answer = SERVER.post("/tokenize", {"prompt": "x", "model": "gpt-4"})
        self.assertEqual(status, 404, answer)
        status, _, answer = SERVER.request("POST", "/detokenize", raw="[")
        self.assertEqual(status, 400, answer)


class VllmMetrics(unittest.TestCase):
    def test_dashboards_find_tokens_finish_reasons_and_latencies_by_model(self):
        server = harness.Server(MOSAIC, MODEL, "--model-name", "tiny-m", "--no-access-log")
        try:
            answers = [server.post("/v1/completions", completion(f"metrics {i}", max_tokens=8 + 4 * i, steps=4))[2]
                       for i in range(3)]
            # One aborted: a stream whose client leaves.
            conn = server.connection()
            conn.request("POST", "/v1/completions", body=json.dumps(completion(max_tokens=2048, steps=2048,
                                                                               stream=True)))
            response = conn.getresponse()
            self.assertEqual(response.status, 200)
            conn.sock.shutdown(2)
            conn.close()
            deadline = time.monotonic() + 20
            label = 'model_name="tiny-m"'
            while time.monotonic() < deadline:
                metrics = server.metrics()
                if metrics[f'vllm:request_success_total{{{label},finished_reason="abort"}}'] == 1:
                    break
                time.sleep(0.05)
            self.assertEqual(metrics[f'vllm:request_success_total{{{label},finished_reason="abort"}}'], 1)
            finished = sum(metrics[f'vllm:request_success_total{{{label},finished_reason="{r}"}}']
                           for r in ("stop", "length"))
            self.assertEqual(finished, 3)
            reasons = [a["choices"][0]["finish_reason"] for a in answers]
            self.assertEqual(metrics[f'vllm:request_success_total{{{label},finished_reason="length"}}'],
                             reasons.count("length"))
            self.assertEqual(metrics[f"vllm:prompt_tokens_total{{{label}}}"],
                             sum(a["usage"]["prompt_tokens"] for a in answers))
            self.assertEqual(metrics[f"vllm:generation_tokens_total{{{label}}}"],
                             sum(a["usage"]["completion_tokens"] for a in answers))
            self.assertEqual(metrics[f"vllm:time_to_first_token_seconds_count{{{label}}}"], 3)
            self.assertEqual(metrics[f"vllm:e2e_request_latency_seconds_count{{{label}}}"], 3)
            self.assertEqual(metrics[f"vllm:request_prompt_tokens_count{{{label}}}"], 3)
            self.assertEqual(metrics[f"vllm:num_requests_running{{{label}}}"], 0)
            self.assertEqual(metrics[f"vllm:num_requests_waiting{{{label}}}"], 0)
            self.assertGreater(metrics[f"vllm:iteration_tokens_total_count{{{label}}}"], 0)
            self.assertIn(f'vllm:time_per_output_token_seconds_bucket{{{label},le="+Inf"}}', metrics)
            # Mosaic's own figures stay as they were.
            self.assertEqual(metrics['mosaic_requests_total{outcome="completed"}'], 3)
            self.assertEqual(metrics['mosaic_requests_total{outcome="cancelled"}'], 1)
        finally:
            server.kill()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--mosaic", required=True)
    args, rest = parser.parse_known_args()
    MOSAIC = os.path.abspath(args.mosaic)
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
