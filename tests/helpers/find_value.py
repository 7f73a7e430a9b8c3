#!/usr/bin/env python3
"""Searches everything readable from inside the jail for one value, for tests/injected_secrets.rs.
The value comes in two halves (FIND_A, FIND_B) so that no environment, argument or file of this
search holds it whole. Prints one `FOUND <where>` line per place that holds it and one
`DENIED <where>` line per process memory it could not read; ends with `searched`."""
import os
import re
import sys

value = (os.environ["FIND_A"] + os.environ["FIND_B"]).encode()
me = os.getpid()


def found(where):
    print("FOUND", where, flush=True)


# Every visible process: its environment, its arguments, and its memory.
for pid in sorted(int(p) for p in os.listdir("/proc") if p.isdigit()):
    if pid == me:
        continue  # this search holds the value it looks for
    for part in ("environ", "cmdline"):
        try:
            with open(f"/proc/{pid}/{part}", "rb") as f:
                if value in f.read():
                    found(f"/proc/{pid}/{part}")
        except OSError:
            pass
    try:
        with open(f"/proc/{pid}/maps") as f:
            maps = f.read().splitlines()
        mem = open(f"/proc/{pid}/mem", "rb", buffering=0)
    except OSError as e:
        print("DENIED", f"/proc/{pid}/mem", e.errno, flush=True)
        continue
    with mem:
        for line in maps:
            m = re.match(r"([0-9a-f]+)-([0-9a-f]+) r", line)
            if not m or "[vvar" in line or "[vsyscall" in line:
                continue
            start, end = int(m.group(1), 16), int(m.group(2), 16)
            try:
                mem.seek(start)
                if value in mem.read(end - start):
                    found(f"/proc/{pid}/mem")
                    break
            except (OSError, OverflowError, ValueError):
                pass

# Every file under the roots given as arguments (the mount view's writable and jail-made places).
for root in sys.argv[1:]:
    for base, dirs, files in os.walk(root, onerror=lambda e: None):
        for name in files:
            path = os.path.join(base, name)
            try:
                if os.path.islink(path) or not os.path.isfile(path):
                    continue
                with open(path, "rb") as f:
                    if value in f.read(64 << 20):
                        found(path)
            except OSError:
                pass
print("searched", flush=True)
