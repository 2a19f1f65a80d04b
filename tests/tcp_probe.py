"""A timestamped TCP stream between two network namespaces, for the kernel-loss test.

``python -m tests.tcp_probe serve PORT OUT``: accept one connection on PORT, read lines
``<seq> <monotonic send time>`` until the peer closes, and write to OUT the sequence numbers
in the order they came and each one's delay (arrival minus send time, in seconds; both are
readings of CLOCK_MONOTONIC, one clock for every namespace of the machine).

``python -m tests.tcp_probe send HOST PORT COUNT GAP``: connect and send COUNT lines, one
every GAP seconds, each padded to 200 bytes (one TCP segment apiece), then close.
"""

from __future__ import annotations

import json
import socket
import sys
import time


def serve(port: int, out: str) -> None:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("0.0.0.0", port))
    listener.listen(1)
    print("listening", flush=True)
    conn, _ = listener.accept()
    seqs, delays, pending = [], [], b""
    while True:
        data = conn.recv(65536)
        now = time.monotonic()
        if not data:
            break
        pending += data
        *lines, pending = pending.split(b"\n")
        for line in lines:
            seq, sent = line.split()[:2]
            seqs.append(int(seq))
            delays.append(now - float(sent))
    with open(out, "w") as handle:
        json.dump({"seqs": seqs, "delays": delays}, handle)


def send(host: str, port: int, count: int, gap: float) -> None:
    conn = socket.create_connection((host, port), timeout=30)
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    for seq in range(count):
        line = f"{seq} {time.monotonic():.6f} ".encode()
        conn.sendall(line.ljust(199, b".") + b"\n")
        time.sleep(gap)
    conn.shutdown(socket.SHUT_WR)
    conn.recv(1)  # until the server has read everything and closed
    conn.close()


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve(int(sys.argv[2]), sys.argv[3])
    else:
        send(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]))
