#!/usr/bin/env python3
"""Writes jail-seccomp.json: an engine's default seccomp profile plus the one rule jail needs.

Usage: make-seccomp-profile.py DEFAULT.json > jail-seccomp.json

DEFAULT.json is the default profile of your engine's version (moby's profiles/seccomp/default.json).
The added rule opens, to the container, exactly the calls jail makes to build its namespaces and
its read-only mount view; jail's own filter refuses every one of them again to the command.
"""
import json
import sys

JAIL_CALLS = [
    "clone",  # the user, mount, pid and IPC (and network) namespaces, in one clone
    "unshare",  # probe, and --net none's loopback-only network
    "mount",
    "umount2",
    "mount_setattr",  # read-only and nosuid, recursively, on the view
    "open_tree",
    "move_mount",
    "fsopen",  # the private /tmp and the copy-on-write overlay
    "fsconfig",
    "fsmount",
]


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    with open(sys.argv[1], encoding="utf-8") as f:
        profile = json.load(f)
    profile["syscalls"] = [r for r in profile["syscalls"] if r.get("comment", "").split(":")[0] != "jail"]
    profile["syscalls"].append(
        {
            "names": JAIL_CALLS,
            "action": "SCMP_ACT_ALLOW",
            "comment": "jail: its namespaces and read-only mount view (its own filter refuses these to the command)",
        }
    )
    json.dump(profile, sys.stdout, indent="\t")
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
