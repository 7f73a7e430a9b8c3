/* The kernel's own cost of a layer, for bench/run.sh: set up the least a layer can be, then exec
 * the command, so a jailed figure can be read against what the kernel charges for the mechanism
 * alone.
 *
 *   floor seccomp CMD...         a one-instruction filter that allows every syscall
 *   floor landlock CMD...        a Landlock domain handling every filesystem right this kernel
 *                                knows (what jail handles), with one rule granting them all on /
 *   floor time RUNS CMD...       runs CMD RUNS times (its output to /dev/null) and prints the
 *                                median wall-clock time in ns: a workload timed inside a
 *                                sandbox, without the sandbox's start-up
 *
 * Built by bench/run.sh with `cc -O2`; no dependency beyond the kernel headers. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int die(const char *what) {
    fprintf(stderr, "floor: %s: %s\n", what, strerror(errno));
    return 125;
}

static int allow_all_filter(void) {
    struct sock_filter insn[] = {BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)};
    struct sock_fprog prog = {.len = 1, .filter = insn};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)) return die("PR_SET_NO_NEW_PRIVS");
    if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog)) return die("seccomp");
    return 0;
}

/* The uapi numbers, spelled out: Debian 12's headers predate ABI 3. */
#define LANDLOCK_CREATE_RULESET_VERSION (1U << 0)
#define LANDLOCK_RULE_PATH_BENEATH 1
#define LANDLOCK_ACCESS_FS_WRITE_FILE (1ULL << 1)
#define LANDLOCK_ACCESS_FS_REMOVE_DIR (1ULL << 4)
#define LANDLOCK_ACCESS_FS_REMOVE_FILE (1ULL << 5)
#define LANDLOCK_ACCESS_FS_MAKE_CHAR (1ULL << 6)
#define LANDLOCK_ACCESS_FS_MAKE_DIR (1ULL << 7)
#define LANDLOCK_ACCESS_FS_MAKE_REG (1ULL << 8)
#define LANDLOCK_ACCESS_FS_MAKE_SOCK (1ULL << 9)
#define LANDLOCK_ACCESS_FS_MAKE_FIFO (1ULL << 10)
#define LANDLOCK_ACCESS_FS_MAKE_BLOCK (1ULL << 11)
#define LANDLOCK_ACCESS_FS_MAKE_SYM (1ULL << 12)
#define LANDLOCK_ACCESS_FS_REFER (1ULL << 13)
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)
#define LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15)
struct ruleset_attr {
    uint64_t handled_access_fs;
};
struct path_beneath_attr {
    uint64_t allowed_access;
    int32_t parent_fd;
} __attribute__((packed));

/* Every filesystem right up to this kernel's ABI (the same set jail's ruleset handles). */
static uint64_t fs_rights(int abi) {
    uint64_t r = (LANDLOCK_ACCESS_FS_MAKE_SYM << 1) - 1; /* ABI 1: EXECUTE .. MAKE_SYM */
    if (abi >= 2) r |= LANDLOCK_ACCESS_FS_REFER;
    if (abi >= 3) r |= LANDLOCK_ACCESS_FS_TRUNCATE;
    if (abi >= 5) r |= LANDLOCK_ACCESS_FS_IOCTL_DEV;
    return r;
}

static int minimal_domain(void) {
    int abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
    if (abi < 1) return die("Landlock");
    struct ruleset_attr attr = {
        .handled_access_fs = fs_rights(abi)};
    int ruleset = syscall(SYS_landlock_create_ruleset, &attr, sizeof attr.handled_access_fs, 0);
    if (ruleset < 0) return die("landlock_create_ruleset");
    struct path_beneath_attr rule = {.allowed_access = attr.handled_access_fs};
    rule.parent_fd = open("/", O_PATH | O_CLOEXEC);
    if (rule.parent_fd < 0) return die("open /");
    if (syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &rule, 0))
        return die("landlock_add_rule");
    close(rule.parent_fd);
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)) return die("PR_SET_NO_NEW_PRIVS");
    if (syscall(SYS_landlock_restrict_self, ruleset, 0)) return die("landlock_restrict_self");
    close(ruleset);
    return 0;
}

static long long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static int cmp_ll(const void *a, const void *b) {
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

static int time_runs(int runs, char **cmd) {
    if (runs < 1 || runs > 1000) {
        fprintf(stderr, "floor: time: RUNS must be 1..1000\n");
        return 125;
    }
    long long times[1000];
    for (int i = 0; i < runs; i++) {
        long long start = now_ns();
        pid_t pid = fork();
        if (pid < 0) return die("fork");
        if (pid == 0) {
            int null = open("/dev/null", O_WRONLY);
            if (null < 0 || dup2(null, 1) < 0) _exit(126);
            execvp(cmd[0], cmd);
            _exit(127);
        }
        int status;
        if (waitpid(pid, &status, 0) < 0) return die("waitpid");
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            fprintf(stderr, "floor: time: %s failed (status %d)\n", cmd[0], status);
            return 1;
        }
        times[i] = now_ns() - start;
    }
    qsort(times, runs, sizeof times[0], cmp_ll);
    printf("%lld\n", runs % 2 ? times[runs / 2] : (times[runs / 2 - 1] + times[runs / 2]) / 2);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: floor seccomp|landlock|time ...\n");
        return 125;
    }
    int rc;
    if (!strcmp(argv[1], "time")) {
        if (argc < 4) {
            fprintf(stderr, "usage: floor time RUNS CMD [ARGS...]\n");
            return 125;
        }
        return time_runs(atoi(argv[2]), argv + 3);
    }
    if (!strcmp(argv[1], "seccomp"))
        rc = allow_all_filter();
    else if (!strcmp(argv[1], "landlock"))
        rc = minimal_domain();
    else {
        fprintf(stderr, "floor: unknown layer '%s'\n", argv[1]);
        return 125;
    }
    if (rc) return rc;
    execvp(argv[2], argv + 2);
    return die(argv[2]);
}
