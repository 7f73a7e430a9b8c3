/*
 * attack.c - one-shot sandbox escape attempts for jail's integration tests.
 *
 * Build: cc -O1 -Wall -o attack attack.c
 * Usage: attack <op> [args...]
 *
 * Every op performs ONE attack and reports it with a strict protocol:
 *   exit 0, stdout "ALLOWED <op>"                              the attack worked
 *   exit 1, stdout "BLOCKED <op>: <strerror> (errno=<N>)"       the kernel refused
 *   exit 2, message on stderr                                  usage error, or a
 *                                                              setup step (not the
 *                                                              attack itself) failed
 * Ops whose attack is several syscalls say which step failed inside the
 * BLOCKED text: "BLOCKED <op>: <step>: <strerror> (errno=<N>)".
 * Details that are not part of the protocol (which step ran, errnos that
 * still count as ALLOWED) go to stderr.
 *
 * Only raw syscalls, glibc wrappers and <linux/...> headers; builds on x86_64
 * and aarch64 (x86-only ops are behind #ifdef __x86_64__).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>
#include <linux/bpf.h>
#include <linux/fs.h>
#include <linux/io_uring.h>
#include <linux/keyctl.h>
#include <linux/perf_event.h>
#include <linux/sched.h>

/* Syscall numbers >= 424 are the same on every architecture. */
#ifndef __NR_io_uring_setup
#define __NR_io_uring_setup 425
#endif
#ifndef __NR_clone3
#define __NR_clone3 435
#endif
#ifndef CLONE_ARGS_SIZE_VER0
#define CLONE_ARGS_SIZE_VER0 64
#endif
#ifndef __NR_pidfd_open
#define __NR_pidfd_open 434
#endif
#ifndef __NR_pidfd_getfd
#define __NR_pidfd_getfd 438
#endif
#ifndef __NR_file_getattr
#define __NR_file_getattr 468
#define __NR_file_setattr 469
#endif
#ifndef TIOCL_GETSHIFTSTATE
#define TIOCL_GETSHIFTSTATE 6
#endif

static const char *op = "?";

/* ------------------------------------------------------------------ */
/* reporting                                                          */
/* ------------------------------------------------------------------ */

static void __attribute__((noreturn)) allowed(void)
{
	printf("ALLOWED %s\n", op);
	fflush(stdout);
	exit(0);
}

/* BLOCKED with errno err; step (may be NULL) names the failing syscall. */
static void __attribute__((noreturn)) blocked_step(const char *step, int err)
{
	if (step)
		printf("BLOCKED %s: %s: %s (errno=%d)\n", op, step, strerror(err), err);
	else
		printf("BLOCKED %s: %s (errno=%d)\n", op, strerror(err), err);
	fflush(stdout);
	exit(1);
}

static void __attribute__((noreturn)) blocked(int err)
{
	blocked_step(NULL, err);
}

/* BLOCKED without an errno, e.g. "empty". */
static void __attribute__((noreturn)) blocked_text(const char *text)
{
	printf("BLOCKED %s: %s (errno=0)\n", op, text);
	fflush(stdout);
	exit(1);
}

static void __attribute__((noreturn, format(printf, 1, 2))) setup_fail(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fprintf(stderr, "attack %s: ", op);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(2);
}

static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void note(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "attack %s: ", op);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* ------------------------------------------------------------------ */
/* fatal-signal reporting: never die silently                         */
/* ------------------------------------------------------------------ */

static char sigsys_msg[256];
static char fault_msg[256];
static char i386_fault_msg[256];
static volatile sig_atomic_t in_int80;

static void put(int fd, const char *s)
{
	ssize_t r = write(fd, s, strlen(s));
	(void)r;
}

/* SIGSYS comes from a seccomp RET_TRAP filter: the kernel refused the call. */
static void on_sigsys(int sig)
{
	(void)sig;
	put(1, sigsys_msg);
	_exit(1);
}

static void on_fault(int sig)
{
	(void)sig;
	if (in_int80) {
		/* no int $0x80 gate (IA32 emulation off): a refusal, not a bug */
		put(1, i386_fault_msg);
		_exit(1);
	}
	put(2, fault_msg);
	_exit(2);
}

static void install_handlers(void)
{
	struct sigaction sa;

	snprintf(sigsys_msg, sizeof sigsys_msg,
		 "BLOCKED %s: SIGSYS (seccomp trap) (errno=0)\n", op);
	snprintf(fault_msg, sizeof fault_msg,
		 "attack %s: crashed with SIGSEGV/SIGBUS\n", op);
	snprintf(i386_fault_msg, sizeof i386_fault_msg,
		 "BLOCKED %s: int $0x80 faulted (SIGSEGV) (errno=0)\n", op);
	memset(&sa, 0, sizeof sa);
	sigemptyset(&sa.sa_mask);
	sa.sa_handler = on_sigsys;
	sigaction(SIGSYS, &sa, NULL);
	sa.sa_handler = on_fault;
	sigaction(SIGSEGV, &sa, NULL);
	sigaction(SIGBUS, &sa, NULL);
}

/* ------------------------------------------------------------------ */
/* argument parsing                                                   */
/* ------------------------------------------------------------------ */

static long parse_long(const char *s, const char *what)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end)
		setup_fail("bad %s '%s'", what, s);
	return v;
}

static pid_t parse_pid(const char *s)
{
	long v = parse_long(s, "pid");

	if (v <= 0 || v > INT_MAX)
		setup_fail("bad pid '%s'", s);
	return (pid_t)v;
}

/* A file descriptor number (must be open) or "tty" = open /dev/tty O_RDWR. */
static int parse_fd(const char *s)
{
	long v;
	int fd;

	if (strcmp(s, "tty") == 0) {
		fd = open("/dev/tty", O_RDWR | O_NOCTTY);
		if (fd < 0)
			setup_fail("open /dev/tty: %s (errno=%d)", strerror(errno), errno);
		return fd;
	}
	v = parse_long(s, "fd");
	if (v < 0 || v > INT_MAX)
		setup_fail("bad fd '%s'", s);
	if (fcntl((int)v, F_GETFD) < 0)
		setup_fail("fd %ld is not open: %s", v, strerror(errno));
	return (int)v;
}

/* Write one byte to an fd we already hold. */
static void write_one(int fd)
{
	ssize_t n = write(fd, "x", 1);

	if (n < 0) {
		int e = errno;
		note("open succeeded, write failed");
		blocked(e);
	}
	if (n != 1)
		blocked_text("short write");
}

/* ------------------------------------------------------------------ */
/* filesystem ops                                                     */
/* ------------------------------------------------------------------ */

/* read: read at least one byte of PATH. */
static void op_read(char **a)
{
	char buf[64];
	ssize_t n;
	int fd = open(a[0], O_RDONLY);

	if (fd < 0)
		blocked(errno);
	n = read(fd, buf, sizeof buf);
	if (n < 0)
		blocked(errno);
	if (n == 0)
		blocked_text("empty");
	allowed();
}

/* ls: list DIR and see at least one real entry. */
static void op_ls(char **a)
{
	struct dirent *de;
	DIR *d = opendir(a[0]);

	if (!d)
		blocked(errno);
	for (;;) {
		errno = 0;
		de = readdir(d);
		if (!de)
			break;
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			allowed();
	}
	if (errno)
		blocked(errno);
	blocked_text("empty");
}

/* write: overwrite the first byte of an existing file. */
static void op_write(char **a)
{
	int fd = open(a[0], O_WRONLY);

	if (fd < 0)
		blocked(errno);
	write_one(fd);
	allowed();
}

/* append: append a byte to an existing file. */
static void op_append(char **a)
{
	int fd = open(a[0], O_WRONLY | O_APPEND);

	if (fd < 0)
		blocked(errno);
	write_one(fd);
	allowed();
}

/* open-trunc: truncate an existing file through open(O_TRUNC). */
static void op_open_trunc(char **a)
{
	if (open(a[0], O_WRONLY | O_TRUNC) < 0)
		blocked(errno);
	allowed();
}

/* truncate: truncate(2) a file to 0 bytes by path. */
static void op_truncate(char **a)
{
	if (truncate(a[0], 0) < 0)
		blocked(errno);
	allowed();
}

/* create: create a new file and write to it. */
static void op_create(char **a)
{
	int fd = open(a[0], O_CREAT | O_EXCL | O_WRONLY, 0644);

	if (fd < 0)
		blocked(errno);
	write_one(fd);
	allowed();
}

/* rename: move FROM to TO. */
static void op_rename(char **a)
{
	if (rename(a[0], a[1]) < 0)
		blocked(errno);
	allowed();
}

/* unlink: delete a file. */
static void op_unlink(char **a)
{
	if (unlink(a[0]) < 0)
		blocked(errno);
	allowed();
}

/* rmdir: delete an (empty) directory. */
static void op_rmdir(char **a)
{
	if (rmdir(a[0]) < 0)
		blocked(errno);
	allowed();
}

/* mkdir: create a directory. */
static void op_mkdir(char **a)
{
	if (mkdir(a[0], 0755) < 0)
		blocked(errno);
	allowed();
}

/* mkfifo: create a named pipe with mknod(S_IFIFO). */
static void op_mkfifo(char **a)
{
	if (mknod(a[0], S_IFIFO | 0644, 0) < 0)
		blocked(errno);
	allowed();
}

/* symlink: create LINKPATH -> TARGET. */
static void op_symlink(char **a)
{
	if (symlink(a[0], a[1]) < 0)
		blocked(errno);
	allowed();
}

/* link: hard-link FROM as TO. */
static void op_link(char **a)
{
	if (link(a[0], a[1]) < 0)
		blocked(errno);
	allowed();
}

/* chmod: make PATH mode 0777. */
static void op_chmod(char **a)
{
	if (chmod(a[0], 0777) < 0)
		blocked(errno);
	allowed();
}

/* chown: chown PATH to ourselves (a no-op change still needs a writable mount). */
static void op_chown(char **a)
{
	if (chown(a[0], getuid(), getgid()) < 0)
		blocked(errno);
	allowed();
}

/* utimes: set PATH's timestamps to now. */
static void op_utimes(char **a)
{
	if (utimensat(AT_FDCWD, a[0], NULL, 0) < 0)
		blocked(errno);
	allowed();
}

/* setxattr: set user.jail=1 on PATH. */
static void op_setxattr(char **a)
{
	if (setxattr(a[0], "user.jail", "1", 1, 0) < 0)
		blocked(errno);
	allowed();
}

/* Inode flags and attributes, changed through a descriptor opened read-only: each op flips the
 * nodump flag (no capability needed, only ownership) and, when that worked, flips it back, so
 * the file is as it was for the next run. */
static int open_for_flags(const char *path)
{
	int fd = open(path, O_RDONLY | O_NONBLOCK);

	if (fd < 0)
		setup_fail("open %s: %s (errno=%d)", path, strerror(errno), errno);
	return fd;
}

/* setflags: ioctl(FS_IOC_SETFLAGS), what chattr calls. */
static void op_setflags(char **a)
{
	int fd = open_for_flags(a[0]);
	long flags;

	if (ioctl(fd, FS_IOC_GETFLAGS, &flags) < 0)
		setup_fail("FS_IOC_GETFLAGS: %s (errno=%d)", strerror(errno), errno);
	flags ^= FS_NODUMP_FL;
	if (ioctl(fd, FS_IOC_SETFLAGS, &flags) < 0)
		blocked(errno);
	flags ^= FS_NODUMP_FL;
	ioctl(fd, FS_IOC_SETFLAGS, &flags);
	allowed();
}

/* fssetxattr: ioctl(FS_IOC_FSSETXATTR), what xfs_io chattr calls. */
static void op_fssetxattr(char **a)
{
	int fd = open_for_flags(a[0]);
	struct fsxattr x;

	if (ioctl(fd, FS_IOC_FSGETXATTR, &x) < 0)
		setup_fail("FS_IOC_FSGETXATTR: %s (errno=%d)", strerror(errno), errno);
	x.fsx_xflags ^= FS_XFLAG_NODUMP;
	if (ioctl(fd, FS_IOC_FSSETXATTR, &x) < 0)
		blocked(errno);
	x.fsx_xflags ^= FS_XFLAG_NODUMP;
	ioctl(fd, FS_IOC_FSSETXATTR, &x);
	allowed();
}

/* file-setattr: file_setattr(2) (Linux 6.17), the same attributes by path. */
static void op_file_setattr(char **a)
{
	struct fsxattr x;

	memset(&x, 0, sizeof x);
	if (syscall(__NR_file_getattr, AT_FDCWD, a[0], &x, sizeof x, 0) < 0)
		setup_fail("file_getattr: %s (errno=%d)", strerror(errno), errno);
	x.fsx_xflags ^= FS_XFLAG_NODUMP;
	if (syscall(__NR_file_setattr, AT_FDCWD, a[0], &x, sizeof x, 0) < 0)
		blocked(errno);
	x.fsx_xflags ^= FS_XFLAG_NODUMP;
	syscall(__NR_file_setattr, AT_FDCWD, a[0], &x, sizeof x, 0);
	allowed();
}

/* proc-fd-write: upgrade a read-only fd to a writable one via /proc/self/fd/N. */
static void op_proc_fd_write(char **a)
{
	char p[64];
	int fd, wfd;

	fd = open(a[0], O_RDONLY);
	if (fd < 0)
		setup_fail("open %s O_RDONLY: %s (errno=%d)", a[0], strerror(errno), errno);
	snprintf(p, sizeof p, "/proc/self/fd/%d", fd);
	wfd = open(p, O_WRONLY);
	if (wfd < 0)
		blocked(errno);
	write_one(wfd);
	allowed();
}

/* Open PREFIX+PATH for writing and write a byte. */
static void write_via(const char *prefix, const char *path)
{
	char p[PATH_MAX];
	int fd;

	if (path[0] != '/')
		setup_fail("PATH must be absolute: %s", path);
	if ((size_t)snprintf(p, sizeof p, "%s%s", prefix, path) >= sizeof p)
		setup_fail("path too long");
	fd = open(p, O_WRONLY);
	if (fd < 0)
		blocked(errno);
	write_one(fd);
	allowed();
}

/* proc-root-write: write PATH through the /proc/self/root magic link. */
static void op_proc_root_write(char **a)
{
	write_via("/proc/self/root", a[0]);
}

/* proc-pid-root-write: write PATH through another process's /proc/PID/root. */
static void op_proc_pid_root_write(char **a)
{
	char prefix[64];

	snprintf(prefix, sizeof prefix, "/proc/%d/root", (int)parse_pid(a[0]));
	write_via(prefix, a[1]);
}

/* mmap-write: open read-write and write through a shared writable mapping. */
static void op_mmap_write(char **a)
{
	struct stat st;
	char *m;
	int fd;

	fd = open(a[0], O_RDWR);
	if (fd < 0)
		blocked_step("open O_RDWR", errno);
	if (fstat(fd, &st) < 0)
		setup_fail("fstat: %s", strerror(errno));
	m = mmap(NULL, 1, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED)
		blocked(errno);
	if (st.st_size > 0) {	/* touching a page past EOF would SIGBUS */
		volatile char *v = m;

		v[0] = v[0];
		if (msync(m, 1, MS_SYNC) < 0)
			note("mmap succeeded, msync failed: %s", strerror(errno));
	}
	allowed();
}

/* copy-range: copy 1 byte from SRC into DST with copy_file_range(2). */
static void op_copy_range(char **a)
{
	loff_t in_off = 0, out_off = 0;
	int in, out;
	long n;

	in = open(a[0], O_RDONLY);
	if (in < 0)
		setup_fail("open %s O_RDONLY: %s (errno=%d)", a[0], strerror(errno), errno);
	out = open(a[1], O_WRONLY);
	if (out < 0)
		blocked_step("open DST", errno);
	n = syscall(__NR_copy_file_range, (long)in, &in_off, (long)out, &out_off,
		    (size_t)1, 0UL);
	if (n < 0)
		blocked_step("copy_file_range", errno);
	if (n == 0)
		setup_fail("copy_file_range copied 0 bytes: SRC is empty");
	allowed();
}

/* ------------------------------------------------------------------ */
/* mount ops                                                          */
/* ------------------------------------------------------------------ */

/* remount: drop read-only from a bind mount with MS_REMOUNT|MS_BIND. */
static void op_remount(char **a)
{
	if (mount(NULL, a[0], NULL, MS_REMOUNT | MS_BIND, NULL) < 0)
		blocked(errno);
	allowed();
}

/* bind-over: bind-mount SRC over DST. */
static void op_bind_over(char **a)
{
	if (mount(a[0], a[1], NULL, MS_BIND, NULL) < 0)
		blocked(errno);
	allowed();
}

static int write_file(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY);
	ssize_t n;
	int e;

	if (fd < 0)
		return -1;
	n = write(fd, s, strlen(s));
	e = errno;
	close(fd);
	errno = e;
	return n == (ssize_t)strlen(s) ? 0 : -1;
}

static void step(const char *what, int rc)
{
	if (rc == 0)
		note("%s: ok", what);
	else
		note("%s: failed: %s (errno=%d)", what, strerror(errno), errno);
}

/* userns-write: become root in a new user+mount ns, make DIR writable, create a file. */
static void op_userns_write(char **a)
{
	const char *dir = a[0];
	char map[64], file[PATH_MAX];
	uid_t uid = getuid();
	gid_t gid = getgid();
	int fd;

	if ((size_t)snprintf(file, sizeof file, "%s/.jail-attack-userns", dir) >= sizeof file)
		setup_fail("path too long");
	if (unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0)
		blocked_step("unshare", errno);
	note("unshare(CLONE_NEWUSER|CLONE_NEWNS): ok");
	step("write /proc/self/setgroups deny", write_file("/proc/self/setgroups", "deny"));
	snprintf(map, sizeof map, "0 %u 1", (unsigned)uid);
	step("write uid_map", write_file("/proc/self/uid_map", map));
	snprintf(map, sizeof map, "0 %u 1", (unsigned)gid);
	step("write gid_map", write_file("/proc/self/gid_map", map));
	/* keep our mount games out of the parent namespace */
	step("make / rprivate", mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL));
	step("remount DIR bind,rw", mount(NULL, dir, NULL, MS_REMOUNT | MS_BIND, NULL));
	step("remount DIR rw", mount(NULL, dir, NULL, MS_REMOUNT, NULL));
	if (mount(dir, dir, NULL, MS_BIND, NULL) == 0) {
		note("bind DIR onto itself: ok");
		step("remount self-bind rw",
		     mount(NULL, dir, NULL, MS_REMOUNT | MS_BIND, NULL));
	} else {
		step("bind DIR onto itself", -1);
	}
	fd = open(file, O_CREAT | O_WRONLY, 0644);
	if (fd < 0)
		blocked_step("create DIR/.jail-attack-userns", errno);
	note("created %s", file);
	close(fd);
	allowed();
}

/* ------------------------------------------------------------------ */
/* process ops                                                        */
/* ------------------------------------------------------------------ */

/* ptrace: attach to PID (then detach). */
static void op_ptrace(char **a)
{
	pid_t pid = parse_pid(a[0]);
	int st;

	if (ptrace(PTRACE_ATTACH, pid, NULL, NULL) < 0)
		blocked(errno);
	if (waitpid(pid, &st, __WALL) < 0)
		note("waitpid after attach: %s", strerror(errno));
	if (ptrace(PTRACE_DETACH, pid, NULL, NULL) < 0)
		note("detach: %s", strerror(errno));
	allowed();
}

/* vm-write: process_vm_writev into PID; EFAULT means the permission check passed. */
static void op_vm_write(char **a)
{
	pid_t pid = parse_pid(a[0]);
	char c = 0;
	struct iovec l = { &c, 1 };
	struct iovec r = { (void *)0x1000, 1 };

	if (process_vm_writev(pid, &l, 1, &r, 1, 0) >= 0)
		allowed();
	if (errno == EFAULT) {
		note("process_vm_writev: EFAULT (access check passed, address unmapped)");
		allowed();
	}
	blocked(errno);
}

/* proc-mem: open /proc/PID/mem read-write. */
static void op_proc_mem(char **a)
{
	char p[64];

	snprintf(p, sizeof p, "/proc/%d/mem", (int)parse_pid(a[0]));
	if (open(p, O_RDWR) < 0)
		blocked(errno);
	allowed();
}

/* pidfd-getfd: take descriptor FD of process PID (pidfd_getfd) and write a byte to it. */
static void op_pidfd_getfd(char **a)
{
	pid_t pid = parse_pid(a[0]);
	long target = parse_long(a[1], "fd");
	long pidfd = syscall(__NR_pidfd_open, pid, 0);
	long fd;

	if (pidfd < 0)
		blocked_step("pidfd_open", errno);
	fd = syscall(__NR_pidfd_getfd, (int)pidfd, (int)target, 0);
	if (fd < 0)
		blocked_step("pidfd_getfd", errno);
	write_one((int)fd);
	allowed();
}

/* kill: send signal SIG to PID. */
static void op_kill(char **a)
{
	/* 0 and negative pids are allowed here: kill(0) signals the caller's process group. */
	pid_t pid = (pid_t)parse_long(a[0], "pid");
	long sig = parse_long(a[1], "signal");

	if (sig < 0 || sig > 64)
		setup_fail("bad signal '%s'", a[1]);
	if (kill(pid, (int)sig) < 0)
		blocked(errno);
	allowed();
}

/* Anything but EPERM/EACCES means the ioctl got past any filter to the driver. */
static void ioctl_verdict(int rc, int err)
{
	if (rc >= 0)
		allowed();
	if (err == EPERM || err == EACCES)
		blocked(err);
	note("ioctl reached the driver: %s (errno=%d)", strerror(err), err);
	allowed();
}

/* tiocsti: push a space into a terminal's input queue. */
static void op_tiocsti(char **a)
{
	int fd = parse_fd(a[0]);
	char c = ' ';
	int rc = ioctl(fd, TIOCSTI, &c);

	ioctl_verdict(rc, errno);
}

/* ioctl-raw: ioctl(FD, REQ) with a 64-bit request given in hex (high bits reach the filter). */
static void op_ioctl_raw(char **a)
{
	int fd = parse_fd(a[0]);
	unsigned long req = strtoul(a[1], NULL, 16);
	char buf[64] = { 0 };
	long rc = syscall(SYS_ioctl, fd, req, buf);

	ioctl_verdict((int)rc, errno);
}

/* socket-family: socket(N, SOCK_STREAM, 0) for a numeric address family (e.g. 40 = vsock). */
static void op_socket_family(char **a)
{
	int fd = socket(atoi(a[0]), SOCK_STREAM, 0);

	if (fd < 0)
		blocked(errno);
	allowed();
}

/* tioclinux: TIOCLINUX subcode 6 (TIOCL_GETSHIFTSTATE, harmless). */
static void op_tioclinux(char **a)
{
	int fd = parse_fd(a[0]);
	char sub[4] = { TIOCL_GETSHIFTSTATE, 0, 0, 0 };
	int rc = ioctl(fd, TIOCLINUX, sub);

	ioctl_verdict(rc, errno);
}

/* daemon: double-fork + setsid and leave "/bin/sleep 120" running as MARKER. */
static void op_daemon(char **a)
{
	int p[2], st, err = 0;
	pid_t c;
	ssize_t n;

	/* CLOEXEC pipe: EOF means the grandchild exec'd; data is its exec errno */
	if (pipe2(p, O_CLOEXEC) < 0)
		setup_fail("pipe2: %s", strerror(errno));
	fflush(stdout);
	c = fork();
	if (c < 0)
		blocked_step("fork", errno);
	if (c == 0) {
		pid_t g;

		close(p[0]);
		if (setsid() < 0)
			_exit(errno);
		g = fork();
		if (g < 0)
			_exit(errno);
		if (g == 0) {
			char *argv[] = { a[0], "120", NULL };
			int fd = open("/dev/null", O_RDWR);
			int e;

			close(0);
			close(1);
			close(2);
			if (fd >= 0) {
				dup2(fd, 0);
				dup2(fd, 1);
				dup2(fd, 2);
				if (fd > 2)
					close(fd);
			}
			execv("/bin/sleep", argv);
			e = errno;
			n = write(p[1], &e, sizeof e);
			(void)n;
			_exit(127);
		}
		_exit(0);
	}
	close(p[1]);
	if (waitpid(c, &st, 0) < 0)
		setup_fail("waitpid: %s", strerror(errno));
	if (!WIFEXITED(st))
		setup_fail("first child died (status 0x%x)", st);
	if (WEXITSTATUS(st) != 0)
		blocked_step("setsid/fork in child", WEXITSTATUS(st));
	n = read(p[0], &err, sizeof err);
	if (n == (ssize_t)sizeof err)
		setup_fail("grandchild execv /bin/sleep: %s (errno=%d)", strerror(err), err);
	allowed();
}

/* setsid-tiocsti: drop the controlling tty with setsid(), then try to reopen it. */
static void op_setsid_tiocsti(char **a)
{
	pid_t c;
	int st;

	(void)a;
	/* fork so setsid() cannot fail because we are a process-group leader */
	fflush(stdout);
	c = fork();
	if (c < 0)
		setup_fail("fork: %s", strerror(errno));
	if (c == 0) {
		if (setsid() < 0)
			setup_fail("setsid: %s", strerror(errno));
		if (open("/dev/tty", O_RDWR) < 0)
			blocked(errno);
		allowed();
	}
	if (waitpid(c, &st, 0) < 0)
		setup_fail("waitpid: %s", strerror(errno));
	if (!WIFEXITED(st))
		setup_fail("child died (status 0x%x)", st);
	exit(WEXITSTATUS(st));
}

/* ------------------------------------------------------------------ */
/* namespace / exotic syscall ops                                     */
/* ------------------------------------------------------------------ */

/* unshare-user: create a user namespace with unshare(2). */
static void op_unshare_user(char **a)
{
	(void)a;
	if (unshare(CLONE_NEWUSER) < 0)
		blocked(errno);
	allowed();
}

/* clone-newuser: create a user namespace with raw clone(2). */
static void op_clone_newuser(char **a)
{
	long r;

	(void)a;
	fflush(stdout);
	r = syscall(SYS_clone, (unsigned long)(CLONE_NEWUSER | SIGCHLD), 0UL, 0UL, 0UL, 0UL);
	if (r == 0)
		_exit(0);
	if (r < 0)
		blocked(errno);
	waitpid((pid_t)r, NULL, 0);
	allowed();
}

/* clone3: plain fork through clone3(2) (filters often answer ENOSYS). */
static void op_clone3(char **a)
{
	struct clone_args ca;
	long r;

	(void)a;
	memset(&ca, 0, sizeof ca);
	ca.exit_signal = SIGCHLD;
	fflush(stdout);
	r = syscall(__NR_clone3, &ca, (size_t)CLONE_ARGS_SIZE_VER0);
	if (r == 0)
		_exit(0);
	if (r < 0)
		blocked(errno);
	waitpid((pid_t)r, NULL, 0);
	allowed();
}

/* keyctl: look up the session keyring id. */
static void op_keyctl(char **a)
{
	(void)a;
	if (syscall(__NR_keyctl, (long)KEYCTL_GET_KEYRING_ID,
		    (long)KEY_SPEC_SESSION_KEYRING, 0L) < 0)
		blocked(errno);
	allowed();
}

/* bpf: create a 1-entry array map. */
static void op_bpf(char **a)
{
	union bpf_attr attr;

	(void)a;
	memset(&attr, 0, sizeof attr);
	attr.map_type = BPF_MAP_TYPE_ARRAY;
	attr.key_size = 4;
	attr.value_size = 4;
	attr.max_entries = 1;
	if (syscall(__NR_bpf, (long)BPF_MAP_CREATE, &attr, sizeof attr) < 0)
		blocked(errno);
	allowed();
}

/* perf: open a software cpu-clock counter on ourselves. */
static void op_perf(char **a)
{
	struct perf_event_attr pa;

	(void)a;
	memset(&pa, 0, sizeof pa);
	pa.type = PERF_TYPE_SOFTWARE;
	pa.size = sizeof pa;
	pa.config = PERF_COUNT_SW_CPU_CLOCK;
	pa.disabled = 1;
	pa.exclude_kernel = 1;
	pa.exclude_hv = 1;
	if (syscall(__NR_perf_event_open, &pa, 0L, -1L, -1L, 0UL) < 0)
		blocked(errno);
	allowed();
}

/* io-uring: create an io_uring instance. */
static void op_io_uring(char **a)
{
	struct io_uring_params p;

	(void)a;
	memset(&p, 0, sizeof p);
	if (syscall(__NR_io_uring_setup, 1L, &p) < 0)
		blocked(errno);
	allowed();
}

/* open-by-handle: reopen PATH from a file handle (bypasses path-based checks). */
static void op_open_by_handle(char **a)
{
	struct file_handle *fh;
	int mount_id, mfd;

	fh = calloc(1, sizeof *fh + MAX_HANDLE_SZ);
	if (!fh)
		setup_fail("out of memory");
	fh->handle_bytes = MAX_HANDLE_SZ;
	if (name_to_handle_at(AT_FDCWD, a[0], fh, &mount_id, 0) < 0)
		blocked_step("name_to_handle_at", errno);
	mfd = open("/", O_RDONLY | O_DIRECTORY);
	if (mfd < 0)
		setup_fail("open /: %s (errno=%d)", strerror(errno), errno);
	if (open_by_handle_at(mfd, fh, O_RDONLY) < 0)
		blocked_step("open_by_handle_at", errno);
	allowed();
}

/* unix-socket: create an AF_UNIX stream socket. */
static void op_unix_socket(char **a)
{
	(void)a;
	if (socket(AF_UNIX, SOCK_STREAM, 0) < 0)
		blocked(errno);
	allowed();
}

/* socketpair: create a connected AF_UNIX socket pair. */
static void op_socketpair(char **a)
{
	int sv[2];

	(void)a;
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0)
		blocked(errno);
	allowed();
}

/* Connect an AF_UNIX stream socket to sun_path[0..len). */
static void unix_connect(const char *path, size_t len)
{
	struct sockaddr_un sa;
	int fd;

	if (len > sizeof sa.sun_path)
		setup_fail("socket name too long");
	memset(&sa, 0, sizeof sa);
	sa.sun_family = AF_UNIX;
	memcpy(sa.sun_path, path, len);
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	if (fd < 0)
		blocked_step("socket", errno);
	if (connect(fd, (struct sockaddr *)&sa,
		    (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len)) < 0)
		blocked_step("connect", errno);
	allowed();
}

/* unix-connect: connect to a filesystem unix socket. */
static void op_unix_connect(char **a)
{
	unix_connect(a[0], strlen(a[0]) + 1);
}

/* abstract-connect: connect to the abstract unix socket "\0NAME". */
static void op_abstract_connect(char **a)
{
	char name[sizeof(((struct sockaddr_un *)0)->sun_path)];
	size_t len = strlen(a[0]);

	if (len + 1 > sizeof name)
		setup_fail("socket name too long");
	name[0] = '\0';
	memcpy(name + 1, a[0], len);
	unix_connect(name, len + 1);
}

/* tcp-connect: connect to 127.0.0.1:PORT. */
static void op_tcp_connect(char **a)
{
	long port = parse_long(a[0], "port");
	struct sockaddr_in sa;
	int fd;

	if (port <= 0 || port > 65535)
		setup_fail("bad port '%s'", a[0]);
	memset(&sa, 0, sizeof sa);
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0)
		blocked_step("socket", errno);
	if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0)
		blocked_step("connect", errno);
	allowed();
}

/* i386-traceme: PTRACE_TRACEME through the 32-bit int $0x80 syscall gate. */
static void op_i386_traceme(char **a)
{
	(void)a;
#ifdef __x86_64__
	long ret;

	in_int80 = 1;
	/* i386 ABI: eax=nr (26 = ptrace), ebx=request (0 = PTRACE_TRACEME) */
	__asm__ volatile("int $0x80"
			 : "=a"(ret)
			 : "a"(26L), "b"(0L), "c"(0L), "d"(0L), "S"(0L), "D"(0L)
			 : "memory", "cc", "r8", "r9", "r10", "r11");
	in_int80 = 0;
	ret = (int)ret;	/* result is a 32-bit value */
	if (ret == 0)
		allowed();
	if (ret < 0 && ret > -4096)
		blocked((int)-ret);
	printf("BLOCKED %s: unexpected return %ld (errno=0)\n", op, ret);
	fflush(stdout);
	exit(1);
#else
	setup_fail("not applicable on this architecture (x86_64 only)");
#endif
}

/* x32-getpid: getpid through the x32 syscall ABI (bit 30 set). */
static void op_x32_getpid(char **a)
{
	(void)a;
#ifdef __x86_64__
	if (syscall(0x40000000L | 39) < 0)
		blocked(errno);
	allowed();
#else
	setup_fail("not applicable on this architecture (x86_64 only)");
#endif
}

/* core-pattern: open core_pattern for writing (never actually writes). */
static void op_core_pattern(char **a)
{
	int fd;

	(void)a;
	fd = open("/proc/sys/kernel/core_pattern", O_WRONLY);
	if (fd < 0)
		blocked(errno);
	close(fd);
	allowed();
}

/*
 * chain N FILE: a chain of N processes, each the child of the one before;
 * the first exits once the last is running, the last writes FILE 3 s later
 * (the in-between ones exit after 8 s). Without a pid namespace the orphans
 * reach jail one generation at a time: the last must be dead before jail
 * checks what was planted. Reports ALLOWED once the chain is built.
 */
static void op_chain(char **args)
{
	int n = atoi(args[0]);
	int ready[2];
	if (n < 1 || pipe(ready) != 0)
		setup_fail("chain: bad N or pipe");
	for (int i = 0; i < n; i++) {
		pid_t pid = fork();
		if (pid < 0)
			setup_fail("chain: fork");
		if (pid > 0) {
			if (i == 0) {
				char c;
				close(ready[1]);
				if (read(ready[0], &c, 1) != 1)
					setup_fail("chain: never ready");
				allowed();
			}
			sleep(8);
			_exit(0);
		}
	}
	if (write(ready[1], "x", 1) != 1)
		_exit(3);
	sleep(3);
	int fd = open(args[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd >= 0) {
		(void)!write(fd, "planted\n", 8);
		close(fd);
	}
	_exit(0);
}

/* ------------------------------------------------------------------ */

struct cmd {
	const char *name;
	int nargs;
	const char *usage;
	void (*fn)(char **args);
};

static const struct cmd cmds[] = {
	{ "read", 1, "PATH", op_read },
	{ "ls", 1, "DIR", op_ls },
	{ "write", 1, "PATH", op_write },
	{ "append", 1, "PATH", op_append },
	{ "open-trunc", 1, "PATH", op_open_trunc },
	{ "truncate", 1, "PATH", op_truncate },
	{ "create", 1, "PATH", op_create },
	{ "rename", 2, "FROM TO", op_rename },
	{ "unlink", 1, "PATH", op_unlink },
	{ "rmdir", 1, "PATH", op_rmdir },
	{ "mkdir", 1, "PATH", op_mkdir },
	{ "mkfifo", 1, "PATH", op_mkfifo },
	{ "symlink", 2, "TARGET LINKPATH", op_symlink },
	{ "link", 2, "FROM TO", op_link },
	{ "chmod", 1, "PATH", op_chmod },
	{ "chown", 1, "PATH", op_chown },
	{ "utimes", 1, "PATH", op_utimes },
	{ "setxattr", 1, "PATH", op_setxattr },
	{ "setflags", 1, "PATH", op_setflags },
	{ "fssetxattr", 1, "PATH", op_fssetxattr },
	{ "file-setattr", 1, "PATH", op_file_setattr },
	{ "proc-fd-write", 1, "PATH", op_proc_fd_write },
	{ "proc-root-write", 1, "/PATH", op_proc_root_write },
	{ "proc-pid-root-write", 2, "PID /PATH", op_proc_pid_root_write },
	{ "mmap-write", 1, "PATH", op_mmap_write },
	{ "copy-range", 2, "SRC DST", op_copy_range },
	{ "remount", 1, "PATH", op_remount },
	{ "bind-over", 2, "SRC DST", op_bind_over },
	{ "userns-write", 1, "DIR", op_userns_write },
	{ "ptrace", 1, "PID", op_ptrace },
	{ "vm-write", 1, "PID", op_vm_write },
	{ "proc-mem", 1, "PID", op_proc_mem },
	{ "pidfd-getfd", 2, "PID FD", op_pidfd_getfd },
	{ "kill", 2, "PID SIG", op_kill },
	{ "chain", 2, "N FILE", op_chain },
	{ "tiocsti", 1, "FD|tty", op_tiocsti },
	{ "tioclinux", 1, "FD|tty", op_tioclinux },
	{ "ioctl-raw", 2, "FD HEXREQ", op_ioctl_raw },
	{ "socket-family", 1, "N", op_socket_family },
	{ "io-uring", 0, "", op_io_uring },
	{ "open-by-handle", 1, "PATH", op_open_by_handle },
	{ "unix-socket", 0, "", op_unix_socket },
	{ "socketpair", 0, "", op_socketpair },
	{ "unix-connect", 1, "PATH", op_unix_connect },
	{ "abstract-connect", 1, "NAME", op_abstract_connect },
	{ "tcp-connect", 1, "PORT", op_tcp_connect },
	{ "unshare-user", 0, "", op_unshare_user },
	{ "clone-newuser", 0, "", op_clone_newuser },
	{ "clone3", 0, "", op_clone3 },
	{ "keyctl", 0, "", op_keyctl },
	{ "bpf", 0, "", op_bpf },
	{ "perf", 0, "", op_perf },
	{ "i386-traceme", 0, "", op_i386_traceme },
	{ "x32-getpid", 0, "", op_x32_getpid },
	{ "core-pattern", 0, "", op_core_pattern },
	{ "daemon", 1, "MARKER", op_daemon },
	{ "setsid-tiocsti", 0, "", op_setsid_tiocsti },
};

static void __attribute__((noreturn)) usage(void)
{
	size_t i;

	fprintf(stderr, "usage: attack OP [ARGS...]\nops:\n");
	for (i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
		fprintf(stderr, "  %s %s\n", cmds[i].name, cmds[i].usage);
	exit(2);
}

int main(int argc, char **argv)
{
	size_t i;

	if (argc < 2)
		usage();
	for (i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
		if (strcmp(argv[1], cmds[i].name))
			continue;
		op = cmds[i].name;
		if (argc - 2 != cmds[i].nargs) {
			fprintf(stderr, "usage: attack %s %s\n", op, cmds[i].usage);
			return 2;
		}
		install_handlers();
		cmds[i].fn(argv + 2);
		/* every op ends in allowed()/blocked()/setup_fail() */
		setup_fail("internal error: op returned");
	}
	fprintf(stderr, "attack: unknown op '%s'\n", argv[1]);
	usage();
}
