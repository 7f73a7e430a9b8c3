"""What a command inside the jail can reach. One line per call, for the network tests.

    net_probe.py tcp HOST PORT      CONNECTED <first line> | REFUSED <error>
    net_probe.py udp HOST PORT      UDP-REPLY <reply> | UDP-FAIL <error>
    net_probe.py dns NAME           RESOLVED <address> | DNS-FAIL <error>
    net_probe.py http URL           HTTP <status> <body> | HTTP-FAIL <error>   (honours *_proxy)
    net_probe.py bind PORT          BOUND | BIND-FAIL <error>
    net_probe.py loopback           LOOPBACK-OK | LOOPBACK-FAIL <error>
    net_probe.py tfo HOST PORT      TFO-CONNECTED <first line> | TFO-FAIL <error>  (TCP Fast Open)
    net_probe.py listen             LISTENING <port> | LISTEN-FAIL <error>   (listen() unbound)
    net_probe.py serve PORT|none 4|6 FILE
                                    listens (bound to PORT, or unbound), writes "FAMILY PORT" to
                                    FILE for a client on the host, and waits for it:
                                    ALLOWED (exit 0) | BLOCKED <EACCES/EPERM> (exit 1) | NO-CLIENT (2)
"""
import os
import socket
import sys
import urllib.error
import urllib.request


def err(e):
    return type(e).__name__ + ":" + str(getattr(e, "errno", "") or e).replace(" ", "_")


def main(argv):
    kind = argv[1]
    if kind == "tcp":
        try:
            s = socket.create_connection((argv[2], int(argv[3])), timeout=5)
            line = s.makefile().readline().strip()
            print("CONNECTED", line)
        except Exception as e:  # noqa: BLE001 - the error is the answer
            print("REFUSED", err(e))
    elif kind == "udp":
        try:
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.settimeout(3)
            s.sendto(b"ping", (argv[2], int(argv[3])))
            print("UDP-REPLY", s.recv(100).decode())
        except Exception as e:  # noqa: BLE001
            print("UDP-FAIL", err(e))
    elif kind == "dns":
        try:
            print("RESOLVED", socket.getaddrinfo(argv[2], 80)[0][4][0])
        except Exception as e:  # noqa: BLE001
            print("DNS-FAIL", err(e))
    elif kind == "http":
        try:
            with urllib.request.urlopen(argv[2], timeout=10) as r:
                print("HTTP", r.status, r.read().decode().strip())
        except urllib.error.HTTPError as e:
            print("HTTP", e.code, e.read().decode(errors="replace").strip().replace("\n", " "))
        except Exception as e:  # noqa: BLE001
            print("HTTP-FAIL", err(e))
    elif kind == "bind":
        try:
            s = socket.socket()
            s.bind(("127.0.0.1", int(argv[2])))
            s.listen()
            print("BOUND")
        except Exception as e:  # noqa: BLE001
            print("BIND-FAIL", err(e))
    elif kind == "tfo":
        # sendto(MSG_FASTOPEN) connects as it sends, without connect().
        try:
            s = socket.socket()  # blocking: a timeout would make the send EINPROGRESS
            s.sendto(b"x", socket.MSG_FASTOPEN, (argv[2], int(argv[3])))
            s.settimeout(5)
            print("TFO-CONNECTED", s.makefile().readline().strip())
        except Exception as e:  # noqa: BLE001
            print("TFO-FAIL", err(e))
    elif kind == "listen":
        # listen() on an unbound socket binds an ephemeral port on every address by itself.
        try:
            s = socket.socket()
            s.listen()
            print("LISTENING", s.getsockname()[1])
        except Exception as e:  # noqa: BLE001
            print("LISTEN-FAIL", err(e))
    elif kind == "serve":
        v6 = argv[3] == "6"
        try:
            s = socket.socket(socket.AF_INET6 if v6 else socket.AF_INET)
            # A port an earlier run accepted on may linger in TIME_WAIT: not a refusal.
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if argv[2] != "none":
                s.bind(("::" if v6 else "0.0.0.0", int(argv[2])))
            s.listen()
        except PermissionError as e:
            print("BLOCKED", err(e))
            sys.exit(1)
        except OSError as e:
            print("ERROR", err(e))
            sys.exit(3)
        port = s.getsockname()[1]
        with open(argv[4] + ".tmp", "w") as f:
            f.write("%s %d" % (argv[3], port))
        os.rename(argv[4] + ".tmp", argv[4])
        s.settimeout(15)
        try:
            s.accept()
            print("ALLOWED a host client connected to port", port)
        except OSError as e:
            print("NO-CLIENT", err(e))
            sys.exit(2)
    elif kind == "loopback":
        try:
            srv = socket.socket()
            srv.bind(("127.0.0.1", 0))
            srv.listen()
            c = socket.create_connection(srv.getsockname(), timeout=5)
            a, _ = srv.accept()
            a.sendall(b"x")
            c.recv(1)
            print("LOOPBACK-OK")
        except Exception as e:  # noqa: BLE001
            print("LOOPBACK-FAIL", err(e))


main(sys.argv)
