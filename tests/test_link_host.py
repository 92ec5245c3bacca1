"""Host link failures that need no board: unknown port, a peer sending garbage."""

from __future__ import annotations

import random
import socket
import threading
import time
from pathlib import Path

import pytest

from splitter.device.host import HostLink
from splitter.device.run import _host_ports
from splitter.errors import LinkError


def garbage_server(stop: threading.Event) -> str:
    """A TCP peer that answers everything with random bytes (sync words included)."""
    server = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        conn, _ = server.accept()
        rng = random.Random(0)
        try:
            while not stop.is_set():
                conn.sendall(b"\xa5\x5a" + rng.randbytes(64))
                time.sleep(0.01)
        except OSError:
            pass  # the host closed the connection
        conn.close()
        server.close()

    threading.Thread(target=serve, daemon=True).start()
    return f"socket://127.0.0.1:{server.getsockname()[1]}"


def test_unknown_port_is_a_link_error(tmp_path: Path) -> None:
    with pytest.raises(LinkError, match=r"cannot open the port of device d0"):
        HostLink(str(tmp_path / "ttyNOPE"), "d0")


def test_garbage_answer_times_out_naming_the_device() -> None:
    stop = threading.Event()
    url = garbage_server(stop)
    t0 = time.monotonic()
    try:
        with (
            HostLink(url, "d7") as link,
            pytest.raises(LinkError, match=r"device d7 does not answer PING"),
        ):
            link.ping(timeout=1.5)
    finally:
        stop.set()
    assert time.monotonic() - t0 < 5


def test_missing_port_names_the_device() -> None:
    wiring = {
        "devices": [
            {"name": "a", "links": [{"peer_index": -1}]},
            {"name": "b", "links": [{"peer_index": -1}]},
        ]
    }
    assert _host_ports(wiring, {"a": "x", "b": "y"}) == {"a": "x", "b": "y"}
    with pytest.raises(LinkError, match=r"no port for host-facing device\(s\) b"):
        _host_ports(wiring, {"a": "x"})
    with pytest.raises(LinkError, match="a, b"):
        _host_ports(wiring, {"": "x"})
