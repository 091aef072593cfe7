/* adversarial_lanes4.c: the programs of adversarial_lanes4.sh, the same binary on kernel
 * sockets and through `udsfs run` (each prints what it did and what it got; the lane's
 * word, "lane direct" on udsfs, "lane none" on the kernel, comes last):
 *   sigclose RESTART REUSE  a laned socketpair (a byte each way); the main thread's
 *                         blocking read on its first end; SIGALRM at 300 ms whose handler
 *                         (SA_RESTART when RESTART is 1) closes that end, or (REUSE 1)
 *                         puts a pipe holding 'P' at its number with dup2; a thread
 *                         writes 'X' to the second end at 1.2 s. Linux: EINTR without
 *                         SA_RESTART; with it the read is made again on the number:
 *                         EBADF, or the pipe's 'P'.
 *   forkcall EXEC         a laned socketpair; a thread's blocking read on its first end;
 *                         the main thread forks, the child closes both ends and exits
 *                         (EXEC 1: execs /bin/true instead; EXEC 2: writes 'C' to the
 *                         second end, which the parent claimed, and exits); then the
 *                         parent writes 'X' to the second end (not with EXEC 2): the
 *                         thread's read gets it (or 'C', at once); 20 ping-pongs
 *                         after; once both ends are closed, the eventfds left.
 *   churn N LIMIT         RLIMIT_NOFILE LIMIT; a server (listening on PATH $L4_PATH)
 *                         accepts N connections from a forked client, one at a time, a
 *                         byte each way each, closed; then its eventfds, and its opens of
 *                         /dev/null until refused.
 *   acceptopen N          accept of N connections (a forked client; each sends its
 *                         number and 200 bytes derived from it, the server checks them
 *                         and answers the number) while two threads open pipes, check
 *                         that each number still names their pipe (a byte through it)
 *                         and close it, and a third makes laned socketpairs and checks a
 *                         ping-pong through each: bytes wrong, numbers lost.
 *   passclose             three laned socketpairs; their first ends sent in one SCM_RIGHTS
 *                         message over another socketpair and closed in the sender, a
 *                         hole made below; received: at the three lowest free numbers in
 *                         order (as Linux's), each carrying bytes both ways to its own
 *                         peer; once all are closed, the eventfds left.
 *   dupover               a thread's blocking read on a laned end when the main thread
 *                         dup2s another laned end onto its number: bytes through the
 *                         number reach the other connection; the old read (Linux: the
 *                         byte then written to its peer, its file still open under it).
 *   inetd                 (L4_PATH) an accepted laned connection (a ping-pong on its
 *                         number first) put at descriptors 0 and 1 (dup2) and closed,
 *                         then echoed through 0 and 1: 20 ping-pongs and 64 KiB.
 *   recvedge LIMIT HELD   RLIMIT_NOFILE LIMIT; three laned ends in one SCM_RIGHTS message,
 *                         closed in the sender, received with exactly three numbers free:
 *                         all three, at those numbers in order, each to its own peer;
 *                         numbers free once all are closed (HELD 1: once the received
 *                         ends are closed, their peers still open: the lanes are down).
 *   evrace LIMIT PAIRS    RLIMIT_NOFILE LIMIT; PAIRS socketpairs (3 ping-pongs each, laned,
 *                         then closed) while a thread puts /dev/null at 3/4 of LIMIT (the
 *                         lanes' eventfds' floor) with F_DUPFD and closes it, over and
 *                         over: eventfds left once all are closed.
 *   epdup HOW             a laned end registered in an epoll set, a dup of it made, the
 *                         registered number closed (HOW 1: a pipe then takes the number;
 *                         2: a pipe put at it with dup2; 3: close_range; 4: no dup, the
 *                         file held by a forked child): an EPOLL_CTL_MOD by that number,
 *                         epoll_wait's events for the peer's byte, the dup's read, and
 *                         the events once the dup is closed too (4: the child exited).
 *   sigclosew RESTART     a laned socketpair whose peer never reads; SIGALRM at 300 ms
 *                         whose handler (SA_RESTART when RESTART is 1) closes the first
 *                         end under the main thread's 1 MiB write to it: its result.
 *   flags                 (L4_PATH) socketpair, accept4 and a received end (SCM_RIGHTS),
 *                         each with and without SOCK_CLOEXEC / MSG_CMSG_CLOEXEC and
 *                         SOCK_NONBLOCK: each descriptor's FD_CLOEXEC, O_NONBLOCK, number.
 *   emfile LIMIT          RLIMIT_NOFILE LIMIT; a listener, a connection queued from a
 *                         forked child; /dev/null opened until one number is left; then
 *                         accept: its result (Linux: a socket at the last number), a
 *                         byte each way through it; then socketpair with none left.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lanes_probe.h"
#include "../tests/conformance/programs/programs.h" /* send_fds, recv_fds */

static const char *err(ssize_t r, int e) { return r < 0 ? strerrorname_np(e) : "-"; }
static const char *about(double t) { return t < 0.8 ? "at once (<0.8 s)" : t < 2 ? "at the byte (0.8-2 s)" : "late (>2 s)"; }

/* ---------------------------------------------------------------- sigclose */
static int sc_fd, sc_pipe = -1;
static void on_alrm(int s) {
    (void)s;
    if (sc_pipe >= 0) dup2(sc_pipe, sc_fd); else close(sc_fd);
}
static void *late_x(void *p) {
    usleep(1200000);
    if (write(*(int *)p, "X", 1) != 1) perror("late write");
    return NULL;
}
static int sigclose(int restart, int reuse) {
    int sv[2], pp[2];
    char s[32], b = 0;
    laned_stream_pair(sv);
    lane_of(sv[0], s, sizeof s);
    sc_fd = sv[0];
    if (reuse) {
        if (pipe(pp) < 0) { perror("pipe"); return 2; }
        if (write(pp[1], "P", 1) != 1) return 2;
        sc_pipe = pp[0];
    }
    struct sigaction sa = {0};
    sa.sa_handler = on_alrm;
    sa.sa_flags = restart ? SA_RESTART : 0;
    sigaction(SIGALRM, &sa, NULL);
    pthread_t t;
    pthread_create(&t, NULL, late_x, &sv[1]);
    struct itimerval it = {{0, 0}, {0, 300000}};
    double t0 = now();
    setitimer(ITIMER_REAL, &it, NULL);
    ssize_t r = read(sv[0], &b, 1);
    int e = errno;
    double took = now() - t0;
    pthread_join(t, NULL);
    printf("read: %zd %s byte '%c' %s; lane %s\n", r, err(r, e), r > 0 ? b : '-', about(took), s);
    return 0;
}

/* ---------------------------------------------------------------- forkcall */
static void *read_one(void *p) {
    int fd = *(int *)p;
    static char b;
    ssize_t r = read(fd, &b, 1);
    static char out[64];
    snprintf(out, sizeof out, "%zd %s '%c'", r, err(r, errno), r > 0 ? b : '-');
    return out;
}
static int forkcall(int ex) {
    int sv[2];
    char s[32], b;
    pthread_t t = thread_on_laned_pair(sv, s, read_one, 200000);
    pid_t ch = fork();
    if (ch == 0) {
        if (ex == 2) _exit(write(sv[1], "C", 1) == 1 ? 0 : 1);
        close(sv[0]);
        close(sv[1]);
        if (ex) execl("/bin/true", "true", (char *)NULL);
        _exit(0);
    }
    int st;
    waitpid(ch, &st, 0);
    usleep(200000);
    double t0 = now();
    if (ex != 2 && write(sv[1], "X", 1) != 1) perror("write X");
    void *got;
    pthread_join(t, &got);
    double took = now() - t0;
    int pongs = 0;
    for (int i = 0; i < 20; i++) {
        if (write(sv[1], "p", 1) != 1 || read(sv[0], &b, 1) != 1 || write(sv[0], "q", 1) != 1 ||
            read(sv[1], &b, 1) != 1) break;
        pongs++;
    }
    close(sv[0]);
    close(sv[1]);
    usleep(100000);
    printf("child %s; the thread's read: %s %s; ping-pongs after: %d of 20; eventfds left: %d; lane %s\n",
           WIFEXITED(st) && !WEXITSTATUS(st) ? "exited 0" : "failed", (char *)got,
           took < 1 ? "in time" : "late", pongs, eventfds(), s);
    return 0;
}

/* ---------------------------------------------------------------- churn */
static int listener(const char *path) {
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
    unlink(path);
    int l = socket(AF_UNIX, SOCK_STREAM, 0);
    if (l < 0 || bind(l, (void *)&a, sizeof a) < 0 || listen(l, 64) < 0) { perror("listener"); exit(2); }
    return l;
}
static int dial(const char *path) {
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
    int c = socket(AF_UNIX, SOCK_STREAM, 0);
    if (c < 0 || connect(c, (void *)&a, sizeof a) < 0) return -1;
    return c;
}
static int opens_left(void) {
    int k = 0, fds[70000], n = 0;
    for (;;) {
        int f = open("/dev/null", O_RDONLY);
        if (f < 0) break;
        fds[n++] = f;
        k++;
    }
    while (n) close(fds[--n]);
    return k;
}
static int churn(const char *path, int n, int lim) {
    limit(lim);
    int l = listener(path);
    pid_t ch = fork();
    if (ch == 0) {
        int laned = 0, bad = 0;
        char s[32], b;
        for (int i = 0; i < n; i++) {
            int c = dial(path);
            if (c < 0 || read(c, &b, 1) != 1 || write(c, "c", 1) != 1 || read(c, &b, 1) != 1) {
                bad++;
                if (c >= 0) close(c);
                continue;
            }
            if (i < 50 && !strcmp(lane_of(c, s, sizeof s), "direct")) laned++;
            if (write(c, "c", 1) != 1) bad++;
            close(c);
        }
        printf("client: %d connections, %d failed\n", n, bad);
        fflush(stdout);
        _exit(laned == 50 ? 0 : laned ? 3 : 4);
    }
    int bad = 0, hi = 0;
    char b;
    for (int i = 0; i < n; i++) {
        int c = accept(l, NULL, NULL);
        if (c < 0) { bad++; printf("accept: %s\n", strerrorname_np(errno)); break; }
        if (c > hi) hi = c;
        if (write(c, "s", 1) != 1 || read(c, &b, 1) != 1 || write(c, "s", 1) != 1 || read(c, &b, 1) != 1) bad++;
        close(c);
    }
    int st;
    waitpid(ch, &st, 0);
    close(l);
    usleep(100000);
    printf("server: %d accepted, %d failed, highest number %d; eventfds left: %d; opens of /dev/null: %d; lane %s\n",
           n, bad, hi, eventfds(), opens_left(),
           !WIFEXITED(st) ? "(client failed)" : !WEXITSTATUS(st) ? "direct" : WEXITSTATUS(st) == 3 ? "some" : "none");
    return 0;
}

/* ---------------------------------------------------------------- acceptopen */
static volatile int ao_stop;
static int ao_lost, ao_pairs_bad, ao_pairs;
static pthread_mutex_t ao_mu = PTHREAD_MUTEX_INITIALIZER;
static void *ao_pipes(void *x) {
    (void)x;
    while (!ao_stop) {
        int p[2];
        if (pipe(p) < 0) continue;
        struct stat a, b2;
        fstat(p[0], &a);
        usleep(50);
        char c = 'z', d = 0;
        int ok = fstat(p[0], &b2) == 0 && a.st_ino == b2.st_ino && write(p[1], &c, 1) == 1 &&
                 read(p[0], &d, 1) == 1 && d == 'z';
        if (!ok) { pthread_mutex_lock(&ao_mu); ao_lost++; pthread_mutex_unlock(&ao_mu); }
        close(p[0]);
        close(p[1]);
    }
    return NULL;
}
static void *ao_socks(void *x) {
    (void)x;
    while (!ao_stop) {
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0) continue;
        int ok = 1;
        for (int i = 0; i < 5 && ok; i++) {
            char b = 0, c = (char)('0' + i);
            ok = write(sv[0], &c, 1) == 1 && read(sv[1], &b, 1) == 1 && b == c && write(sv[1], &c, 1) == 1 &&
                 read(sv[0], &b, 1) == 1 && b == c;
        }
        pthread_mutex_lock(&ao_mu);
        ao_pairs++;
        if (!ok) ao_pairs_bad++;
        pthread_mutex_unlock(&ao_mu);
        close(sv[0]);
        close(sv[1]);
    }
    return NULL;
}
static int acceptopen(const char *path, int n) {
    int l = listener(path);
    pid_t ch = fork();
    if (ch == 0) {
        int bad = 0;
        for (int i = 0; i < n; i++) {
            int c = dial(path);
            unsigned char m[204];
            memcpy(m, &i, 4);
            for (int k = 0; k < 200; k++) m[4 + k] = (unsigned char)(i * 7 + k);
            int back = -1;
            char h;
            if (c < 0 || read(c, &h, 1) != 1 || write(c, m, sizeof m) != sizeof m || read(c, &back, 4) != 4 || back != i) bad++;
            if (c >= 0) close(c);
        }
        printf("client: %d connections, %d wrong answers\n", n, bad);
        fflush(stdout);
        _exit(0);
    }
    pthread_t t[3];
    pthread_create(&t[0], NULL, ao_pipes, NULL);
    pthread_create(&t[1], NULL, ao_pipes, NULL);
    pthread_create(&t[2], NULL, ao_socks, NULL);
    int wrong = 0, fails = 0, laned = 0;
    char s[32];
    for (int i = 0; i < n; i++) {
        int c = accept(l, NULL, NULL);
        if (c < 0) { fails++; continue; }
        if (write(c, "h", 1) != 1) fails++;
        unsigned char m[204];
        size_t got = 0;
        while (got < sizeof m) {
            ssize_t r = read(c, m + got, sizeof m - got);
            if (r <= 0) break;
            got += r;
        }
        int id = -1;
        if (got == sizeof m) memcpy(&id, m, 4);
        int ok = got == sizeof m && id >= 0;
        for (int k = 0; ok && k < 200; k++) ok = m[4 + k] == (unsigned char)(id * 7 + k);
        if (!ok) wrong++;
        if (i < 20 && !strcmp(lane_of(c, s, sizeof s), "direct")) laned++;
        if (write(c, &id, 4) != 4) fails++;
        close(c);
    }
    int st;
    waitpid(ch, &st, 0);
    ao_stop = 1;
    for (int i = 0; i < 3; i++) pthread_join(t[i], NULL);
    printf("server: %d accepted, %d failed, %d with wrong bytes; the pipe threads' numbers lost: %d; "
           "socketpairs: %s, %d bad; lane %s\n",
           n, fails, wrong, ao_lost, ao_pairs > 0 ? "some" : "none", ao_pairs_bad,
           laned == 20 ? "direct" : laned ? "some" : "none");
    return 0;
}

/* ---------------------------------------------------------------- passclose */
static int passclose(void) {
    int p[3][2], cs[2], r[3] = {-1, -1, -1};
    char s[32];
    for (int i = 0; i < 3; i++) laned_stream_pair(p[i]);
    lane_of(p[0][0], s, sizeof s);
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, cs) < 0) { perror("socketpair"); return 2; }
    int hole = open("/dev/null", O_RDONLY);
    int ends[3] = {p[0][0], p[1][0], p[2][0]}, nr, mflags;
    char x;
    if (send_fds(cs[0], "x", 1, ends, 3) != 1) { perror("sendmsg"); return 2; }
    for (int i = 0; i < 3; i++) close(p[i][0]);
    close(hole);
    int want[3], k = 0;
    for (int n = 0; k < 3; n++) if (fcntl(n, F_GETFD) < 0) want[k++] = n;
    if (recv_fds(cs[1], &x, 1, 3, r, &nr, &mflags) != 1) { perror("recvmsg"); return 2; }
    int lowest = 1, moved = 0;
    for (int i = 0; i < 3; i++) lowest &= r[i] == want[i];
    for (int i = 0; i < 3; i++) {
        char a = (char)('A' + i), b = 0;
        if (write(r[i], &a, 1) == 1 && read(p[i][1], &b, 1) == 1 && b == a && write(p[i][1], &a, 1) == 1 &&
            read(r[i], &b, 1) == 1 && b == a)
            moved++;
    }
    for (int i = 0; i < 3; i++) { close(r[i]); close(p[i][1]); }
    close(cs[0]);
    close(cs[1]);
    usleep(100000);
    printf("received ends at the lowest free numbers in order: %s; bytes both ways to their own peers: %d of 3; "
           "eventfds left: %d; lane %s\n", lowest ? "yes" : "no", moved, eventfds(), s);
    return 0;
}

/* ---------------------------------------------------------------- dupover */
static int dupover(void) {
    int p[2], q[2];
    char s[32], b = 0;
    laned_stream_pair(p);
    laned_stream_pair(q);
    lane_of(p[0], s, sizeof s);
    pthread_t t;
    pthread_create(&t, NULL, read_one, &p[0]);
    usleep(200000);
    int num = p[0];
    int r = dup2(q[0], num);
    usleep(100000);
    /* the number names q's socket now: bytes through it reach q's peer and back */
    int qok = write(q[1], "q", 1) == 1 && read(num, &b, 1) == 1 && b == 'q' && write(num, "Q", 1) == 1 &&
              read(q[1], &b, 1) == 1 && b == 'Q';
    int pw = write(p[1], "p", 1) == 1;
    void *got;
    pthread_join(t, &got);
    close(num);
    close(q[0]);
    close(p[1]);
    close(q[1]);
    usleep(100000);
    /* the old read's byte: Linux 'p' (its file is still p's); an error is the library's
     * answer to a close under a call (closerace); only q's byte would be wrong */
    const char *g = got;
    printf("dup2 of another laned end onto a laned end under a blocking read: %d; through the number after: %s; "
           "the old read: %s; p's byte written: %s; eventfds left: %d; lane %s\n",
           r == num ? 0 : -1, qok ? "q's connection" : "wrong", strstr(g, "'q'") ? "q's byte (wrong)" : strstr(g, "'p'") ? "p's byte" : "an error",
           pw ? "yes" : "no", eventfds(), s);
    return 0;
}

/* ---------------------------------------------------------------- inetd */
static int inetd(const char *path) {
    int l = listener(path);
    pid_t ch = fork();
    if (ch == 0) {
        int c = dial(path), ok = 0;
        static char blk[65536];
        char b;
        for (int i = 0; c >= 0 && i < 20; i++)
            if (write(c, "i", 1) == 1 && read(c, &b, 1) == 1 && b == 'i') ok++;
        memset(blk, 'y', sizeof blk);
        size_t got = 0;
        if (c >= 0 && write(c, blk, sizeof blk) == sizeof blk)
            while (got < sizeof blk) {
                ssize_t k = read(c, blk, sizeof blk - got);
                if (k <= 0) break;
                got += k;
            }
        printf("client: %d of 20 ping-pongs, %zu of 65536 bytes back\n", ok, got);
        fflush(stdout);
        _exit(0);
    }
    int c = accept(l, NULL, NULL);
    char s[32], b;
    /* the first ping-pong on the accepted number: the lane claimed there */
    if (c < 0 || read(c, &b, 1) != 1 || write(c, &b, 1) != 1) { perror("inetd first"); return 2; }
    lane_of(c, s, sizeof s);
    int saved0 = dup(0), saved1 = dup(1);
    dup2(c, 0);
    dup2(c, 1);
    close(c);
    static char buf[65536];
    ssize_t k;
    long echoed = 0;
    while ((k = read(0, buf, sizeof buf)) > 0) {
        if (write(1, buf, k) != k) break;
        echoed += k;
        if (echoed >= 19 + 65536) break;
    }
    dup2(saved0, 0);
    dup2(saved1, 1);
    int st;
    waitpid(ch, &st, 0);
    printf("server: echoed %ld bytes through descriptors 0 and 1; lane %s\n", echoed, s);
    return 0;
}

/* ---------------------------------------------------------------- recvedge */
static int recvedge(int lim, int held) {
    int p[3][2], cs[2], r[3] = {-1, -1, -1};
    char s[32];
    limit(lim);
    for (int i = 0; i < 3; i++) laned_stream_pair(p[i]);
    lane_of(p[0][0], s, sizeof s);
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, cs) < 0) { perror("socketpair"); return 2; }
    int ends[3] = {p[0][0], p[1][0], p[2][0]};
    if (send_fds(cs[0], "x", 1, ends, 3) != 1) { perror("sendmsg"); return 2; }
    for (int i = 0; i < 3; i++) close(p[i][0]);
    /* fill every number but three */
    int fds[4096], n = 0;
    for (;;) {
        int f = open("/dev/null", O_RDONLY);
        if (f < 0) break;
        fds[n++] = f;
    }
    for (int i = 0; i < 3 && n; i++) close(fds[--n]);
    int want[3], k = 0;
    for (int i = 0; i < lim && k < 3; i++) if (fcntl(i, F_GETFD) < 0) want[k++] = i;
    int nr, mflags = 0;
    char x;
    ssize_t got = recv_fds(cs[1], &x, 1, 3, r, &nr, &mflags);
    int e = errno;
    int lowest = nr == 3, moved = 0;
    for (int i = 0; i < nr; i++) lowest &= r[i] == want[i];
    for (int i = 0; i < nr; i++) {
        char a = (char)('A' + i), b = 0;
        if (write(r[i], &a, 1) == 1 && read(p[i][1], &b, 1) == 1 && b == a) moved++;
    }
    while (n) close(fds[--n]);
    for (int i = 0; i < nr; i++) close(r[i]);
    if (!held) {
        for (int i = 0; i < 3; i++) close(p[i][1]);
        close(cs[0]);
        close(cs[1]);
    }
    usleep(100000);
    int evs = eventfds(), free_after = opens_left();
    printf("recvmsg of three laned ends with three numbers free: %zd %s, %d received%s, at the lowest free in order: %s; "
           "bytes to their own peers: %d; numbers free once %s: %d, eventfds held: %d; lane %s\n",
           got, err(got, e), nr, mflags & MSG_CTRUNC ? " (MSG_CTRUNC)" : "", lowest ? "yes" : "no", moved,
           held ? "the received ends are closed (their peers open)" : "all are closed", free_after, evs, s);
    return 0;
}

/* ---------------------------------------------------------------- evrace */
static volatile int ev_stop, ev_done;
static int ev_lim;
static void *ev_closer(void *x) {
    int null = *(int *)x, n = 0;
    while (!ev_stop) {
        int f = fcntl(null, F_DUPFD, ev_lim * 3 / 4);
        if (f >= 0) { close(f); ev_done = ++n; }
    }
    return (void *)(long)n;
}
static int evrace(int lim, int pairs) {
    ev_lim = lim;
    limit(lim);
    int null = open("/dev/null", O_RDONLY);
    pthread_t t;
    pthread_create(&t, NULL, ev_closer, &null);
    char s[32] = "none";
    int bad = 0;
    for (int i = 0; i < pairs; i++) {
        int sv[2];
        char b = 0;
        if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0) { bad++; continue; }
        struct timeval tv = {2, 0};
        setsockopt(sv[1], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        for (int k = 0; k < 3; k++)
            if (write(sv[0], "e", 1) != 1 || read(sv[1], &b, 1) != 1 || write(sv[1], "f", 1) != 1 ||
                read(sv[0], &b, 1) != 1) { bad++; break; }
        if (i == 0) lane_of(sv[0], s, sizeof s);
        close(sv[0]);
        close(sv[1]);
    }
    /* (the closer's count is compared: on a loaded machine the kernel's
     * pairs could end before the closer ran much; it runs on until 1000) */
    while (ev_done <= 1000) sched_yield();
    ev_stop = 1;
    void *n;
    pthread_join(t, &n);
    close(null);
    usleep(100000);
    printf("%d socketpairs (3 ping-pongs each) while a thread put /dev/null at 3/4 of RLIMIT_NOFILE %d and closed it "
           "(%s times): %d failed; eventfds left: %d; lane %s\n", pairs, lim, (long)n > 1000 ? "over 1000" : "few", bad,
           eventfds(), s);
    return 0;
}

/* ---------------------------------------------------------------- flags */
static void fl(const char *what, int fd) {
    int d = fcntl(fd, F_GETFD), f = fcntl(fd, F_GETFL);
    printf("%s: %s%s; ", what, d >= 0 && (d & FD_CLOEXEC) ? "cloexec" : "-",
           f >= 0 && (f & O_NONBLOCK) ? " nonblock" : "");
}
static int flags(const char *path) {
    int l = listener(path);
    for (int v = 0; v < 4; v++) {
        int cl = v & 1 ? SOCK_CLOEXEC : 0, nb = v & 2 ? SOCK_NONBLOCK : 0;
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM | cl | nb, 0, sv) < 0) { perror("socketpair"); return 2; }
        char w[64];
        snprintf(w, sizeof w, "socketpair %d", v);
        fl(w, sv[0]);
        fl(w, sv[1]);
        int c = dial(path);
        int a = accept4(l, NULL, NULL, cl | nb);
        snprintf(w, sizeof w, "accept4 %d", v);
        fl(w, a);
        /* a received end, MSG_CMSG_CLOEXEC as v says */
        int r = -1, nr, mflags;
        char x;
        if (send_fds(sv[0], "x", 1, &a, 1) == 1) recv_fds_flags(sv[1], &x, 1, 1, v & 1 ? MSG_CMSG_CLOEXEC : 0, &r, &nr, &mflags);
        snprintf(w, sizeof w, "received %d", v);
        fl(w, r);
        printf("numbers %d %d %d %d %d\n", sv[0], sv[1], c, a, r);
        close(sv[0]);
        close(sv[1]);
        close(c);
        close(a);
        close(r);
    }
    printf("lane none\n");
    return 0;
}

/* ---------------------------------------------------------------- epdup */
static int epdup(int how) {
    int sv[2];
    char s[32], b;
    laned_stream_pair(sv);
    lane_of(sv[0], s, sizeof s);
    int e = epoll_create1(0);
    int d = -1, gate[2] = {-1, -1};
    pid_t ch = -1;
    if (how == 4) {
        /* the file's other holder is a forked child (it waits on a pipe, then exits) */
        if (pipe(gate) < 0) return 2;
        ch = fork();
        if (ch == 0) {
            close(gate[1]);
            if (read(gate[0], &b, 1) < 0) {}
            _exit(0);
        }
        close(gate[0]);
    } else {
        d = dup(sv[0]);
    }
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = 42};
    if (epoll_ctl(e, EPOLL_CTL_ADD, sv[0], &ev) < 0) { perror("epoll_ctl"); return 2; }
    /* how 0: the registered number closed (its file open at the dup); 1: also reused by a
     * pipe; 2: a pipe put at it (dup2); 3: closed by close_range; 4: closed, the file open
     * in a forked child */
    int pp[2] = {-1, -1};
    if (how >= 1 && how <= 2 && pipe(pp) < 0) return 2;
    if (how == 2) {
        dup2(pp[0], sv[0]);
    } else if (how == 3) {
        if (syscall(SYS_close_range, sv[0], sv[0], 0) < 0) perror("close_range");
    } else {
        close(sv[0]);
    }
    if (how == 1 && pipe(pp) < 0) return 2;
    /* by the closed (or reused) number, the item is not reached */
    int del = epoll_ctl(e, EPOLL_CTL_MOD, sv[0], &ev), del_e = errno;
    if (write(sv[1], "w", 1) != 1) perror("write");
    struct epoll_event out[4];
    int n = epoll_wait(e, out, 4, 500);
    int got = n > 0 ? (int)out[0].data.u64 : -1;
    ssize_t r = -2;
    if (how == 4) {
        /* the child goes: the file with it */
        close(gate[1]);
        waitpid(ch, NULL, 0);
        usleep(100000);
    } else {
        r = read(d, &b, 1);
        /* the registration is the file's: taken out once the dup closes too */
        close(d);
    }
    if (write(sv[1], "v", 1) < 0) {}
    int n2 = epoll_wait(e, out, 4, 200);
    static const char *hows[] = {"", " and reused by a pipe", " by a dup2 of a pipe onto it", " by close_range",
                                 ""};
    printf("epoll set with a laned end registered, its number closed%s, the file open at %s: MOD by that number %s; "
           "%d event(s) (data %d) for the peer's byte; the dup reads %zd; after %s: %d event(s); lane %s\n",
           hows[how], how == 4 ? "a forked child" : "a dup", err(del, del_e), n, got, r,
           how == 4 ? "the child's exit" : "the dup's close", n2, s);
    return 0;
}

/* ---------------------------------------------------------------- sigclosew */
static int sigclosew(int restart) {
    int sv[2];
    char s[32];
    laned_stream_pair(sv);
    lane_of(sv[0], s, sizeof s);
    sc_fd = sv[0];
    sc_pipe = -1;
    struct sigaction sa = {0};
    sa.sa_handler = on_alrm;
    sa.sa_flags = restart ? SA_RESTART : 0;
    sigaction(SIGALRM, &sa, NULL);
    static char big[1 << 20];
    struct itimerval it = {{0, 0}, {0, 300000}};
    double t0 = now();
    setitimer(ITIMER_REAL, &it, NULL);
    ssize_t r = write(sv[0], big, sizeof big);
    int e = errno;
    double took = now() - t0;
    printf("write of 1 MiB, its end closed by the handler: %s %s %s; lane %s\n",
           r < 0 ? "-1" : r == 0 ? "0" : r < (ssize_t)sizeof big ? "a part" : "all", err(r, e), about(took), s);
    close(sv[1]);
    return 0;
}

/* ---------------------------------------------------------------- emfile */
static int emfile(const char *path, int lim) {
    limit(lim);
    int l = listener(path);
    pid_t ch = fork();
    if (ch == 0) {
        int c = dial(path);
        char b;
        if (c < 0 || read(c, &b, 1) != 1 || write(c, "c", 1) != 1) _exit(1);
        _exit(0);
    }
    usleep(300000);
    int fds[4096], n = 0;
    for (;;) {
        int f = open("/dev/null", O_RDONLY);
        if (f < 0) break;
        fds[n++] = f;
    }
    int last = fds[--n];
    close(last);
    int c = accept(l, NULL, NULL);
    int e = errno;
    char b = 0;
    int io = c >= 0 && write(c, "s", 1) == 1 && read(c, &b, 1) == 1;
    int st;
    waitpid(ch, &st, 0);
    int sv[2] = {-1, -1};
    int r = socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
    int e2 = errno;
    printf("accept with one number free (%s): %s %s, a byte each way %s, the client %s; socketpair with none free: "
           "%d %s; opens free after: ",
           c == last ? "the last" : "not the last", c >= 0 ? "a socket" : "-1", err(c, e), io ? "ok" : "failed",
           WIFEXITED(st) && !WEXITSTATUS(st) ? "ok" : "failed", r, err(r, e2));
    if (c >= 0) close(c);
    int k = 0;
    for (;;) {
        int f = open("/dev/null", O_RDONLY);
        if (f < 0) break;
        fds[n++] = f;
        k++;
    }
    printf("%d (no room to look at the lane)\n", k);
    return 0;
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGPIPE, SIG_IGN);
    const char *path = getenv("L4_PATH");
    if (argc >= 4 && !strcmp(argv[1], "sigclose")) return sigclose(atoi(argv[2]), atoi(argv[3]));
    if (argc >= 3 && !strcmp(argv[1], "forkcall")) return forkcall(atoi(argv[2]));
    if (argc >= 4 && path && !strcmp(argv[1], "churn")) return churn(path, atoi(argv[2]), atoi(argv[3]));
    if (argc >= 3 && path && !strcmp(argv[1], "acceptopen")) return acceptopen(path, atoi(argv[2]));
    if (argc >= 2 && !strcmp(argv[1], "passclose")) return passclose();
    if (argc >= 2 && !strcmp(argv[1], "dupover")) return dupover();
    if (argc >= 3 && !strcmp(argv[1], "epdup")) return epdup(atoi(argv[2]));
    if (argc >= 3 && !strcmp(argv[1], "sigclosew")) return sigclosew(atoi(argv[2]));
    if (argc >= 2 && path && !strcmp(argv[1], "flags")) return flags(path);
    if (argc >= 4 && !strcmp(argv[1], "evrace")) return evrace(atoi(argv[2]), atoi(argv[3]));
    if (argc >= 2 && path && !strcmp(argv[1], "inetd")) return inetd(path);
    if (argc >= 3 && !strcmp(argv[1], "recvedge")) return recvedge(atoi(argv[2]), argc > 3 && atoi(argv[3]));
    if (argc >= 3 && path && !strcmp(argv[1], "emfile")) return emfile(path, atoi(argv[2]));
    fprintf(stderr, "usage: see the head of adversarial_lanes4.c (L4_PATH for churn, acceptopen, emfile)\n");
    return 2;
}
