/*
 * limits.c - bounded resource exhaustion attempts for jail's limit tests.
 *
 * Build: cc -O1 -Wall -o limits limits.c
 * Usage: limits fork-bomb MAX [HOLD_S] | fill PATH MAX_MIB | hog MAX_MIB
 *
 * Each op tries to take MAX of one resource (never more: the tests must not really exhaust the
 * machine) and reports with attack.c's protocol:
 *   exit 0, stdout "ALLOWED <op>: <got>"                   it took all of MAX
 *   exit 1, stdout "BLOCKED <op>: <got>: <strerror> (errno=N)"  the kernel stopped it first
 *   exit 2, message on stderr                               usage or setup error
 * A process the kernel kills (the OOM killer in a memory cgroup) reports nothing; jail then
 * exits 128+9.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <unistd.h>

static long parse_max(const char *s)
{
	char *end;
	long v = strtol(s, &end, 10);

	if (*s == 0 || *end != 0 || v <= 0) {
		fprintf(stderr, "limits: bad MAX '%s'\n", s);
		exit(2);
	}
	return v;
}

struct shared {
	atomic_long made;
	atomic_int err;
};

/*
 * A fork bomb with a budget: every process forks as fast as it can, and so do its children,
 * until MAX processes exist in all or fork fails. Each one dies with its parent (PDEATHSIG),
 * and after 60 s in any case.
 */
static void op_fork_bomb(long max, long hold)
{
	struct shared *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE,
				 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	pid_t origin = getpid();
	long last = -1;

	if (sh == MAP_FAILED) {
		perror("limits: mmap");
		exit(2);
	}
	atomic_store(&sh->made, 0);
	atomic_store(&sh->err, 0);
	for (;;) {
		if (atomic_fetch_add(&sh->made, 1) >= max) {
			atomic_fetch_sub(&sh->made, 1);
			break;
		}
		pid_t pid = fork();
		if (pid < 0) {
			atomic_fetch_sub(&sh->made, 1);
			atomic_store(&sh->err, errno);
			break;
		}
		if (pid == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			alarm(60);
			if (getppid() == 1)
				_exit(0);
			continue; /* the child forks too */
		}
		if (atomic_load(&sh->err))
			break;
	}
	if (getpid() != origin) {
		for (;;)
			pause();
	}
	/* Wait until the count stops moving. */
	for (int i = 0; i < 600; i++) {
		long now = atomic_load(&sh->made);
		if (now == last)
			break;
		last = now;
		usleep(100000);
	}
	int err = atomic_load(&sh->err);
	long made = atomic_load(&sh->made);
	/* End the others, not ourselves. */
	signal(SIGTERM, SIG_IGN);
	if (err)
		printf("BLOCKED fork-bomb: %ld processes: %s (errno=%d)\n", made, strerror(err), err);
	else
		printf("ALLOWED fork-bomb: %ld processes\n", made);
	if (hold) {
		/* Keep them all while the test forks on the host. */
		printf("HOLDING\n");
		sleep(hold);
	}
	kill(0, SIGTERM);
	_exit(err ? 1 : 0);
}

/* Writes PATH in 1 MiB chunks up to MAX MiB. */
static void op_fill(const char *path, long max_mib)
{
	static char chunk[1 << 20];
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	long done = 0;

	if (fd < 0) {
		fprintf(stderr, "limits: open %s: %s\n", path, strerror(errno));
		exit(2);
	}
	memset(chunk, 'x', sizeof chunk);
	while (done < (long)sizeof chunk * max_mib) {
		ssize_t n = write(fd, chunk, sizeof chunk);
		if (n < 0) {
			int e = errno;
			printf("BLOCKED fill: %ld bytes: %s (errno=%d)\n", done, strerror(e), e);
			unlink(path);
			exit(1);
		}
		done += n;
	}
	printf("ALLOWED fill: %ld bytes\n", done);
	unlink(path);
	exit(0);
}

/* Allocates and touches MAX MiB of private memory, 1 MiB at a time. */
static void op_hog(long max_mib)
{
	long got = 0;

	while (got < max_mib) {
		char *p = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			       -1, 0);
		if (p == MAP_FAILED) {
			int e = errno;
			printf("BLOCKED hog: %ld MiB: %s (errno=%d)\n", got, strerror(e), e);
			exit(1);
		}
		memset(p, 1, 1 << 20);
		got++;
	}
	printf("ALLOWED hog: %ld MiB\n", got);
	exit(0);
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if ((argc == 3 || argc == 4) && strcmp(argv[1], "fork-bomb") == 0)
		op_fork_bomb(parse_max(argv[2]), argc == 4 ? parse_max(argv[3]) : 0);
	if (argc == 4 && strcmp(argv[1], "fill") == 0)
		op_fill(argv[2], parse_max(argv[3]));
	if (argc == 3 && strcmp(argv[1], "hog") == 0)
		op_hog(parse_max(argv[2]));
	fprintf(stderr, "usage: limits fork-bomb MAX [HOLD_S] | fill PATH MAX_MIB | hog MAX_MIB\n");
	return 2;
}
