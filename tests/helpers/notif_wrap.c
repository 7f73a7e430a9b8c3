// Runs argv under a seccomp filter with a user-notification listener (as LXD/Incus, sysbox, crun
// seccomp-notify do): only the unrelated syscall acct() notifies; the parent answers it.
#define _GNU_SOURCE
#include <linux/seccomp.h>
#include <linux/filter.h>
#include <linux/audit.h>
#include <sys/syscall.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <sys/ioctl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <errno.h>
int main(int argc, char **argv) {
  struct sock_filter f[] = {
    BPF_STMT(BPF_LD|BPF_W|BPF_ABS, offsetof(struct seccomp_data, nr)),
    BPF_JUMP(BPF_JMP|BPF_JEQ|BPF_K, __NR_acct, 0, 1),
    BPF_STMT(BPF_RET|BPF_K, SECCOMP_RET_USER_NOTIF),
    BPF_STMT(BPF_RET|BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog p = { .len = 4, .filter = f };
  int sv[2]; socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
  pid_t c = fork();
  if (c == 0) {
    close(sv[0]);
    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
    int l = syscall(__NR_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &p);
    if (l < 0) { perror("seccomp"); _exit(1); }
    char b = 0; struct iovec io = { &b, 1 }; char cb[CMSG_SPACE(sizeof(int))];
    struct msghdr m = { .msg_iov = &io, .msg_iovlen = 1, .msg_control = cb, .msg_controllen = sizeof cb };
    struct cmsghdr *h = CMSG_FIRSTHDR(&m); h->cmsg_level = SOL_SOCKET; h->cmsg_type = SCM_RIGHTS; h->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(h), &l, sizeof l); sendmsg(sv[1], &m, 0); close(l); close(sv[1]);
    execvp(argv[1], argv + 1); perror("exec"); _exit(127);
  }
  close(sv[1]);
  // receive the listener and hold it (answering nothing: acct() is never called)
  char b; struct iovec io = { &b, 1 }; char cb[CMSG_SPACE(sizeof(int))];
  struct msghdr m = { .msg_iov = &io, .msg_iovlen = 1, .msg_control = cb, .msg_controllen = sizeof cb };
  recvmsg(sv[0], &m, 0);
  int st; waitpid(c, &st, 0); return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}
