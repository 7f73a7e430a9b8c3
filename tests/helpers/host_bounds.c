/* Red-team pass rt2a: attacks on the resource bounds and on what a partial jail lets reach the
 * host. Protocol of attack.c: "ALLOWED op: N" (exit 0) or "BLOCKED op: errno=E" (exit 1). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/shm.h>
#include <unistd.h>

static int allowed(const char *op, long n) { printf("ALLOWED %s: %ld\n", op, n); return 0; }
static int blocked(const char *op) { printf("BLOCKED %s: errno=%d %s\n", op, errno, strerror(errno)); return 1; }

int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: rt2a OP ARG\n"); return 2; }
    const char *op = argv[1];
    if (!strcmp(op, "shm-create")) {           /* outside: a segment with this key */
        key_t key = (key_t)strtol(argv[2], 0, 0);
        int id = shmget(key, 4096, IPC_CREAT | 0600);
        if (id < 0) return blocked(op);
        char *p = shmat(id, 0, 0);
        if (p == (void *)-1) return blocked(op);
        strcpy(p, "host");
        return allowed(op, id);
    }
    if (!strcmp(op, "shm-write")) {            /* inside: write the host's segment */
        key_t key = (key_t)strtol(argv[2], 0, 0);
        int id = shmget(key, 0, 0);
        if (id < 0) return blocked(op);
        char *p = shmat(id, 0, 0);
        if (p == (void *)-1) return blocked(op);
        strcpy(p, "jail");
        return allowed(op, id);
    }
    if (!strcmp(op, "shm-read")) {             /* outside: what the segment holds */
        key_t key = (key_t)strtol(argv[2], 0, 0);
        int id = shmget(key, 0, 0);
        if (id < 0) return blocked(op);
        char *p = shmat(id, 0, SHM_RDONLY);
        if (p == (void *)-1) return blocked(op);
        printf("CONTENT %s\n", p);
        return allowed(op, id);
    }
    if (!strcmp(op, "shm-remove")) {
        key_t key = (key_t)strtol(argv[2], 0, 0);
        int id = shmget(key, 0, 0);
        if (id >= 0) shmctl(id, IPC_RMID, 0);
        return 0;
    }
    if (!strcmp(op, "shm-leave")) {            /* inside: a filled segment that outlives us */
        key_t key = (key_t)strtol(argv[2], 0, 0);
        size_t sz = 8 << 20;
        int id = shmget(key, sz, IPC_CREAT | 0600);
        if (id < 0) return blocked(op);
        char *p = shmat(id, 0, 0);
        if (p == (void *)-1) return blocked(op);
        memset(p, 1, sz);
        shmdt(p);
        return allowed(op, id);
    }
    if (!strcmp(op, "prlimit")) {              /* inside: lower a host process's RLIMIT_FSIZE */
        struct rlimit r = {0, 0};
        if (prlimit(atoi(argv[2]), RLIMIT_FSIZE, &r, 0) != 0) return blocked(op);
        return allowed(op, 0);
    }
    if (!strcmp(op, "shared") || !strcmp(op, "memfd")) { /* MiB of shared memory, touched */
        size_t sz = (size_t)atol(argv[2]) << 20;
        char *p;
        if (!strcmp(op, "shared")) {
            p = mmap(0, sz, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        } else {
            int fd = memfd_create("rt2a", 0);
            if (fd < 0 || ftruncate(fd, sz) != 0) return blocked(op);
            p = mmap(0, sz, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        }
        if (p == MAP_FAILED) return blocked(op);
        for (size_t i = 0; i < sz; i += 4096) p[i] = 1;
        return allowed(op, (long)(sz >> 20));
    }
    fprintf(stderr, "unknown op %s\n", op);
    return 2;
}
