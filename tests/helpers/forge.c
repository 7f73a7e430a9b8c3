/* Forges what `jail status` once believed, outside any jail, then execs PROG:
 *   forge FILTER POLICY PROG [ARGS...]
 * FILTER: "allow" loads an allow-everything seccomp filter; "mimic" one that answers the
 * syscalls status probes as jail's filter does (clone3 ENOSYS; ptrace, perf_event_open, keyctl
 * EPERM) and allows the rest; "nouserns" one that refuses unshare and clone with
 * CLONE_NEWUSER (EPERM), as jail's does without --allow-userns. Either way no_new_privs is set
 * first (the kernel requires it).
 * POLICY: a file copied into a memfd named jail-policy, sealed like jail's, at descriptor 10
 * with JAIL=1 and JAIL_POLICY=/proc/self/fd/10; "-" leaves the environment alone. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#define NR(n) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (n), 0, 1)
#define RET(v) BPF_STMT(BPF_RET | BPF_K, (v))

static int sealed_copy(const char *path) {
    char buf[65536];
    int in = open(path, O_RDONLY);
    int fd = memfd_create("jail-policy", MFD_ALLOW_SEALING);
    ssize_t n;
    if (in < 0 || fd < 0) return -1;
    while ((n = read(in, buf, sizeof buf)) > 0)
        if (write(fd, buf, n) != n) return -1;
    if (fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL)) return -1;
    if (dup2(fd, 10) < 0) return -1;
    return 0;
}

int main(int argc, char **argv) {
    struct sock_filter allow[] = {RET(SECCOMP_RET_ALLOW)};
    struct sock_filter mimic[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        NR(__NR_clone3), RET(SECCOMP_RET_ERRNO | ENOSYS),
        NR(__NR_ptrace), RET(SECCOMP_RET_ERRNO | EPERM),
        NR(__NR_perf_event_open), RET(SECCOMP_RET_ERRNO | EPERM),
        NR(__NR_keyctl), RET(SECCOMP_RET_ERRNO | EPERM),
        RET(SECCOMP_RET_ALLOW),
    };
    struct sock_filter nouserns[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_unshare, 1, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_clone, 0, 3),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0])),
        BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, CLONE_NEWUSER, 0, 1),
        RET(SECCOMP_RET_ERRNO | EPERM),
        RET(SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog;
    if (argc < 4) {
        fprintf(stderr, "usage: forge allow|mimic|nouserns POLICY|- PROG [ARGS...]\n");
        return 2;
    }
    if (strcmp(argv[1], "mimic") == 0) {
        prog.len = sizeof mimic / sizeof mimic[0];
        prog.filter = mimic;
    } else if (strcmp(argv[1], "nouserns") == 0) {
        prog.len = sizeof nouserns / sizeof nouserns[0];
        prog.filter = nouserns;
    } else {
        prog.len = 1;
        prog.filter = allow;
    }
    if (strcmp(argv[2], "-") != 0) {
        if (sealed_copy(argv[2])) {
            perror("memfd");
            return 97;
        }
        setenv("JAIL", "1", 1);
        setenv("JAIL_POLICY", "/proc/self/fd/10", 1);
    }
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog)) {
        perror("seccomp");
        return 99;
    }
    execv(argv[3], argv + 3);
    perror("execv");
    return 98;
}
