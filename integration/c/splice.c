/* splice(2) and sendfile(2) with a socket at one end, for integration/splice.sh:
 * run on kernel sockets, through `udsfs run`'s library (a dynamic build) and its
 * supervisor (a static build); a descriptor handed to a program without either
 * (`splice child FD`, exec'd with LD_PRELOAD unset). Every byte must come out
 * exactly once, in order, with the kernel's counts and errnos. Lines starting
 * "fl:" show F_GETFL/F_SETFL (the library hides and keeps O_DIRECT; the
 * supervisor does not trap fcntl); "setfl:" lines follow a bare F_SETFL(O_NONBLOCK). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static void res(const char *what, long r) {
    if (r < 0)
        printf("%s: -%s\n", what, strerrorname_np(errno));
    else
        printf("%s: %ld\n", what, r);
    fflush(stdout);
}

/* Bytes k of a stream are (k * 7 + k / 251) & 0xff: a lost, repeated or
 * reordered byte changes what follows. */
static unsigned char byte_at(long k) { return (unsigned char)(k * 7 + k / 251); }
static void fill(unsigned char *b, long from, long n) {
    for (long i = 0; i < n; i++) b[i] = byte_at(from + i);
}
/* The first offset in b[0..n) that is not the stream's byte from+i, or -1. */
static long check(const unsigned char *b, long from, long n) {
    for (long i = 0; i < n; i++)
        if (b[i] != byte_at(from + i)) return from + i;
    return -1;
}

static const char *tname(int ty) {
    return ty == SOCK_STREAM ? "stream" : ty == SOCK_SEQPACKET ? "seqpacket" : "dgram";
}

/* Drains a pipe's n bytes and says whether they are the stream's from `from`. */
static void drain(const char *what, int p, long from, long n) {
    unsigned char buf[4096];
    long got = 0, bad = -1;
    while (got < n) {
        long r = read(p, buf, sizeof buf < (size_t)(n - got) ? sizeof buf : (size_t)(n - got));
        if (r <= 0) break;
        long c = check(buf, from + got, r);
        if (bad < 0) bad = c;
        got += r;
    }
    printf("%s: %ld bytes from the pipe, %s\n", what, got, bad < 0 ? "in order" : "WRONG BYTES");
    fflush(stdout);
}

/* recv with MSG_DONTWAIT, checked against the stream from `from`. */
static long recv_rest(const char *what, int s, long from) {
    unsigned char buf[4096];
    char w[128];
    long r = recv(s, buf, sizeof buf, MSG_DONTWAIT);
    snprintf(w, sizeof w, "%s recv", what);
    res(w, r);
    if (r > 0 && check(buf, from, r) >= 0) printf("%s: WRONG BYTES\n", what);
    return r;
}

/* splice socket -> pipe with short lengths, then recv, for one type. */
static void short_splices(int ty, int setfl_bare) {
    int sv[2], p[2];
    char w[128];
    unsigned char buf[100];
    const char *t = tname(ty);
    const char *pre = setfl_bare ? "setfl: " : "";
    if (socketpair(AF_UNIX, ty, 0, sv) < 0 || pipe(p) < 0) { perror("socketpair"); exit(1); }
    if (setfl_bare) {
        /* What a program that does not read first does (the kernel would clear
         * a flag the program did not give). */
        snprintf(w, sizeof w, "%s%s F_SETFL(O_NONBLOCK)", pre, t);
        res(w, fcntl(sv[0], F_SETFL, O_NONBLOCK));
    }
    fill(buf, 0, 100);
    snprintf(w, sizeof w, "%s%s send 100", pre, t);
    res(w, send(sv[1], buf, 100, 0));
    snprintf(w, sizeof w, "%s%s splice 10 to a pipe", pre, t);
    long r = splice(sv[0], NULL, p[1], NULL, 10, SPLICE_F_NONBLOCK);
    res(w, r);
    if (r > 0) { snprintf(w, sizeof w, "%s%s splice 10", pre, t); drain(w, p[0], 0, r); }
    snprintf(w, sizeof w, "%s%s after the splice", pre, t);
    long from = r > 0 ? r : 0;
    long g = recv_rest(w, sv[0], from);
    fill(buf, 100, 50);
    snprintf(w, sizeof w, "%s%s send 50 more", pre, t);
    res(w, send(sv[1], buf, 50, 0));
    snprintf(w, sizeof w, "%s%s splice 100 to a pipe", pre, t);
    r = splice(sv[0], NULL, p[1], NULL, 100, SPLICE_F_NONBLOCK);
    res(w, r);
    if (r > 0) { snprintf(w, sizeof w, "%s%s splice 100", pre, t); drain(w, p[0], 100, r); }
    snprintf(w, sizeof w, "%s%s after the second splice", pre, t);
    recv_rest(w, sv[0], 100);
    /* SPLICE_F_NONBLOCK: Linux's stream sockets do not wait; seqpacket and
     * datagram ones (copy_splice_read) wait: an alarm ends the wait (EINTR). */
    snprintf(w, sizeof w, "%s%s empty: splice SPLICE_F_NONBLOCK", pre, t);
    alarm(1);
    res(w, splice(sv[0], NULL, p[1], NULL, 100, SPLICE_F_NONBLOCK));
    alarm(0);
    (void)g;
    /* pipe -> socket */
    fill(buf, 0, 64);
    if (write(p[1], buf, 64) != 64) { perror("write pipe"); exit(1); }
    snprintf(w, sizeof w, "%s%s splice 64 from a pipe", pre, t);
    res(w, splice(p[0], NULL, sv[1], NULL, 64, 0));
    snprintf(w, sizeof w, "%s%s after the pipe's splice", pre, t);
    recv_rest(w, sv[0], 0);
    /* sendfile with the socket as in_fd, a regular file as out_fd */
    char tmpl[] = "/tmp/udsfs-splice-XXXXXX";
    int f = mkstemp(tmpl);
    if (f < 0) { perror("mkstemp"); exit(1); }
    unlink(tmpl);
    fill(buf, 0, 100);
    send(sv[1], buf, 100, 0);
    snprintf(w, sizeof w, "%s%s sendfile 100 to a file", pre, t);
    res(w, sendfile(f, sv[0], NULL, 100));
    snprintf(w, sizeof w, "%s%s after sendfile", pre, t);
    recv_rest(w, sv[0], 0);
    /* sendfile with the socket as out_fd */
    if (pwrite(f, buf, 100, 0) != 100) { perror("pwrite"); exit(1); }
    off_t off = 0;
    snprintf(w, sizeof w, "%s%s sendfile 100 from a file", pre, t);
    res(w, sendfile(sv[1], f, &off, 100));
    snprintf(w, sizeof w, "%s%s after sendfile from a file", pre, t);
    recv_rest(w, sv[0], 0);
    close(f);
    close(sv[0]); close(sv[1]); close(p[0]); close(p[1]);
}

/* 4 MiB from a writer process through splice socket -> pipe (as Go's io.Copy
 * from a UnixConn): every byte exactly once. */
static void big(void) {
    const long total = 4 << 20;
    int sv[2], p[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0 || pipe(p) < 0) { perror("socketpair"); exit(1); }
    pid_t c = fork();
    if (c == 0) {
        close(sv[0]);
        static unsigned char buf[65536];
        long sent = 0;
        while (sent < total) {
            long n = 1 + (sent * 31) % 65536;  /* odd pieces */
            if (n > total - sent) n = total - sent;
            fill(buf, sent, n);
            long r = write(sv[1], buf, n);
            if (r <= 0) _exit(1);
            sent += r;
        }
        _exit(0);
    }
    close(sv[1]);
    long got = 0, bad = -1;
    unsigned char buf[65536];
    alarm(20); /* a splice that waits for bytes already taken ends (EINTR) */
    for (;;) {
        long r = splice(sv[0], NULL, p[1], NULL, 65536, 0);
        if (r < 0) { res("stream 4 MiB splice", r); break; }
        if (r == 0) break;
        long left = r;
        while (left > 0) {
            long n = read(p[0], buf, left);
            if (n <= 0) break;
            long b = check(buf, got, n);
            if (bad < 0) bad = b;
            got += n;
            left -= n;
        }
    }
    alarm(0);
    kill(c, SIGKILL);
    int st;
    waitpid(c, &st, 0);
    printf("stream 4 MiB through splice: %ld bytes, %s\n", got, bad < 0 ? "in order" : "WRONG BYTES");
    fflush(stdout);
    close(sv[0]); close(p[0]); close(p[1]);
}

/* The child: splice 10 from inherited socket FD, then read(2) the rest. */
static int child(int fd) {
    int p[2];
    unsigned char buf[4096];
    if (pipe(p) < 0) return 1;
    long r = splice(fd, NULL, p[1], NULL, 10, SPLICE_F_NONBLOCK);
    res("handed: splice 10 to a pipe", r);
    if (r > 0) drain("handed: splice 10", p[0], 0, r);
    alarm(5); /* a read that waits for bytes already taken ends (EINTR) */
    long n = read(fd, buf, sizeof buf);
    res("handed: read", n);
    alarm(0);
    if (n > 0 && check(buf, r > 0 ? r : 0, n) >= 0) printf("handed: WRONG BYTES\n");
    return 0;
}

/* A descriptor handed to a program run without the library (env -u LD_PRELOAD). */
static void handed(const char *self) {
    int sv[2];
    unsigned char buf[100];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0) { perror("socketpair"); exit(1); }
    fill(buf, 0, 100);
    send(sv[1], buf, 100, 0);
    pid_t c = fork();
    if (c == 0) {
        char fd[16];
        snprintf(fd, sizeof fd, "%d", sv[0]);
        execl("/usr/bin/env", "env", "-u", "LD_PRELOAD", self, "child", fd, (char *)NULL);
        _exit(127);
    }
    int st;
    waitpid(c, &st, 0);
    printf("handed: child status %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    fflush(stdout);
    close(sv[0]); close(sv[1]);
}

static void on_alarm(int sig) { (void)sig; }

static void flags(void) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0) { perror("socketpair"); exit(1); }
    printf("fl: F_GETFL 0x%x\n", fcntl(sv[0], F_GETFL));
    res("fl: F_SETFL(O_DIRECT)", fcntl(sv[0], F_SETFL, O_DIRECT));
    printf("fl: F_GETFL 0x%x\n", fcntl(sv[0], F_GETFL));
    res("fl: F_SETFL(F_GETFL | O_NONBLOCK)", fcntl(sv[0], F_SETFL, fcntl(sv[0], F_GETFL) | O_NONBLOCK));
    printf("fl: F_GETFL 0x%x\n", fcntl(sv[0], F_GETFL));
    res("fl: F_SETFL(0)", fcntl(sv[0], F_SETFL, 0));
    printf("fl: F_GETFL 0x%x\n", fcntl(sv[0], F_GETFL));
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
    printf("fl: socket(SOCK_NONBLOCK) F_GETFL 0x%x\n", fcntl(s, F_GETFL));
    fflush(stdout);
    close(s); close(sv[0]); close(sv[1]);
}

int main(int argc, char **argv) {
    signal(SIGPIPE, SIG_IGN);
    struct sigaction sa = {0};
    sa.sa_handler = on_alarm; /* no SA_RESTART: a wait ends with EINTR */
    sigaction(SIGALRM, &sa, NULL);
    if (argc == 3 && strcmp(argv[1], "child") == 0) return child(atoi(argv[2]));
    flags();
    int tys[] = {SOCK_STREAM, SOCK_SEQPACKET, SOCK_DGRAM};
    for (int i = 0; i < 3; i++) short_splices(tys[i], 0);
    for (int i = 0; i < 3; i++) short_splices(tys[i], 1);
    big();
    handed(argv[0][0] == '/' ? argv[0] : realpath(argv[0], NULL));
    printf("done\n");
    return 0;
}
