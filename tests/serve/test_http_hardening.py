#!/usr/bin/python3
"""`mosaic serve` under attack and against bad framing, on a tiny random checkpoint:

    /usr/bin/python3 tests/serve/test_http_hardening.py --mosaic build/src/cli/mosaic

A slowloris attack and a flood of silent half-requests must not keep a normal client waiting
(/health and a small completion each answer within a second while they last); the attackers are
cut off at their deadlines with 408; more connections than --max-connections evict the idle ones;
malformed framing is answered at once with the status that fits; an HTTP/1.0 client streams
without chunked encoding; a known route asked with another method is 405 with Allow.
Design: docs/design/http-hardening.md.
"""

import argparse
import json
import os
import select
import shutil
import socket
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_harness as harness  # noqa: E402

MOSAIC = None
TMP = MODEL = SERVER = None
HEADER_TIMEOUT, REQUEST_TIMEOUT = 2.0, 4.0


def setUpModule():
    global TMP, MODEL, SERVER
    TMP = tempfile.mkdtemp(prefix="mosaic_hardening_test_")
    tokenizer = os.path.join(TMP, "tokenizer.json")
    harness.write_tokenizer(tokenizer)
    MODEL = harness.make_model(MOSAIC, os.path.join(TMP, "llada"), "llada", tokenizer, seed=1)
    SERVER = harness.Server(MOSAIC, MODEL, "--model-name", "tiny", "--header-timeout", str(HEADER_TIMEOUT),
                            "--request-timeout", str(REQUEST_TIMEOUT), "--no-access-log")


def tearDownModule():
    if SERVER:
        SERVER.kill()
    shutil.rmtree(TMP, ignore_errors=True)


def small_completion():
    return {"prompt": "hi", "max_tokens": 4, "steps": 2}


def timed(call):
    start = time.monotonic()
    result = call()
    return result, time.monotonic() - start


def open_socket(server):
    s = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def read_all(s, timeout):
    """What arrives on `s` until the server closes it or `timeout` passes."""
    data, deadline = b"", time.monotonic() + timeout
    s.setblocking(False)
    while time.monotonic() < deadline:
        ready, _, _ = select.select([s], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            break
        try:
            chunk = s.recv(65536)
        except (BlockingIOError, InterruptedError):
            continue
        except ConnectionResetError:
            break
        if not chunk:
            break
        data += chunk
    return data


def status_of(response):
    line = response.split(b"\r\n", 1)[0].decode("latin-1")
    parts = line.split(" ")
    return int(parts[1]) if len(parts) >= 2 and parts[0].startswith("HTTP/") else None


def json_body_of(response):
    return json.loads(response.split(b"\r\n\r\n", 1)[1].decode("utf-8"))


def raw_exchange(server, data, timeout=5):
    """Sends raw bytes, returns (what came back until the server closed, seconds to the answer)."""
    s = open_socket(server)
    try:
        start = time.monotonic()
        s.sendall(data)
        response = read_all(s, timeout)
        return response, time.monotonic() - start
    finally:
        s.close()


class Attacks(unittest.TestCase):
    def assert_served_quickly(self, server, what):
        (status, _, body), seconds = timed(lambda: server.request("GET", "/health", timeout=10))
        self.assertEqual(status, 200, body)
        self.assertLess(seconds, 1.0, f"/health during {what}")
        (status, _, body), seconds = timed(lambda: server.post("/v1/completions", small_completion(), timeout=10))
        self.assertEqual(status, 200, body)
        self.assertEqual(len(body["mosaic"]["output_ids"]), 4)
        self.assertLess(seconds, 1.0, f"a small completion during {what}")

    def test_slowloris_and_half_request_flood_leave_normal_clients_served(self):
        # 150 heads trickling a header line every 0.5 s (slowloris), and 200 requests that send half
        # their body and go silent: 350 connections, each holding no thread.
        slow = [open_socket(SERVER) for _ in range(150)]
        half = [open_socket(SERVER) for _ in range(200)]
        start = time.monotonic()
        for s in slow:
            s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n")
        for s in half:
            s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"pro")
        answered = {}  # socket -> (seconds after the start, what it got)
        stop = threading.Event()

        def attack():
            """Trickles into the slow heads until each is answered; notes when each socket is."""
            next_trickle = time.monotonic() + 0.5
            while not stop.is_set() and len(answered) < len(slow) + len(half):
                waiting = [s for s in slow + half if s not in answered]
                ready, _, _ = select.select(waiting, [], [], 0.05)
                for s in ready:
                    try:
                        answered[s] = (time.monotonic() - start, s.recv(65536))
                    except OSError as error:
                        answered[s] = (time.monotonic() - start, repr(error).encode())
                if time.monotonic() >= next_trickle:
                    next_trickle += 0.5
                    for s in slow:
                        if s not in answered:
                            s.sendall(b"X-Slow: 1\r\n")

        attacker = threading.Thread(target=attack)
        attacker.start()
        try:
            time.sleep(0.5)
            for _ in range(3):
                self.assert_served_quickly(SERVER, "slowloris and a half-request flood")
                time.sleep(0.2)
            attacker.join(timeout=REQUEST_TIMEOUT + 10)
        finally:
            stop.set()
            attacker.join()
            for s in slow + half:
                s.close()
        # Each deadline runs from the request's first byte, whatever trickles in after it: the heads
        # are cut off at the head's deadline, the half bodies at the whole request's.
        for group, deadline in ((slow, HEADER_TIMEOUT), (half, REQUEST_TIMEOUT)):
            for s in group:
                self.assertIn(s, answered)
                seconds, answer = answered[s]
                self.assertEqual(status_of(answer), 408, (deadline, seconds, answer[:200]))
                self.assertIn("not received within", json_body_of(answer)["error"]["message"])
                self.assertGreaterEqual(seconds, deadline - 0.1)
                self.assertLess(seconds, deadline + 2.0)
        metrics = SERVER.metrics()
        self.assertGreaterEqual(metrics['mosaic_http_refusals_total{status="408"}'], 350)
        self.assert_served_quickly(SERVER, "the aftermath")

    def test_more_connections_than_the_cap_evict_idle_ones(self):
        server = harness.Server(MOSAIC, MODEL, "--max-connections", "40", "--no-access-log")
        sockets = []
        try:
            sockets = [open_socket(server) for _ in range(120)]  # silent: they never send a byte
            time.sleep(0.3)
            self.assert_served_quickly(server, "a connection flood over the cap")
            self.assertLessEqual(server.metrics()["mosaic_http_connections"], 40)
            evicted = sum(1 for s in sockets[:40] if read_all(s, 0.2) == b"")
            self.assertEqual(evicted, 40, "the oldest idle connections were closed")
        finally:
            for s in sockets:
                s.close()
            server.kill()


class Framing(unittest.TestCase):
    CASES = [
        # (raw request, status, fragment of the message)
        (b"POST /v1/completions HTTP/1.1\r\nContent-Length: -5\r\n\r\n", 400, "Content-Length must be a number"),
        (b"POST /v1/completions HTTP/1.1\r\nContent-Length: 1e3\r\n\r\n", 400, "Content-Length"),
        (b"POST /v1/completions HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd", 400, "disagree"),
        (b"POST /v1/completions HTTP/1.1\r\nContent-Length: 999999999999\r\n\r\n", 413, "exceeds the limit"),
        (b"POST /v1/completions HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", 400, "ambiguous"),
        (b"POST /v1/completions HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", 501, "Transfer-Encoding"),
        (b"POST /v1/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nxyz\r\n", 400, "hexadecimal"),
        (b"POST /v1/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nfffffffff\r\n", 413, "exceeds the limit"),
        (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n\r\n", 411, "Content-Length"),
        (b"GET /health HTTP/2.0\r\n\r\n", 505, "HTTP/2.0"),
        (b"GET /health HTTP/1.1\nHost: x\n\n", 400, "CRLF"),
        (b"GET /health\r\n\r\n", 400, "request line"),
        (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n", 400, "request line"),  # TLS to a plain port
        (b"BREW /pot HTTP/1.1\r\n\r\n", 501, "BREW"),
        (b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\n\r\n", 414, "request line"),
        (b"GET /health HTTP/1.1\r\nX-Big: " + b"b" * 9000 + b"\r\n\r\n", 431, "header line"),
        (b"GET /health HTTP/1.1\r\n" + b"X-Many: 1\r\n" * 200 + b"\r\n", 431, "header lines"),
        (b"GET /health HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n", 400, "folding"),
        (b"POST /v1/completions HTTP/1.1\r\nExpect: tea\r\nContent-Length: 2\r\n\r\n", 417, "expectation"),
    ]

    def test_bad_framing_is_answered_at_once(self):
        for raw, status, fragment in self.CASES:
            response, seconds = raw_exchange(SERVER, raw)
            self.assertEqual(status_of(response), status, (raw[:80], response[:300]))
            error = json_body_of(response)["error"]
            self.assertEqual(set(error), {"message", "type", "param", "code"})
            self.assertIn(fragment, error["message"], raw[:80])
            self.assertIn(b"\r\nConnection: close\r\n", response.split(b"\r\n\r\n")[0] + b"\r\n")
            self.assertLess(seconds, 1.0, raw[:80])
        self.assertTrue(SERVER.alive())

    def test_a_body_over_the_limit_is_refused_before_it_is_sent(self):
        # The status arrives after the head: a client may stop sending its 9 MiB at once.
        s = open_socket(SERVER)
        try:
            s.sendall(b"POST /v1/completions HTTP/1.1\r\nContent-Length: 9437184\r\n\r\n")
            response = read_all(s, 2.0)
        finally:
            s.close()
        self.assertEqual(status_of(response), 413)
        self.assertIn("9437184 bytes exceeds the limit of 8388608 bytes", json_body_of(response)["error"]["message"])

    def test_chunked_bodies_pipelining_and_expect_continue_work(self):
        body = json.dumps(small_completion()).encode()
        chunked = b"".join(b"%x\r\n%s\r\n" % (len(body[i:i + 7]), body[i:i + 7]) for i in range(0, len(body), 7))
        request = (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked +
                   b"0\r\n\r\n" + b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        response, _ = raw_exchange(SERVER, request)
        self.assertEqual(response.count(b"HTTP/1.1 200 OK\r\n"), 2, response[:500])
        self.assertIn(b'"output_ids"', response)
        self.assertIn(b'"status":"ok"', response)

        s = open_socket(SERVER)
        try:
            s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nConnection: close\r\n"
                      b"Content-Length: %d\r\n\r\n" % len(body))
            interim = s.recv(4096)
            self.assertEqual(interim, b"HTTP/1.1 100 Continue\r\n\r\n")
            s.sendall(body)
            response = read_all(s, 10)
        finally:
            s.close()
        self.assertEqual(status_of(response), 200, response[:300])
        self.assertNotIn(b"100 Continue", response)  # once, by the guard, not again by the library

    def test_http10_gets_a_stream_without_chunked_encoding(self):
        body = dict(small_completion(), max_tokens=16, steps=8, block_length=4, seed=3)
        status, _, whole = SERVER.post("/v1/completions", body)
        self.assertEqual(status, 200, whole)
        data = json.dumps(dict(body, stream=True)).encode()
        response, _ = raw_exchange(SERVER, b"POST /v1/completions HTTP/1.0\r\nContent-Type: application/json\r\n"
                                           b"Content-Length: %d\r\n\r\n" % len(data) + data, timeout=30)
        head, _, payload = response.partition(b"\r\n\r\n")
        self.assertEqual(status_of(response), 200, head)
        headers = head.lower()
        self.assertNotIn(b"transfer-encoding", headers)
        self.assertNotIn(b"content-length", headers)
        self.assertIn(b"connection: close", headers)
        self.assertIn(b"content-type: text/event-stream", headers)
        events = [block[len(b"data: "):] for block in payload.split(b"\n\n") if block]
        self.assertEqual(events[-1], b"[DONE]")
        text = "".join(json.loads(e)["choices"][0]["text"] for e in events[:-1])
        self.assertEqual(text, whole["choices"][0]["text"])
        # And a plain answer to HTTP/1.0 has its length.
        data = json.dumps(body).encode()
        response, _ = raw_exchange(SERVER, b"POST /v1/completions HTTP/1.0\r\nContent-Length: %d\r\n\r\n" % len(data)
                                   + data, timeout=30)
        self.assertEqual(status_of(response), 200)
        self.assertEqual(json_body_of(response)["mosaic"]["output_ids"], whole["mosaic"]["output_ids"])

    def test_keep_alive_serves_several_requests_on_one_connection(self):
        conn = SERVER.connection(timeout=10)
        try:
            for _ in range(3):
                conn.request("GET", "/health")
                response = conn.getresponse()
                self.assertEqual(response.status, 200)
                response.read()
            conn.request("POST", "/v1/completions", body=json.dumps(small_completion()))
            response = conn.getresponse()
            self.assertEqual(response.status, 200)
            self.assertEqual(len(json.loads(response.read())["mosaic"]["output_ids"]), 4)
        finally:
            conn.close()


class Routes(unittest.TestCase):
    def assert_error(self, status, body, want, code=None):
        self.assertEqual(status, want, body)
        self.assertEqual(set(body["error"]), {"message", "type", "param", "code"})
        if code:
            self.assertEqual(body["error"]["code"], code)

    def test_another_method_on_a_known_route_is_405_with_allow(self):
        for path in ("/v1/completions", "/v1/chat/completions", "/generate", "/tokenize", "/detokenize"):
            status, headers, body = SERVER.request("GET", path)
            self.assert_error(status, body, 405, "method_not_allowed")
            self.assertEqual(headers["Allow"], "POST, OPTIONS")
            self.assertIn("GET " + path, body["error"]["message"])
        for path in ("/health", "/metrics", "/v1/models", "/version", "/v1/models/tiny"):
            status, headers, body = SERVER.request("POST", path, body={})
            self.assert_error(status, body, 405, "method_not_allowed")
            self.assertEqual(headers["Allow"], "GET, HEAD, OPTIONS")
        status, headers, body = SERVER.request("DELETE", "/v1/completions")
        self.assert_error(status, body, 405)

    def test_unknown_routes_are_404(self):
        for method, path in [("GET", "/v1/nothing"), ("POST", "/v1/embeddings"), ("GET", "/"), ("OPTIONS", "/nope")]:
            status, _, body = SERVER.request(method, path, body={} if method == "POST" else None)
            self.assert_error(status, body, 404, "not_found")
        status, _, body = SERVER.request("GET", "/v1/models/gpt-4")
        self.assert_error(status, body, 404, "model_not_found")
        self.assertIn("gpt-4", body["error"]["message"])

    def test_options_on_a_route_says_what_it_allows(self):
        status, headers, _ = SERVER.request("OPTIONS", "/v1/completions")
        self.assertEqual(status, 204)
        self.assertEqual(headers["Allow"], "POST, OPTIONS")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--mosaic", required=True)
    args, rest = parser.parse_known_args()
    MOSAIC = os.path.abspath(args.mosaic)
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
