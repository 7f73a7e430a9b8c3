#!/usr/bin/env python3
"""A DNS server over TCP only, for the tests: every A query is answered with ADDRESS, every
other type with no answer. Usage: dns_tcp.py HOST PORT ADDRESS (prints "ready" when listening)."""
import socket
import struct
import sys
import threading


def answer(query: bytes, address: bytes) -> bytes:
    qid = query[:2]
    # The question: labels up to the zero byte, then type and class.
    end = query.index(b"\x00", 12) + 5
    question = query[12:end]
    qtype = struct.unpack("!H", query[end - 4 : end - 2])[0]
    records = b""
    count = 0
    if qtype == 1:
        records = b"\xc0\x0c" + struct.pack("!HHIH", 1, 1, 60, 4) + address
        count = 1
    header = qid + struct.pack("!HHHHH", 0x8180, 1, count, 0, 0)
    return header + question + records


def serve(conn: socket.socket, address: bytes) -> None:
    with conn:
        while True:
            size = conn.recv(2)
            if len(size) < 2:
                return
            (n,) = struct.unpack("!H", size)
            query = b""
            while len(query) < n:
                chunk = conn.recv(n - len(query))
                if not chunk:
                    return
                query += chunk
            reply = answer(query, address)
            conn.sendall(struct.pack("!H", len(reply)) + reply)


def main() -> None:
    host, port, address = sys.argv[1], int(sys.argv[2]), socket.inet_aton(sys.argv[3])
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((host, port))
    srv.listen(16)
    print("ready", flush=True)
    while True:
        conn, _ = srv.accept()
        threading.Thread(target=serve, args=(conn, address), daemon=True).start()


if __name__ == "__main__":
    main()
