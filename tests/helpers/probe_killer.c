/* A process one exec of a session leaves behind, spoiling what a later `jail status` probes:
 *   probe_killer SECONDS LOG [SIGNAL]
 * For SECONDS it looks for a new process whose command line holds "jail" and " status" and,
 * while that process lives, sends SIGNAL (9, SIGKILL, unless given) to each of the next few
 * pids that is its child (its short-lived probe children: the fork that tries
 * unshare(CLONE_NEWUSER)), writing a line to LOG for each one hit. Signals between a session's execs
 * are allowed on purpose (a later exec stops what an earlier one started), so such a kill
 * lands: status must take a killed probe for "unknown", never for "refused". */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* /proc/PID/NAME into buf (at most size - 1 bytes, NUL-terminated): its length, or 0. */
static int read_proc(int pid, const char *name, char *buf, int size)
{
	char path[64];
	int fd, n;

	snprintf(path, sizeof path, "/proc/%d/%s", pid, name);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return 0;
	n = read(fd, buf, size - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	return n;
}

static int is_status(int pid)
{
	char buf[512];
	int n = read_proc(pid, "cmdline", buf, sizeof buf), i;

	for (i = 0; i < n; i++)
		if (!buf[i])
			buf[i] = ' ';
	return n && strstr(buf, " status") && strstr(buf, "jail");
}

/* The parent pid of PID, or 0. */
static int parent_of(int pid)
{
	char buf[512], *p;

	if (!read_proc(pid, "stat", buf, sizeof buf))
		return 0;
	p = strrchr(buf, ')');
	if (!p || strlen(p) < 4)
		return 0;
	return atoi(p + 4); /* ") S PPID" */
}

int main(int argc, char **argv)
{
	FILE *log = fopen(argc > 2 ? argv[2] : "/dev/null", "a");
	int sig = argc > 3 ? atoi(argv[3]) : SIGKILL;
	time_t end = time(NULL) + (argc > 1 ? atoi(argv[1]) : 30);
	int last = 0;

	while (time(NULL) < end) {
		DIR *d = opendir("/proc");
		struct dirent *e;
		int target = 0, q;

		if (!d)
			return 1;
		while ((e = readdir(d)))
			if (atoi(e->d_name) > last && is_status(atoi(e->d_name)))
				target = atoi(e->d_name);
		closedir(d);
		if (!target)
			continue;
		last = target;
		while (kill(target, 0) == 0)
			for (q = target + 1; q <= target + 4; q++)
				if (parent_of(q) == target && kill(q, sig) == 0 && log) {
					fprintf(log, "signal %d to %d, a child of %d\n", sig, q, target);
					fflush(log);
				}
	}
	return 0;
}
