"""A fault on the loopback path to an object store: an HTTP proxy in front of moto that passes every
request through, except those a rule names (a method and a key pattern), which it fails the way S3 and
networks do: the connection reset, or `503 SlowDown`. A rule holds until it is cleared, so that the
store client's own retries meet the same fault; every request the proxy failed is recorded.

The proxy runs in a process of its own (`start_fault_proxy`), as moto does (tests/storage/servers.py:
delta-rs holds the interpreter lock through some requests, which a server thread of the test process
would wait for); the test sets and clears its rules through its control path, `/__faults__`.
"""

from __future__ import annotations

import http.client
import json
import re
import socket
import struct
import subprocess
import sys
import threading
import urllib.request
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlparse

SLOW_DOWN = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
    b"<Message>Please reduce your request rate.</Message></Error>"
)
RESET = "reset"
SLOWDOWN = "slowdown"
CONTROL = "/__faults__"
ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Rule:
    method: str
    key: re.Pattern[str]  # matched against the request's path (bucket and key)
    kind: str  # RESET or SLOWDOWN


@dataclass
class FaultProxy:
    """A proxy on 127.0.0.1 to `upstream` (http://host:port); `endpoint` is where clients go instead."""

    upstream: str
    port: int = 0
    endpoint: str = ""
    rules: list[Rule] = field(default_factory=list)
    failed: list[tuple[str, str, str]] = field(default_factory=list)  # (method, path, kind)
    _server: ThreadingHTTPServer | None = None
    _server_thread: threading.Thread | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def fail(self, method: str, key_pattern: str, kind: str) -> None:
        with self._lock:
            self.rules.append(Rule(method, re.compile(key_pattern), kind))

    def clear(self) -> None:
        with self._lock:
            self.rules.clear()

    def rule_for(self, method: str, path: str) -> Rule | None:
        with self._lock:
            rule = next((r for r in self.rules if r.method == method and r.key.search(path)), None)
            if rule is not None:
                self.failed.append((method, path, rule.kind))
            return rule

    def start(self) -> FaultProxy:
        proxy = self
        target = urlparse(self.upstream)

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # quiet: the tests' output is their own
                pass

            def _control(self, body: bytes) -> None:
                order = json.loads(body or b"{}")
                if order.get("clear"):
                    proxy.clear()
                for method, pattern, kind in order.get("fail", []):
                    proxy.fail(method, pattern, kind)
                with proxy._lock:
                    answer = json.dumps({"failed": proxy.failed}).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def _relay(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                if self.path == CONTROL:
                    self._control(body)
                    return
                rule = proxy.rule_for(self.command, self.path)
                if rule is not None and rule.kind == RESET:
                    # RST instead of FIN: the client sees "connection reset by peer"
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    self.close_connection = True
                    self.connection.close()
                    return
                if rule is not None:
                    self.send_response(503, "Slow Down")
                    self.send_header("Content-Type", "application/xml")
                    self.send_header("Content-Length", str(len(SLOW_DOWN)))
                    self.end_headers()
                    self.wfile.write(SLOW_DOWN)
                    return
                upstream = http.client.HTTPConnection(target.hostname, target.port, timeout=60)
                try:
                    headers = {k: v for k, v in self.headers.items() if k.lower() != "connection"}
                    upstream.request(self.command, self.path, body=body, headers=headers)
                    answer = upstream.getresponse()
                    data = answer.read()
                    self.send_response(answer.status, answer.reason)
                    for name, value in answer.getheaders():
                        if name.lower() not in ("transfer-encoding", "connection", "content-length"):
                            self.send_header(name, value)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(data)
                finally:
                    upstream.close()

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _relay

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True
        self.endpoint = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._server_thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._server_thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()


@dataclass(frozen=True)
class ProxyControl:
    """The test's handle on a proxy process: where clients go (`endpoint`) and its rules."""

    endpoint: str

    def _order(self, order: dict) -> list[tuple[str, str, str]]:
        request = urllib.request.Request(
            self.endpoint + CONTROL, data=json.dumps(order).encode(), method="POST"
        )
        with urllib.request.urlopen(request, timeout=30) as answer:
            return [tuple(f) for f in json.loads(answer.read())["failed"]]

    def fail(self, method: str, key_pattern: str, kind: str) -> None:
        """Fail every `method` request whose path matches `key_pattern` this way, until `clear`."""
        self._order({"fail": [[method, key_pattern, kind]]})

    def clear(self) -> None:
        self._order({"clear": True})

    def failed(self) -> list[tuple[str, str, str]]:
        """Every request failed so far: (method, path, kind)."""
        return self._order({})


def start_fault_proxy(upstream: str, port: int) -> tuple[subprocess.Popen, ProxyControl]:
    """The proxy to `upstream` in its own process, listening on 127.0.0.1:`port`."""
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.storage.fault_proxy", upstream, str(port)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return process, ProxyControl(f"http://127.0.0.1:{port}")


if __name__ == "__main__":
    FaultProxy(sys.argv[1], int(sys.argv[2])).start()._server_thread.join()
