#!/usr/bin/env bash
# check-attack.sh - compile tests/helpers/attack.c and sanity-check every op
# OUTSIDE any sandbox, so that when a sandbox test sees BLOCKED it is the
# sandbox, not a bug in attack.c, doing the blocking.
#
# Usage: tests/helpers/check-attack.sh
#   Run as root it performs three phases:
#     main   - as root, in a fresh temp dir under /tmp
#     ro     - as root, in a private mount namespace (unshare -m) with a
#              read-only bind mount, to see EROFS refusals
#     nobody - as uid/gid 65534 (setpriv --clear-groups), in a dir under
#              /var/tmp owned by 65534
#   Run as any other user it performs only "main".
#   Exit status 0 iff every check passed.
#
# Internal: check-attack.sh --phase main|ro BIN DIR
set -u

SELF=$(readlink -f "$0")
HERE=$(dirname "$SELF")
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3)
ARCH=$(uname -m)

PASS=0
FAIL=0
PIDS=()
WRAP=() # command prefix for check(), e.g. (setsid -w)

# check WANT OP [ARGS...]
#   WANT: ALLOWED | BLOCKED | BLOCKED/<errno> | EITHER | USAGE
# Runs "$BIN OP ARGS..." and checks both the protocol and the outcome.
check() {
	local want=$1 op=$2
	shift
	local rc got out err lines re
	"${WRAP[@]}" "$BIN" "$@" >"$D/.out" 2>"$D/.err"
	rc=$?
	out=$(cat "$D/.out")
	err=$(cat "$D/.err")
	lines=$(wc -l <"$D/.out")
	re="^BLOCKED ${op}: .* \(errno=([0-9]+)\)\$"
	got=BADPROTO
	case $rc in
	0) [[ $lines == 1 && $out == "ALLOWED $op" ]] && got=ALLOWED ;;
	1) [[ $lines == 1 && $out =~ $re ]] && got=BLOCKED/${BASH_REMATCH[1]} ;;
	2) [[ -z $out && -n $err ]] && got=USAGE ;;
	esac
	local ok=0
	case $want in
	EITHER) [[ $got == ALLOWED || $got == BLOCKED/* ]] && ok=1 ;;
	BLOCKED) [[ $got == BLOCKED/* ]] && ok=1 ;;
	*) [[ $got == "$want" ]] && ok=1 ;;
	esac
	local shown=$out
	[[ $got == USAGE ]] && shown="(exit 2) ${err%%$'\n'*}"
	if ((ok)); then
		PASS=$((PASS + 1))
		printf 'PASS  %-16s attack %s\n      => %s\n' "$want" "$*" "$shown"
	else
		FAIL=$((FAIL + 1))
		printf 'FAIL  %-16s attack %s\n      => got %s, exit %d\n      stdout: %s\n      stderr: %s\n' \
			"$want" "$*" "$got" "$rc" "$out" "$err"
	fi
}

# expect-style assertion for things that are not attack runs
assert() {
	local what=$1
	shift
	if "$@"; then
		PASS=$((PASS + 1))
		printf 'PASS  %s\n' "$what"
	else
		FAIL=$((FAIL + 1))
		printf 'FAIL  %s\n' "$what"
	fi
}

sysctl_val() { cat "/proc/sys/$1" 2>/dev/null || echo "$2"; }

kill_started() {
	local p
	for p in "${PIDS[@]}"; do
		kill "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	PIDS=()
}

start_listener() {
	# filesystem socket $1, abstract socket $2, TCP on an ephemeral port -> $D/port
	"$PY" -c '
import os, socket, sys, time
u = socket.socket(socket.AF_UNIX); u.bind(sys.argv[1]); os.chmod(sys.argv[1], 0o777); u.listen(64)
a = socket.socket(socket.AF_UNIX); a.bind("\0" + sys.argv[2]); a.listen(64)
t = socket.socket(); t.bind(("127.0.0.1", 0)); t.listen(64)
print(t.getsockname()[1], flush=True)
time.sleep(600)
' "$1" "$2" >"$D/port" &
	PIDS+=($!)
	local i
	for i in $(seq 100); do
		[ -s "$D/port" ] && break
		sleep 0.05
	done
	PORT=$(cat "$D/port")
	[ -n "$PORT" ] || { echo "listener did not start" >&2; exit 2; }
}

# pid of a process whose argv[0] is exactly $1 (bash builtins only, so the
# search itself never shows up)
find_argv0() {
	local p a0
	for p in /proc/[0-9]*; do
		a0=
		IFS= read -r -d '' a0 <"$p/cmdline" 2>/dev/null
		[[ $a0 == "$1" ]] && { echo "${p#/proc/}"; return 0; }
	done
	return 1
}

# ---------------------------------------------------------------------------
phase_main() {
	local root=0
	[ "$(id -u)" = 0 ] && root=1
	echo "== phase main: uid=$(id -u) gid=$(id -g) dir=$D"

	echo hello >"$D/file"
	: >"$D/empty"
	mkdir "$D/dir" "$D/emptydir"
	echo a >"$D/dir/a"
	echo t >"$D/t1"
	echo t >"$D/t2"
	sleep 300 &
	local SP=$!
	PIDS+=($SP)
	(exit 0) &
	local DEAD=$!
	wait $DEAD

	# usage errors
	check USAGE ""
	check USAGE no-such-op
	check USAGE read
	check USAGE read a b
	check USAGE kill notapid 0
	check USAGE tcp-connect 99999

	# filesystem, all on our own writable files
	check ALLOWED read "$D/file"
	check BLOCKED/0 read "$D/empty"
	check BLOCKED/2 read "$D/missing"
	check BLOCKED/21 read "$D/dir"
	check ALLOWED ls "$D/dir"
	check BLOCKED/0 ls "$D/emptydir"
	check BLOCKED/2 ls "$D/missing"
	check BLOCKED/20 ls "$D/file"
	check ALLOWED write "$D/file"
	check BLOCKED/2 write "$D/missing"
	check ALLOWED append "$D/file"
	check ALLOWED open-trunc "$D/t1"
	assert "open-trunc emptied t1" test ! -s "$D/t1"
	check ALLOWED truncate "$D/t2"
	assert "truncate emptied t2" test ! -s "$D/t2"
	check BLOCKED/2 truncate "$D/missing"
	check ALLOWED create "$D/new"
	check BLOCKED/17 create "$D/new"
	check ALLOWED rename "$D/new" "$D/new2"
	check BLOCKED/2 rename "$D/missing" "$D/x"
	check ALLOWED link "$D/new2" "$D/hard"
	check ALLOWED symlink target "$D/sym"
	check BLOCKED/17 symlink target "$D/sym"
	check ALLOWED unlink "$D/hard"
	check BLOCKED/2 unlink "$D/hard"
	check ALLOWED mkdir "$D/newdir"
	check BLOCKED/17 mkdir "$D/newdir"
	check ALLOWED rmdir "$D/newdir"
	check BLOCKED/39 rmdir "$D/dir"
	check ALLOWED mkfifo "$D/fifo"
	assert "mkfifo made a fifo" test -p "$D/fifo"
	check ALLOWED chmod "$D/file"
	check BLOCKED/2 chmod "$D/missing"
	check ALLOWED chown "$D/file"
	check ALLOWED utimes "$D/file"
	check ALLOWED setxattr "$D/file"
	check ALLOWED setflags "$D/file"
	check ALLOWED fssetxattr "$D/file"
	check ALLOWED file-setattr "$D/file"
	check USAGE setflags "$D/missing"
	check ALLOWED proc-fd-write "$D/file"
	check USAGE proc-fd-write "$D/missing"
	check ALLOWED proc-root-write "$D/file"
	check USAGE proc-root-write relative/path
	check ALLOWED proc-pid-root-write "$SP" "$D/file"
	check BLOCKED/13 mmap-write "$D/file"
	check USAGE mmap-write "$D/missing"
	check ALLOWED copy-range "$D/file" "$D/empty"
	assert "copy-range copied a byte" test -s "$D/empty"
	check BLOCKED/2 copy-range "$D/file" "$D/missing"
	check USAGE copy-range "$D/missing" "$D/file"
	: >"$D/empty2"
	check USAGE copy-range "$D/empty2" "$D/file"

	# mounts (root's positive cases run in phase ro, in a private mount ns)
	if ((root)); then
		check BLOCKED/22 remount "$D/dir" # not a mount point
	else
		check BLOCKED/1 remount "$D/dir"
		check BLOCKED/1 bind-over "$D/dir" "$D/emptydir"
	fi
	mkdir "$D/uns"
	check ALLOWED userns-write "$D/uns"
	assert "userns-write created its file" test -e "$D/uns/.jail-attack-userns"
	check BLOCKED/2 userns-write "$D/missing"

	# processes: our own sleep child
	check ALLOWED ptrace "$SP"
	sleep 0.1
	assert "ptrace target was detached (not stopped)" \
		bash -c "! grep -q '^State:.*[tT]' /proc/$SP/status"
	check ALLOWED vm-write "$SP"
	check ALLOWED proc-mem "$SP"
	check ALLOWED kill "$SP" 0
	check BLOCKED/3 kill "$DEAD" 0
	check BLOCKED/3 ptrace "$DEAD"
	check BLOCKED/3 vm-write "$DEAD"
	if ((!root)); then
		# someone else's process (pid 1, root)
		check BLOCKED/1 ptrace 1
		check BLOCKED/1 vm-write 1
		check BLOCKED/13 proc-mem 1
		check BLOCKED/1 kill 1 0
		check BLOCKED/13 proc-pid-root-write 1 /etc/hostname
	fi

	# terminals: /dev/null is not a tty, so ENOTTY = reached the driver = ALLOWED
	exec 3</dev/null
	check ALLOWED tiocsti 3
	check ALLOWED tioclinux 3
	exec 3<&-
	check USAGE tiocsti 97
	if command -v setsid >/dev/null; then
		# no controlling tty => "tty" cannot be opened => setup failure
		WRAP=(setsid -w)
		check USAGE tiocsti tty
		WRAP=()
	fi
	check BLOCKED/6 setsid-tiocsti
	if command -v script >/dev/null; then
		# inside a pty that is our controlling terminal TIOCSTI works (or EIO
		# if dev.tty.legacy_tiocsti=0: still "reached the driver")
		local o
		o=$(script -qec "$BIN tiocsti 0; echo rc=\$?" /dev/null </dev/null 2>&1 | tr -d '\r')
		assert "tiocsti 0 inside a pty => ALLOWED ($(echo $o))" \
			grep -q 'ALLOWED tiocsti' <<<"$o"
	fi

	# exotic syscalls
	if ((root)); then
		[ "$(sysctl_val kernel/io_uring_disabled 0)" = 2 ] &&
			check BLOCKED io-uring || check ALLOWED io-uring
		check ALLOWED bpf
		check ALLOWED perf
		check ALLOWED open-by-handle "$D/file"
		check ALLOWED core-pattern
	else
		[ "$(sysctl_val kernel/io_uring_disabled 0)" = 0 ] &&
			check ALLOWED io-uring || check BLOCKED io-uring
		[ "$(sysctl_val kernel/unprivileged_bpf_disabled 0)" = 0 ] &&
			check ALLOWED bpf || check BLOCKED/1 bpf
		[ "$(sysctl_val kernel/perf_event_paranoid 2)" -le 2 ] &&
			check ALLOWED perf || check BLOCKED perf
		check BLOCKED/1 open-by-handle "$D/file"
		check BLOCKED/13 core-pattern
	fi
	check BLOCKED/2 open-by-handle "$D/missing"
	check ALLOWED keyctl
	check ALLOWED unshare-user
	check ALLOWED clone-newuser
	check ALLOWED clone3
	if [ "$ARCH" = x86_64 ]; then
		if zgrep -q '^CONFIG_IA32_EMULATION=y' /proc/config.gz 2>/dev/null &&
			! grep -q 'ia32_emulation=0\|ia32_emulation=false' /proc/cmdline; then
			check ALLOWED i386-traceme
		else
			check EITHER i386-traceme
		fi
		check EITHER x32-getpid
	else
		check USAGE i386-traceme
		check USAGE x32-getpid
	fi

	# sockets
	local abs="jail-check-attack-$$-$RANDOM"
	start_listener "$D/sock" "$abs"
	check ALLOWED unix-socket
	check ALLOWED socketpair
	check ALLOWED unix-connect "$D/sock"
	check BLOCKED/2 unix-connect "$D/missing.sock"
	check BLOCKED/111 unix-connect "$D/file"
	check ALLOWED abstract-connect "$abs"
	check BLOCKED/111 abstract-connect "$abs-missing"
	check ALLOWED tcp-connect "$PORT"
	check BLOCKED/111 tcp-connect 1

	# daemon: must leave a process whose argv[0] is the marker
	local marker="jail-attack-daemon-$$-$RANDOM" dp
	check ALLOWED daemon "$marker"
	if dp=$(find_argv0 "$marker"); then
		assert "daemon $marker running as pid $dp (ppid $(awk '/^PPid/{print $2}' /proc/$dp/status))" true
		assert "daemon is in its own session" \
			test "$(awk '{print $6}' /proc/$dp/stat)" != "$(awk '{print $6}' /proc/$$/stat)"
		kill "$dp"
		local i st=
		for i in $(seq 50); do # gone, or a zombie waiting for init to reap it
			st=$(awk '{print $3}' "/proc/$dp/stat" 2>/dev/null)
			[[ -z $st || $st == Z ]] && break
			sleep 0.1
		done
		assert "daemon killed" test -z "$st" -o "$st" = Z
	else
		assert "daemon $marker running" false
	fi

	kill_started
}

# ---------------------------------------------------------------------------
# root in a private mount namespace: a read-only bind mount must yield EROFS
phase_ro() {
	echo "== phase ro: uid=$(id -u) dir=$D (private mount namespace)"
	mkdir -p "$D/ro/sub" "$D/ro/sub2" "$D/rw"
	echo hi >"$D/ro/file"
	echo x >"$D/ro/sub/x"
	echo rw >"$D/rw/file"
	mount --bind "$D/ro" "$D/ro" && mount -o remount,bind,ro "$D/ro" ||
		{ echo "cannot set up read-only bind mount" >&2; exit 2; }
	sleep 300 &
	local SP=$!
	PIDS+=($SP)

	check ALLOWED read "$D/ro/file"
	check ALLOWED ls "$D/ro"
	check BLOCKED/30 write "$D/ro/file"
	check BLOCKED/30 append "$D/ro/file"
	check BLOCKED/30 open-trunc "$D/ro/file"
	check BLOCKED/30 truncate "$D/ro/file"
	check BLOCKED/30 create "$D/ro/new"
	check BLOCKED/30 rename "$D/ro/file" "$D/ro/file2"
	check BLOCKED/30 unlink "$D/ro/file"
	check BLOCKED/30 rmdir "$D/ro/sub2"
	check BLOCKED/30 mkdir "$D/ro/newdir"
	check BLOCKED/30 mkfifo "$D/ro/fifo"
	check BLOCKED/30 symlink target "$D/ro/sym"
	check BLOCKED/30 link "$D/ro/file" "$D/ro/hard"
	check BLOCKED/30 chmod "$D/ro/file"
	check BLOCKED/30 chown "$D/ro/file"
	check BLOCKED/30 utimes "$D/ro/file"
	check BLOCKED/30 setxattr "$D/ro/file"
	check BLOCKED/30 setflags "$D/ro/file"
	check BLOCKED/30 fssetxattr "$D/ro/file"
	check BLOCKED/30 file-setattr "$D/ro/file"
	check BLOCKED/30 proc-fd-write "$D/ro/file"
	check BLOCKED/30 proc-root-write "$D/ro/file"
	check BLOCKED/30 proc-pid-root-write "$SP" "$D/ro/file"
	check BLOCKED/13 mmap-write "$D/ro/file"
	check BLOCKED/30 copy-range "$D/rw/file" "$D/ro/file"
	check ALLOWED copy-range "$D/ro/file" "$D/rw/file"
	check BLOCKED/30 userns-write "$D/ro"
	assert "userns-write left no file" test ! -e "$D/ro/.jail-attack-userns"
	check ALLOWED bind-over "$D/rw" "$D/ro/sub"
	assert "bind-over is visible" test -e "$D/ro/sub/file"
	umount "$D/ro/sub"
	check ALLOWED remount "$D/ro"
	check ALLOWED write "$D/ro/file"

	kill_started
}

# ---------------------------------------------------------------------------
if [ "${1:-}" = --phase ]; then
	BIN=$3
	D=$4
	trap kill_started EXIT
	case $2 in
	main) phase_main ;;
	ro) phase_ro ;;
	*) echo "bad phase $2" >&2; exit 2 ;;
	esac
	echo "-- phase $2: $PASS passed, $FAIL failed"
	[ -n "${COUNTS:-}" ] && echo "$PASS $FAIL" >>"$COUNTS"
	exit $((FAIL > 0))
fi

CC=${CC:-cc}
W=$(mktemp -d /tmp/check-attack.XXXXXX)
NW=
cleanup() {
	rm -rf "$W"
	[ -n "$NW" ] && rm -rf "$NW"
}
trap cleanup EXIT

echo "== compile: $CC -O1 -Wall -o attack attack.c"
"$CC" -O1 -Wall -Werror -o "$W/attack" "$HERE/attack.c" || exit 2
if command -v gcc >/dev/null; then
	echo "== compile: gcc -Wall -Wextra -Werror (warnings are errors)"
	gcc -O2 -Wall -Wextra -Werror -fsyntax-only "$HERE/attack.c" || exit 2
fi

rc=0
export COUNTS=$W/counts
: >"$COUNTS"
chmod 666 "$COUNTS"
chmod 711 "$W"
mkdir "$W/main"
"$SELF" --phase main "$W/attack" "$W/main" || rc=1

if [ "$(id -u)" = 0 ]; then
	mkdir "$W/ro"
	unshare -m --propagation private "$SELF" --phase ro "$W/attack" "$W/ro" || rc=1

	if command -v setpriv >/dev/null; then
		NW=$(mktemp -d /var/tmp/check-attack-nobody.XXXXXX)
		cp "$W/attack" "$NW/attack"
		mkdir "$NW/main"
		chown -R 65534:65534 "$NW"
		chmod 755 "$NW"
		setpriv --reuid=65534 --regid=65534 --clear-groups \
			"$SELF" --phase main "$NW/attack" "$NW/main" || rc=1
	fi
fi

read -r p f < <(awk '{p += $1; f += $2} END {print p + 0, f + 0}' "$COUNTS")
# a phase that died without reporting counts as a failure
[ $rc != 0 ] && [ "$f" = 0 ] && f=1
echo "check-attack: $p passed, $f failed"
exit $rc
