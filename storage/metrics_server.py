"""The metrics endpoint's HTTP server: one thread, a selector loop, bounded whatever a client does.

At most ``MAX_CONNECTIONS`` connections (a new one closes the oldest still idle), each closed
``IDLE_TIMEOUT_S`` after it was accepted whatever it did. Its descriptors and threads are bounded
whatever a client does, and nothing it does can stop the run: a failure is logged (logger
``twin.metrics``) and the run goes on. What it serves is ``storage.metrics`` (the twin's metrics)
or a route of ``storage.interop``.
"""

from __future__ import annotations

import logging
import selectors
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger("twin.metrics")

# The endpoint's bounds: connections open at once (a scraper needs one), and the seconds a
# connection may live from accept to the last byte of its answer.
MAX_CONNECTIONS = 32
IDLE_TIMEOUT_S = 5.0
MAX_REQUEST_BYTES = 8192


_REASONS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    503: "Service Unavailable",
}
_BUSY = b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"


@dataclass
class _Conn:
    sock: socket.socket
    deadline: float
    inbuf: bytes = b""
    out: memoryview | None = None


class MetricsServer:
    """A bounded HTTP/1.1 endpoint for scrapes: one thread running a selector loop.

    Every socket is non-blocking and watched by the loop, so an idle or slow client holds a
    descriptor and a little memory, never a thread. At most ``max_connections`` are open at once:
    a new one closes the oldest that has not sent a whole request yet (a scraper sends its request
    at once, so a flood of idle connections cannot keep it out), or, when every one is being
    answered, is answered 503 and closed at once. Each is closed ``idle_timeout_s`` after it was
    accepted, whether it sent nothing, half a request or stopped reading the answer. One request
    per connection (``Connection: close``), as ``prometheus_client``'s own server.
    ``render(accept, accept_encoding)`` makes the body and headers of ``GET /metrics`` (and ``/``).

    Counters for tests and benchmarks: ``accepted``, ``evicted``, ``refused``, ``timed_out``,
    ``served``, ``errors``, ``peak_connections``; ``wait(pred)`` blocks until ``pred(self)``
    holds (checked after every event).

    ``route(target, headers) -> (status, headers, body)``, when given, answers every ``GET`` and
    ``HEAD`` instead (a service of several resources: ``storage.interop.servers``), with the same
    bounds."""

    def __init__(
        self,
        render: Callable[[str, str], tuple[bytes, list[tuple[str, str]]]],
        port: int,
        addr: str = "127.0.0.1",
        max_connections: int = MAX_CONNECTIONS,
        idle_timeout_s: float = IDLE_TIMEOUT_S,
        route: Callable[[str, dict[str, str]], tuple[int, list[tuple[str, str]], bytes]] | None = None,
    ) -> None:
        self.render = render
        self.route = route
        self.max_connections = max(1, max_connections)
        self.idle_timeout_s = idle_timeout_s
        self.accepted = self.refused = self.timed_out = self.served = self.errors = 0
        self.accept_errors = self.evicted = self.peak_connections = 0
        self._conns: dict[int, _Conn] = {}
        self._changed = threading.Condition()
        self._stopping = False
        self._accept_paused_until = 0.0
        self._listener = socket.create_server((addr, port), backlog=128)
        try:
            self._listener.setblocking(False)
            self.port = int(self._listener.getsockname()[1])
            self._wake_r, self._wake_w = socket.socketpair()
            self._wake_r.setblocking(False)
            self._wake_w.setblocking(False)
            self._sel = selectors.DefaultSelector()
            self._sel.register(self._listener, selectors.EVENT_READ, "listen")
            self._sel.register(self._wake_r, selectors.EVENT_READ, "wake")
        except BaseException:
            self._listener.close()
            raise
        self._thread = threading.Thread(target=self._loop, name="twin-metrics", daemon=True)
        self._thread.start()

    @property
    def open_connections(self) -> int:
        return len(self._conns)

    def wait(self, pred: Callable[[MetricsServer], bool], timeout: float | None = None) -> bool:
        """Block until ``pred(self)`` holds (re-checked after every connection event)."""
        with self._changed:
            return self._changed.wait_for(lambda: pred(self), timeout)

    def close(self) -> None:
        """Stop the loop and close every socket (the connections in progress are dropped)."""
        with self._changed:
            self._stopping = True
        try:
            self._wake_w.send(b"x")
        except OSError:
            pass
        self._thread.join()
        for conn in list(self._conns.values()):
            conn.sock.close()
        self._conns.clear()
        self._sel.close()
        self._listener.close()
        self._wake_r.close()
        self._wake_w.close()

    # ------------------------------------------------------------------ the loop
    def _loop(self) -> None:
        while not self._stopping:
            try:
                self._turn()
            except Exception:  # never end the loop: log, count, and go on after a pause
                self.errors += 1
                log.exception("metrics endpoint: unexpected error; it goes on")
                time.sleep(0.1)
            with self._changed:
                self._changed.notify_all()

    def _turn(self) -> None:
        now = time.monotonic()
        if self._accept_paused_until and now >= self._accept_paused_until:
            self._accept_paused_until = 0.0
            self._sel.register(self._listener, selectors.EVENT_READ, "listen")
        deadlines = [c.deadline for c in self._conns.values()]
        if self._accept_paused_until:
            deadlines.append(self._accept_paused_until)
        timeout = max(0.0, min(deadlines) - now) if deadlines else None
        for key, _ in self._sel.select(timeout):
            if key.data == "listen":
                self._accept()
            elif key.data == "wake":
                try:
                    self._wake_r.recv(64)
                except OSError:
                    pass
            else:
                conn = self._conns.get(key.fd)
                if conn is not None:
                    self._service(conn)
        now = time.monotonic()
        for conn in [c for c in self._conns.values() if c.deadline <= now]:
            self.timed_out += 1
            self._drop(conn)

    def _accept(self) -> None:
        for _ in range(256):  # a burst at a time; the loop comes back while there are more
            try:
                sock, _ = self._listener.accept()
            except BlockingIOError:
                return
            except OSError as e:  # e.g. EMFILE: the process is out of descriptors; retry soon
                self.errors += 1
                self.accept_errors += 1
                if self.accept_errors == 1 or self.accept_errors % 100 == 0:
                    log.warning(
                        "metrics endpoint: cannot accept a connection (%s, %d times); retrying in 0.1 s",
                        e.strerror or e,
                        self.accept_errors,
                    )
                self._sel.unregister(self._listener)
                self._accept_paused_until = time.monotonic() + 0.1
                return
            if len(self._conns) >= self.max_connections and not self._evict():
                self.refused += 1
                try:
                    sock.setblocking(False)
                    sock.send(_BUSY)
                except OSError:
                    pass
                sock.close()
                continue
            try:
                sock.setblocking(False)
                conn = _Conn(sock, time.monotonic() + self.idle_timeout_s)
                self._sel.register(sock, selectors.EVENT_READ, "conn")
            except (OSError, ValueError):
                self.errors += 1
                sock.close()
                continue
            self._conns[sock.fileno()] = conn
            self.accepted += 1
            self.peak_connections = max(self.peak_connections, len(self._conns))

    def _evict(self) -> bool:
        """Make room for a new connection: close the oldest one that has not sent a whole request
        yet (a scraper sends its request at once; a connection that idles is the one to go).
        False when every connection is being answered."""
        waiting = [c for c in self._conns.values() if c.out is None]
        if not waiting:
            return False
        self.evicted += 1
        self._drop(min(waiting, key=lambda c: c.deadline))
        return True

    def _drop(self, conn: _Conn) -> None:
        fd = conn.sock.fileno()
        self._conns.pop(fd, None)
        try:
            self._sel.unregister(conn.sock)
        except (KeyError, ValueError):
            pass
        conn.sock.close()

    def _service(self, conn: _Conn) -> None:
        try:
            if conn.out is None:
                self._read(conn)
            else:
                self._write(conn)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:  # reset by the client, and the like
            self._drop(conn)

    def _read(self, conn: _Conn) -> None:
        data = conn.sock.recv(4096)
        if not data:
            self._drop(conn)
            return
        conn.inbuf += data
        end = conn.inbuf.find(b"\r\n\r\n")
        if end < 0:
            if len(conn.inbuf) > MAX_REQUEST_BYTES:
                self._answer(conn, 431, [], b"")
            return
        self._respond(conn, conn.inbuf[:end].decode("latin-1"))

    def _respond(self, conn: _Conn, head: str) -> None:
        lines = head.split("\r\n")
        parts = lines[0].split()
        if len(parts) != 3 or not parts[2].startswith("HTTP/"):
            self._answer(conn, 400, [], b"bad request\n")
            return
        method, target = parts[0], parts[1]
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        if method not in ("GET", "HEAD"):
            self._answer(conn, 405, [("Allow", "GET, HEAD")], b"GET /metrics\n")
            return
        if self.route is not None:
            try:
                status, hdrs, body = self.route(target, headers)
            except Exception:
                self.errors += 1
                log.exception("endpoint: answering %s failed", target[:200])
                self._answer(conn, 500, [], b"could not be rendered\n")
                return
            self.served += status == 200
            self._answer(conn, status, hdrs, body, head_only=method == "HEAD")
            return
        if target.split("?", 1)[0] not in ("/metrics", "/"):
            self._answer(conn, 404, [], b"see /metrics\n")
            return
        try:
            body, hdrs = self.render(headers.get("accept", ""), headers.get("accept-encoding", ""))
        except Exception:
            self.errors += 1
            log.exception("metrics endpoint: rendering failed")
            self._answer(conn, 500, [], b"metrics could not be rendered\n")
            return
        self.served += 1
        self._answer(conn, 200, hdrs, body, head_only=method == "HEAD")

    def _answer(
        self, conn: _Conn, status: int, headers: list[tuple[str, str]], body: bytes, head_only: bool = False
    ) -> None:
        head = f"HTTP/1.1 {status} {_REASONS[status]}\r\n"
        head += "".join(f"{k}: {v}\r\n" for k, v in headers)
        head += f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        conn.out = memoryview(head.encode("latin-1") + (b"" if head_only else body))
        self._sel.modify(conn.sock, selectors.EVENT_WRITE, "conn")
        self._write(conn)

    def _write(self, conn: _Conn) -> None:
        assert conn.out is not None
        n = conn.sock.send(conn.out)
        conn.out = conn.out[n:]
        if not len(conn.out):
            self._drop(conn)
