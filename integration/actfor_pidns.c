/* integration/actfor_pidns.sh's program (built static, run in a user, pid and
 * network namespace of its own, on kernel sockets and through `udsfs run`): a child
 * sends its parent datagrams with and without explicit SCM_CREDENTIALS and connects to
 * its listener; the parent owns its end (F_SETOWN getpid(), O_ASYNC) and waits for
 * SIGIO. It prints what each side got, the pids as "sender", "receiver" or "other(N)",
 * so that the lines are the same on the kernel and through udsfs.
 * Usage: actfor_pidns DIR (a directory to bind a name in). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static pid_t receiver, sender;

static const char *who(pid_t pid) {
    static char buf[4][32];
    static int n;
    char *b = buf[n++ % 4];
    if (pid == sender)
        return "sender";
    if (pid == receiver)
        return "receiver";
    snprintf(b, 32, "other(%d)", (int)pid);
    return b;
}

static void die(const char *what) {
    printf("%s: errno %d (%s)\n", what, errno, strerror(errno));
    exit(1);
}

/* A datagram with SCM_CREDENTIALS {getpid(), getuid(), getgid()} when `creds`. */
static void send_one(int fd, int creds) {
    char data = creds ? 'c' : 'p';
    struct iovec iov = {&data, 1};
    union {
        struct cmsghdr h;
        char b[CMSG_SPACE(sizeof(struct ucred))];
    } c;
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
    if (creds) {
        struct ucred u = {getpid(), getuid(), getgid()};
        memset(&c, 0, sizeof c);
        m.msg_control = c.b;
        m.msg_controllen = sizeof c.b;
        c.h.cmsg_level = SOL_SOCKET;
        c.h.cmsg_type = SCM_CREDENTIALS;
        c.h.cmsg_len = CMSG_LEN(sizeof u);
        memcpy(CMSG_DATA(&c.h), &u, sizeof u);
    }
    if (sendmsg(fd, &m, 0) != 1)
        printf("child: sendmsg (creds %d): errno %d\n", creds, errno);
}

static void recv_one(int fd) {
    char data;
    struct iovec iov = {&data, 1};
    union {
        struct cmsghdr h;
        char b[CMSG_SPACE(sizeof(struct ucred))];
    } c;
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = c.b,
                       .msg_controllen = sizeof c.b};
    if (recvmsg(fd, &m, 0) != 1) {
        printf("recvmsg: errno %d\n", errno);
        return;
    }
    struct cmsghdr *h = CMSG_FIRSTHDR(&m);
    if (!h || h->cmsg_type != SCM_CREDENTIALS) {
        printf("%s: no credentials\n", data == 'c' ? "explicit" : "implicit");
        return;
    }
    struct ucred u;
    memcpy(&u, CMSG_DATA(h), sizeof u);
    printf("%s credentials: pid %s uid %u gid %u\n", data == 'c' ? "explicit" : "implicit",
           who(u.pid), u.uid, u.gid);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    receiver = getpid();
    int sv[2], on = 1;
    if (socketpair(AF_UNIX, SOCK_DGRAM, 0, sv) < 0)
        die("socketpair");
    char link[256] = "", path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", sv[0]);
    if (readlink(path, link, sizeof link - 1) < 0)
        die("readlink");
    printf("where: %s\n", strstr(link, "/.udsfs/") ? "udsfs" : "kernel");
    if (setsockopt(sv[0], SOL_SOCKET, SO_PASSCRED, &on, sizeof on) < 0)
        die("SO_PASSCRED");
    struct timeval limit = {5, 0}; /* a datagram that never comes fails, not hangs */
    if (setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit) < 0)
        die("SO_RCVTIMEO");
    sigset_t io;
    sigemptyset(&io);
    sigaddset(&io, SIGIO);
    sigprocmask(SIG_BLOCK, &io, NULL);
    if (fcntl(sv[0], F_SETOWN, getpid()) < 0)
        die("F_SETOWN");
    printf("F_GETOWN: %s\n", who(fcntl(sv[0], F_GETOWN)));
    if (fcntl(sv[0], F_SETFL, fcntl(sv[0], F_GETFL) | O_ASYNC) < 0)
        die("O_ASYNC");

    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s/listener", argv[1]);
    unlink(a.sun_path);
    int l = socket(AF_UNIX, SOCK_STREAM, 0);
    if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof a) < 0 || listen(l, 1) < 0)
        die("listener");

    int go[2];
    if (pipe(go) < 0)
        die("pipe");
    sender = fork();
    if (sender < 0)
        die("fork");
    if (sender == 0) {
        sender = getpid();
        char x;
        if (read(go[0], &x, 1) != 1)
            _exit(3);
        send_one(sv[1], 1);
        send_one(sv[1], 0);
        int s = socket(AF_UNIX, SOCK_STREAM, 0);
        if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof a) < 0)
            printf("child: connect: errno %d\n", errno);
        struct ucred u;
        socklen_t len = sizeof u;
        int got = getsockopt(s, SOL_SOCKET, SO_PEERCRED, &u, &len);
        if (read(s, &x, 1) != 1) /* printed after the parent's lines */
            printf("child: read: errno %d\n", errno);
        if (got < 0)
            printf("child: SO_PEERCRED: errno %d\n", errno);
        else
            printf("child's SO_PEERCRED: pid %s uid %u gid %u\n", who(u.pid), u.uid, u.gid);
        _exit(0);
    }
    if (write(go[1], "g", 1) != 1)
        die("write");
    recv_one(sv[0]);
    recv_one(sv[0]);
    struct timespec t = {2, 0};
    int sig = sigtimedwait(&io, NULL, &t);
    printf("SIGIO to the receiver: %s\n", sig == SIGIO ? "yes" : "no");

    int c = accept(l, NULL, NULL);
    if (c < 0)
        die("accept");
    struct ucred u;
    socklen_t len = sizeof u;
    if (getsockopt(c, SOL_SOCKET, SO_PEERCRED, &u, &len) < 0)
        die("SO_PEERCRED");
    printf("accepted SO_PEERCRED: pid %s uid %u gid %u\n", who(u.pid), u.uid, u.gid);
    if (write(c, "x", 1) != 1)
        die("write to the child");
    int st;
    if (waitpid(sender, &st, 0) != sender || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        printf("child ended with status %#x\n", st);
    unlink(a.sun_path);
    printf("done\n");
    return 0;
}
