/*
 * docker_seccomp.c - run a command under the restrictions that Docker's default seccomp profile
 * places on a container without CAP_SYS_ADMIN, for what matters to jail: namespaces and mounts.
 *
 * Build: cc -O1 -Wall -o docker_seccomp docker_seccomp.c
 * Usage: docker_seccomp [--allow-jail] CMD [ARGS...]
 *
 * Sets no_new_privs, installs the filter below, then execvp(CMD). Like Docker's default profile
 * (moby profiles/seccomp/default.json) without CAP_SYS_ADMIN:
 *   clone    with any CLONE_NEW* flag in its flags argument  -> EPERM (fork and threads work)
 *   clone3                                                    -> ENOSYS (libc falls back to clone)
 *   unshare  (whatever the flags)                             -> EPERM
 *   setns, mount, umount2, pivot_root, mount_setattr and the new mount API
 *   (open_tree move_mount fsopen fsconfig fsmount fspick)     -> EPERM
 * Everything else is allowed: this reproduces the namespace and mount refusals, not the whole
 * profile. The architecture is checked first (x86_64 or aarch64; any other architecture's
 * numbers, i386 through int 0x80 included, kill the process), and x32 numbers on x86_64
 * (bit 30 set) are refused with EPERM, as the profile's x32 rules would for these calls.
 *
 * --allow-jail: the custom profile platform/container/README.md recommends instead, Docker's
 * default plus what jail needs to build its mount view: clone with namespace flags, unshare,
 * mount and mount_setattr are allowed (the rest stays refused).
 *
 * Exit status: CMD's (it is exec'd); 125 when the filter cannot be installed; 127 when CMD
 * cannot be executed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>

#if defined(__x86_64__)
#define ARCH_NR AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define ARCH_NR AUDIT_ARCH_AARCH64
#else
#error "docker_seccomp supports x86_64 and aarch64"
#endif

/* Numbers >= 424 are the same on every architecture; older headers may lack them. */
#ifndef __NR_open_tree
#define __NR_open_tree 428
#endif
#ifndef __NR_move_mount
#define __NR_move_mount 429
#endif
#ifndef __NR_fsopen
#define __NR_fsopen 430
#endif
#ifndef __NR_fsconfig
#define __NR_fsconfig 431
#endif
#ifndef __NR_fsmount
#define __NR_fsmount 432
#endif
#ifndef __NR_fspick
#define __NR_fspick 433
#endif
#ifndef __NR_clone3
#define __NR_clone3 435
#endif
#ifndef __NR_mount_setattr
#define __NR_mount_setattr 442
#endif
#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif

/* Every namespace flag clone(2) takes: Docker's mask (0x7E020000) plus CLONE_NEWTIME. */
#define CLONE_NEW_ANY                                                                      \
	(CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER |     \
	 CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWTIME)

#define X32_SYSCALL_BIT 0x40000000u
#define RET_ERRNO(e) (SECCOMP_RET_ERRNO | ((e) & SECCOMP_RET_DATA))

static struct sock_filter prog[64];
static unsigned short len;

static void emit(struct sock_filter insn)
{
	if (len == sizeof prog / sizeof prog[0]) {
		fprintf(stderr, "docker_seccomp: filter too long\n");
		_exit(125);
	}
	prog[len++] = insn;
}

/* With the syscall number loaded: if it is nr, return ret. */
static void deny(unsigned int nr, unsigned int ret)
{
	emit((struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, nr, 0, 1));
	emit((struct sock_filter)BPF_STMT(BPF_RET | BPF_K, ret));
}

int main(int argc, char **argv)
{
	int allow_jail = 0;
	struct sock_fprog fprog;

	if (argc > 1 && strcmp(argv[1], "--allow-jail") == 0) {
		allow_jail = 1;
		argv++;
		argc--;
	}
	if (argc < 2) {
		fprintf(stderr, "usage: docker_seccomp [--allow-jail] CMD [ARGS...]\n");
		return 125;
	}

	emit((struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
					  offsetof(struct seccomp_data, arch)));
	emit((struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ARCH_NR, 1, 0));
	emit((struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS));
	emit((struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
					  offsetof(struct seccomp_data, nr)));
#if defined(__x86_64__)
	emit((struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, X32_SYSCALL_BIT, 0, 1));
	emit((struct sock_filter)BPF_STMT(BPF_RET | BPF_K, RET_ERRNO(EPERM)));
#endif
	deny(__NR_clone3, RET_ERRNO(ENOSYS));
	deny(__NR_setns, RET_ERRNO(EPERM));
	deny(__NR_umount2, RET_ERRNO(EPERM));
	deny(__NR_pivot_root, RET_ERRNO(EPERM));
	deny(__NR_open_tree, RET_ERRNO(EPERM));
	deny(__NR_move_mount, RET_ERRNO(EPERM));
	deny(__NR_fsopen, RET_ERRNO(EPERM));
	deny(__NR_fsconfig, RET_ERRNO(EPERM));
	deny(__NR_fsmount, RET_ERRNO(EPERM));
	deny(__NR_fspick, RET_ERRNO(EPERM));
	if (!allow_jail) {
		deny(__NR_unshare, RET_ERRNO(EPERM));
		deny(__NR_mount, RET_ERRNO(EPERM));
		deny(__NR_mount_setattr, RET_ERRNO(EPERM));
		/* clone: refused when any namespace flag is set. The flags are the first argument on
		 * x86_64 and aarch64; the low 32 bits hold all of them. */
		emit((struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_clone, 0, 3));
		emit((struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
						  offsetof(struct seccomp_data, args[0])));
		emit((struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, CLONE_NEW_ANY, 0, 1));
		emit((struct sock_filter)BPF_STMT(BPF_RET | BPF_K, RET_ERRNO(EPERM)));
	}
	emit((struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
		fprintf(stderr, "docker_seccomp: PR_SET_NO_NEW_PRIVS: %s\n", strerror(errno));
		return 125;
	}
	fprog.len = len;
	fprog.filter = prog;
	if (syscall(__NR_seccomp, SECCOMP_SET_MODE_FILTER, 0, &fprog) != 0) {
		fprintf(stderr, "docker_seccomp: seccomp: %s\n", strerror(errno));
		return 125;
	}
	execvp(argv[1], argv + 1);
	fprintf(stderr, "docker_seccomp: %s: %s\n", argv[1], strerror(errno));
	return 127;
}
