"""A TCP proxy a test can cut: the database "becomes unreachable" for everyone behind it.

`cut()` resets every open connection (RST, as when a network path or the database
host goes away) and, until `restore()`, accepts new connections but never
answers them, like a blackholed route: clients only get out through their own
timeouts. `restore()` drops the stalled connections and forwards again.
"""
from __future__ import annotations

import contextlib
import socket
import struct
import threading


def _reset(sock: socket.socket) -> None:
    """Ends the connection for the peer now. close() alone would not: while a pump thread is
    blocked in recv() on the socket the kernel keeps it open, and the peer (a client, or the
    database backend holding its transaction's locks) would wait on a silent connection.
    shutdown() wakes that recv; the zero linger turns the final close into a reset."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        sock.close()


class TcpProxy:
    def __init__(self, upstream: tuple[str, int]):
        self.upstream = upstream
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self._lock = threading.Lock()
        self._live: set[socket.socket] = set()
        self._stalled: list[socket.socket] = []
        self._cut = False
        self._closed = False
        threading.Thread(target=self._accept_loop, daemon=True).start()

    def _accept_loop(self) -> None:
        while not self._closed:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            with self._lock:
                if self._cut:
                    self._stalled.append(conn)
                    continue
            try:
                up = socket.create_connection(self.upstream, timeout=5)
                up.settimeout(None)
            except OSError:
                _reset(conn)
                continue
            with self._lock:
                self._live |= {conn, up}
            for src, dst in ((conn, up), (up, conn)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            with self._lock:
                self._live -= {src, dst}
            _reset(src)
            _reset(dst)

    def cut(self) -> None:
        with self._lock:
            self._cut = True
            live, self._live = list(self._live), set()
        for sock in live:
            _reset(sock)

    def restore(self) -> None:
        with self._lock:
            self._cut = False
            stalled, self._stalled = self._stalled, []
        for sock in stalled:
            _reset(sock)

    def close(self) -> None:
        self._closed = True
        self.cut()
        self.restore()
        self.listener.close()
