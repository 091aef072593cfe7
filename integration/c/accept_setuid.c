/* accept after a setuid, in a static program (integration/accept_after_setuid.sh):
 * the library cannot carry it, so through `udsfs run` the supervisor does. The
 * parent listens as root at argv[1] and forks a worker that setuid()s to nobody and
 * accepts twice (a connection queued before its setuid, then a blocking accept woken
 * by a later connect); the parent connects and reads the worker's answers. */
#include <errno.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

static int client(const struct sockaddr_un *a, const char *msg) {
    int c = socket(AF_UNIX, SOCK_STREAM, 0);
    if (c < 0 || connect(c, (const struct sockaddr *)a, sizeof *a) < 0) {
        printf("connect: %s\n", strerror(errno));
        exit(1);
    }
    if (write(c, msg, strlen(msg)) < 0)
        exit(1);
    return c;
}

static void answer(int l, const char *what) {
    int a = accept(l, NULL, NULL);
    if (a < 0) {
        printf("%s: accept as uid %d: %s\n", what, (int)getuid(), strerror(errno));
        fflush(stdout);
        return;
    }
    char buf[32] = {0};
    ssize_t n = read(a, buf, sizeof buf - 1);
    if (n > 0)
        (void)!write(a, "ack", 3);
    printf("%s: accepted as uid %d: %s\n", what, (int)getuid(), n > 0 ? buf : "(nothing)");
    fflush(stdout);
    close(a);
}

int main(int argc, char **argv) {
    if (argc < 2)
        return 2;
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s", argv[1]);
    int l = socket(AF_UNIX, SOCK_STREAM, 0);
    if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof a) < 0 || listen(l, 8) < 0) {
        printf("listen: %s\n", strerror(errno));
        return 1;
    }
    char fdpath[64], target[4096] = {0};
    snprintf(fdpath, sizeof fdpath, "/proc/self/fd/%d", l);
    if (readlink(fdpath, target, sizeof target - 1) < 0)
        return 1;
    printf("where: %s\n", strstr(target, "/.udsfs/sock/") ? "udsfs" : "kernel");
    int first = client(&a, "one");
    int go[2];
    if (pipe(go) < 0)
        return 1;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        if (setgroups(0, NULL) < 0 || setgid(65534) < 0 || setuid(65534) < 0) {
            printf("setuid: %s\n", strerror(errno));
            _exit(1);
        }
        answer(l, "queued");
        (void)!write(go[1], "g", 1);
        answer(l, "blocking");
        _exit(0);
    }
    close(l);
    char g;
    if (read(go[0], &g, 1) != 1)
        return 1;
    usleep(200000);
    int second = client(&a, "two");
    int st;
    waitpid(pid, &st, 0);
    char b1[8] = {0}, b2[8] = {0};
    (void)!read(first, b1, 3);
    (void)!read(second, b2, 3);
    printf("the clients heard: %s %s\n", b1[0] ? b1 : "-", b2[0] ? b2 : "-");
    return 0;
}
