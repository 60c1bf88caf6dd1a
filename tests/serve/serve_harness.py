"""What the serving tests share: a tiny byte-level tokenizer, random checkpoints that use it, a
`mosaic serve` process on a free loopback port, and HTTP helpers (standard library only)."""

import http.client
import json
import os
import queue
import re
import signal
import subprocess
import threading
import time

SPECIAL_TOKENS = ["<|endoftext|>", "<|eot_id|>", "<|mdm_mask|>", "<|startoftext|>", "<|start_header_id|>",
                  "<|end_header_id|>", "<|im_start|>", "<|im_end|>"]


def _bytes_to_unicode():
    """GPT-2's byte-level alphabet: every byte as one printable character."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    chars, extra = printable[:], 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + extra)
            extra += 1
    return dict(zip(printable, map(chr, chars)))


def write_tokenizer(path):
    """A byte-level BPE tokenizer.json: ids 0-255 are the bytes, then the special tokens (EOS
    <|endoftext|>, LLaDA's mask and chat tokens, Dream's chat tokens)."""
    alphabet = _bytes_to_unicode()
    vocab = {alphabet[b]: b for b in range(256)}
    added = [{"id": 256 + i, "content": t, "special": True, "normalized": False} for i, t in enumerate(SPECIAL_TOKENS)]
    tokenizer = {"version": "1.0", "added_tokens": added, "normalizer": None,
                 "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True},
                 "post_processor": None, "decoder": {"type": "ByteLevel"},
                 "model": {"type": "BPE", "vocab": vocab, "merges": []}}
    with open(path, "w") as f:
        json.dump(tokenizer, f)


def make_model(mosaic, out, family, tokenizer, seed=1):
    subprocess.run([mosaic, "make-test-model", "--family", family, "--layers", "2", "--hidden", "64",
                    "--heads", "2", "--kv-heads", "1", "--ffn", "128", "--vocab", "300", "--tokenizer", tokenizer,
                    "--seed", str(seed), "--quiet", "--out", out], check=True, timeout=120)
    return out


def generate_cli(mosaic, model, prompt=None, ids=None, chat=False, **options):
    """`mosaic generate --json`'s first result: the independent reference for a served answer."""
    args = [mosaic, "generate", "--model", model, "--json", "--quiet"]
    if ids is not None:
        args += ["--ids", ",".join(map(str, ids))]
    else:
        args += ["--prompt", prompt]
    if chat:
        args.append("--chat")
    for key, value in options.items():
        flag = "--" + key.replace("_", "-")
        if value is True:
            args.append(flag)
        elif value is not False and value is not None:
            args += [flag, str(value)]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        raise AssertionError(f"mosaic generate failed: {proc.stderr}")
    return json.loads(proc.stdout)["results"][0]


class Server:
    """`mosaic serve --port 0` on a model; the port is read from its startup line."""

    def __init__(self, mosaic, model, *args, env=None):
        env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"), **(env or {}))
        self.proc = subprocess.Popen([mosaic, "serve", "--model", model, "--port", "0", *args],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
        self.lines, self.log = queue.Queue(), []
        self.reader = threading.Thread(target=self._read_stderr, daemon=True)
        self.reader.start()
        deadline = time.monotonic() + 60
        self.port = None
        while self.port is None:
            try:
                line = self.lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                self.kill()
                raise AssertionError("mosaic serve did not start: " + "".join(self.log))
            if line is None:
                raise AssertionError(f"mosaic serve exited ({self.wait()}): " + "".join(self.log))
            match = re.search(r"listening on http://[\d.]+:(\d+)", line)
            if match:
                self.port = int(match.group(1))

    def _read_stderr(self):
        for line in self.proc.stderr:
            self.log.append(line)
            self.lines.put(line)
        self.lines.put(None)

    def connection(self, timeout=120):
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    def request(self, method, path, body=None, raw=None, timeout=120, headers=None):
        """(status, headers, parsed JSON or text)."""
        conn = self.connection(timeout)
        try:
            data = raw if raw is not None else (json.dumps(body) if body is not None else None)
            conn.request(method, path, body=data, headers={"Content-Type": "application/json", **(headers or {})})
            response = conn.getresponse()
            text = response.read().decode("utf-8")
            headers = dict(response.getheaders())
            try:
                return response.status, headers, json.loads(text)
            except json.JSONDecodeError:
                return response.status, headers, text
        finally:
            conn.close()

    def post(self, path, body, **kwargs):
        return self.request("POST", path, body=body, **kwargs)

    def stream(self, path, body, timeout=120):
        """(status, list of SSE data payloads, the [DONE] included as the string)."""
        conn = self.connection(timeout)
        try:
            conn.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
            response = conn.getresponse()
            if response.status != 200:
                return response.status, [json.loads(response.read())]
            assert response.getheader("Content-Type", "").startswith("text/event-stream")
            events, text = [], response.read().decode("utf-8")
            for block in text.split("\n\n"):
                if not block:
                    continue
                assert block.startswith("data: "), block
                payload = block[len("data: "):]
                events.append(payload if payload == "[DONE]" else json.loads(payload))
            return 200, events
        finally:
            conn.close()

    def metrics(self, headers=None):
        status, _, text = self.request("GET", "/metrics", headers=headers)
        assert status == 200
        values = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name, value = line.rsplit(" ", 1)
                values[name] = float(value)
        return values

    def alive(self):
        return self.proc.poll() is None

    def wait(self, timeout=60):
        """The exit status, once the process has ended and its stderr is read."""
        status = self.proc.wait(timeout=timeout)
        self.reader.join(timeout=10)
        self.proc.stderr.close()
        return status

    def stop(self, sig=signal.SIGTERM, timeout=60):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.wait(timeout)

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.wait()
