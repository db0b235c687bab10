"""Service servers in this process, on a background event loop, over real sockets.

No broker, dispatcher or worker: submitted jobs stay QUEUED in the SQLite
database, which is what quota and fuzz tests want to count.
"""
from __future__ import annotations

import asyncio
import threading
from pathlib import Path

from paperworks.shared.config import Settings
from paperworks.shared.db.migrate import upgrade
from paperworks.shared.registry import service
from paperworks.shared.rpc.server import build_server


class InProcessServers:
    def __init__(self, settings: Settings, names: list[str]):
        self.settings = settings
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()
        upgrade(settings.sqlalchemy_url)
        self.servers, self.endpoints, self.runtimes = [], {}, {}
        for name in names:
            server, port, rt, _ = self._call(build_server(settings, service(name), port=0))
            self._call(server.start())
            self.servers.append(server)
            self.endpoints[name] = f"127.0.0.1:{port}"
            self.runtimes[name] = rt

    def _call(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=120)

    def close(self) -> None:
        for server in self.servers:
            self._call(server.stop(None))
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)


def settings_for(state_dir: Path, **values) -> Settings:
    return Settings(state_dir=state_dir, grpc_host="127.0.0.1",
                    auth_tokens="alice:alice-token,bob:bob-token", **values)
