/* adversarial_lanes3.c: the programs of adversarial_lanes3.sh, the same binary on kernel
 * sockets and through `udsfs run` (each prints what it did and what it got):
 *   server PATH N LIMIT   A: RLIMIT_NOFILE's soft limit LIMIT, binds PATH, accepts N
 *                         connections one at a time, echoes what it reads until EOF;
 *                         then counts its eventfds, its lane regions' Rss, and opens
 *                         /dev/null until refused.
 *   client PATH N ROUNDS  B: N connections to PATH, one at a time, ROUNDS one-byte
 *                         ping-pongs each (its lane's status noted), then 64 KiB each
 *                         way, then closed.
 *   eintr RESTART TIMEO STORM  a socketpair, forked: the child writes one byte after
 *                         1.5 s; the parent's blocking recv, a first byte through the
 *                         lane before, SIGUSR1's handler with SA_RESTART (RESTART 1) or
 *                         not, SO_RCVTIMEO TIMEO ms (0: none), and a thread sending
 *                         SIGUSR1 to it every ms for STORM ms from 300 ms on: recv's
 *                         result, errno, when, and how many handlers ran.
 *   eintrw RESTART TIMEO  a socketpair, forked: the child reads one byte, then nothing
 *                         until 1.5 s; the parent's two blocking 1 MiB writes, SIGUSR1
 *                         (SA_RESTART or not) 300 ms into each, SO_SNDTIMEO TIMEO ms.
 *   waitintr WAY RESTART  a laned socketpair end waited on by WAY (poll, ppoll, select,
 *                         epoll) for 1.5 s, SIGUSR1 (SA_RESTART or not) 300 ms in.
 *   sndtimeo              a socketpair, forked: the child reads one byte, then never again;
 *                         the parent's SO_SNDTIMEO 500 ms, two blocking writes of 1 MiB.
 *   dup2hi FILE           RLIMIT_NOFILE 64, a laned socketpair's ping-pong with a forked
 *                         child, FILE put at descriptor 49 by dup2 in its middle.
 *   rlimit LIMIT          RLIMIT_NOFILE's soft limit LIMIT: socketpairs, each with a
 *                         byte each way (laned on a mount with lanes), until refused;
 *                         then opens of /dev/null until refused; every errno.
 *   closerace ROUNDS      per round: a socketpair (a byte each way: laned), registered in
 *                         an epoll set; threads in a blocking read, a poll (150 ms) and
 *                         epoll_waits of that set (300 ms) on its end when the main
 *                         thread closes that end, puts a pipe holding 'P' at its number,
 *                         and makes 2 new socketpairs, each with 100 bytes both ways
 *                         checked, registered in the set, and a byte 'N' left unread in
 *                         its first end; then closes the old peer, and 400 ms later
 *                         (the old lane's eventfds given back) makes 2 more so. The old end's read must get no byte (0
 *                         or an error), its registration no readiness before the old
 *                         peer's close, the set report every new end, and every 'N' and
 *                         the 'P' be read back, and no eventfd be left once every
 *                         socket of the round is closed. (Its poll is said: Linux's looks the
 *                         number up again at each round and reports the pipe.)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <dirent.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/select.h>

#include "lanes_probe.h"

/* the Rss (kB) of this process's mappings of lane regions (memfd "udsfs-lane"), and how many */
static long lane_rss(int *maps) {
    FILE *f = fopen("/proc/self/smaps", "r");
    char l[512];
    long rss = 0, k;
    int in = 0;
    *maps = 0;
    while (fgets(l, sizeof l, f)) {
        if (strchr(l, '-') && strstr(l, " ") && (l[0] >= '0' && l[0] <= '9' ? 1 : (l[0] >= 'a' && l[0] <= 'f'))) {
            if (strstr(l, "udsfs-lane")) { in = 1; (*maps)++; } else if (!strncmp(l, "Rss:", 4)) {} else in = 0;
        }
        if (in && sscanf(l, "Rss: %ld kB", &k) == 1) rss += k;
    }
    fclose(f);
    return rss;
}

static void opens(const char *who) {
    int k = 0, last = -1;
    for (;;) {
        int f = open("/dev/null", O_RDONLY);
        if (f < 0) break;
        last = f;
        k++;
    }
    printf("%s: opens of /dev/null: %d (the last descriptor %d), then %s\n", who, k, last, strerrorname_np(errno));
}

static int server(const char *path, int n, int lim) {
    limit(lim);
    int l = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    strncpy(a.sun_path, path, sizeof a.sun_path - 1);
    unlink(path);
    if (bind(l, (void *)&a, sizeof a) < 0 || listen(l, 16) < 0) { perror("bind/listen"); return 2; }
    chmod(path, 0777);
    printf("listening\n");
    fflush(stdout);
    for (int i = 0; i < n; i++) {
        int c = accept(l, 0, 0);
        if (c < 0) { printf("accept %d: %s\n", i, strerrorname_np(errno)); return 1; }
        static char buf[65536];
        ssize_t k;
        while ((k = read(c, buf, sizeof buf)) > 0)
            if (write(c, buf, k) != k) break;
        close(c);
    }
    int maps = 0;
    long rss = lane_rss(&maps);
    printf("A: after %d connections: %d eventfds held, %d lane regions mapped, their Rss %ld kB\n", n, eventfds(), maps, rss);
    opens("A");
    return 0;
}

static int client(const char *path, int n, int rounds) {
    int laned = 0;
    for (int i = 0; i < n; i++) {
        int c = socket(AF_UNIX, SOCK_STREAM, 0);
        struct sockaddr_un a = {.sun_family = AF_UNIX};
        strncpy(a.sun_path, path, sizeof a.sun_path - 1);
        if (connect(c, (void *)&a, sizeof a) < 0) { printf("connect %d: %s\n", i, strerrorname_np(errno)); return 1; }
        char b = 'x', s[64];
        for (int r = 0; r < rounds; r++)
            if (write(c, &b, 1) != 1 || read(c, &b, 1) != 1) { printf("ping %d: %s\n", i, strerrorname_np(errno)); return 1; }
        if (!strcmp(lane_of(c, s, sizeof s), "direct")) laned++;
        static char blk[65536];
        memset(blk, 'y', sizeof blk);
        if (write(c, blk, sizeof blk) != sizeof blk) { printf("block %d: %s\n", i, strerrorname_np(errno)); return 1; }
        for (size_t got = 0; got < sizeof blk;) {
            ssize_t k = read(c, blk, sizeof blk - got);
            if (k <= 0) { printf("block back %d: %zd %s\n", i, k, strerrorname_np(errno)); return 1; }
            got += k;
        }
        close(c);
    }
    printf("B: %d connections, %d of them laned\n", n, laned);
    return 0;
}

static volatile int handled;
static void on_usr1(int s) { (void)s; handled++; }
static pthread_t main_thread;
static int storm_ms;
static void *storm(void *x) {
    (void)x;
    usleep(300000);
    for (int i = 0; i < (storm_ms ? storm_ms : 1); i++) {
        pthread_kill(main_thread, SIGUSR1);
        usleep(1000);
    }
    return 0;
}

/* SIGUSR1's handler on_usr1, with SA_RESTART or without. */
static void on_usr1_restarting(int restart) {
    struct sigaction sa = {.sa_handler = on_usr1, .sa_flags = restart ? SA_RESTART : 0};
    sigaction(SIGUSR1, &sa, 0);
}

/* A thread that sends the calling thread N SIGUSR1s (1 ms apart; 0: one), the first 300 ms
 * from now: the thread, to join. */
static pthread_t storm_from_now(int n) {
    main_thread = pthread_self();
    storm_ms = n;
    pthread_t t;
    pthread_create(&t, 0, storm, 0);
    return t;
}

/* FD's option OPT (SO_RCVTIMEO, SO_SNDTIMEO) at MS ms; 0: left as it is (none). */
static void timeo_ms(int fd, int opt, int ms) {
    if (!ms) return;
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, opt, &tv, sizeof tv);
}

/* A stream socketpair and a fork: the child keeps sv[1] (sv[0] closed), the parent sv[0]
 * (sv[1] closed). fork's value, -1 (said) when either call failed. */
static pid_t forked_pair(int sv[2]) {
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0) { perror("socketpair"); return -1; }
    pid_t ch = fork();
    if (ch < 0) perror("fork");
    close(sv[ch == 0 ? 0 : 1]);
    return ch;
}

/* A child's part: one byte read and sent back (the lane claimed by both ends), then
 * quiet for SECS seconds, then gone. */
static void echo_once_then_sleep(int fd, unsigned secs) {
    char b;
    if (read(fd, &b, 1) != 1 || write(fd, &b, 1) != 1) _exit(1);
    sleep(secs);
    _exit(0);
}

static int eintr(int restart, int timeo, int st) {
    int sv[2];
    pid_t ch = forked_pair(sv);
    if (ch < 0) return 2;
    if (ch == 0) {
        char b = 'a';
        if (write(sv[1], &b, 1) != 1) _exit(1);
        usleep(1500000);
        b = 'b';
        if (write(sv[1], &b, 1) != 1) _exit(1);
        usleep(500000);
        _exit(0);
    }
    char b, s[64];
    /* (the timeout before the first call: one set after the lane's claim takes it down) */
    timeo_ms(sv[0], SO_RCVTIMEO, timeo);
    if (read(sv[0], &b, 1) != 1) { perror("first read"); return 2; }
    on_usr1_restarting(restart);
    double t0 = now();
    pthread_t t = storm_from_now(st);
    ssize_t r = recv(sv[0], &b, 1, 0);
    int e = errno;
    double took = now() - t0;
    pthread_join(t, 0);
    printf("recv: %zd %s after %.0f ms, %d handlers ran, lane %s\n", r, r < 0 ? strerrorname_np(e) : "(no error)",
           took * 1000 < 200 ? 0 : (took * 1000 < 1000 ? 300.0 : (took * 1000 < 1900 ? 1500.0 : took * 1000)), handled > 0 ? 1 : 0,
           lane_of(sv[0], s, sizeof s));
    printf("(exact: %.0f ms, %d handlers)\n", took * 1000, handled);
    waitpid(ch, 0, 0);
    return 0;
}

static const char *about(double t);

/* waitintr WAY RESTART: a laned socketpair (a byte each way first, the child then quiet
 * for 2 s); the parent waits for input on its end by WAY (poll, ppoll, select, epoll)
 * with a 1.5 s timeout, SIGUSR1 (SA_RESTART or not) 300 ms in: what the wait returned. */
static int waitintr(const char *way, int restart) {
    int sv[2];
    pid_t ch = forked_pair(sv);
    if (ch < 0) return 2;
    if (ch == 0) echo_once_then_sleep(sv[1], 2);
    char b = 'x', s[64];
    if (write(sv[0], &b, 1) != 1 || read(sv[0], &b, 1) != 1) { perror("first byte"); return 2; }
    int ep = -1;
    if (!strcmp(way, "epoll")) {
        ep = epoll_create1(0);
        struct epoll_event ev = {.events = EPOLLIN, .data.u64 = 7};
        if (epoll_ctl(ep, EPOLL_CTL_ADD, sv[0], &ev) < 0) { perror("epoll_ctl"); return 2; }
    }
    on_usr1_restarting(restart);
    double t0 = now();
    pthread_t t = storm_from_now(1);
    int r;
    if (!strcmp(way, "poll")) {
        struct pollfd p = {.fd = sv[0], .events = POLLIN};
        r = poll(&p, 1, 1500);
    } else if (!strcmp(way, "ppoll")) {
        struct pollfd p = {.fd = sv[0], .events = POLLIN};
        struct timespec ts = {1, 500000000};
        r = ppoll(&p, 1, &ts, 0);
    } else if (!strcmp(way, "select")) {
        fd_set rd;
        FD_ZERO(&rd);
        FD_SET(sv[0], &rd);
        struct timeval tv = {1, 500000};
        r = select(sv[0] + 1, &rd, 0, 0, &tv);
    } else {
        struct epoll_event ev;
        r = epoll_wait(ep, &ev, 1, 1500);
    }
    int e = errno;
    double took = now() - t0;
    pthread_join(t, 0);
    printf("%s: %d %s %s; lane %s\n", way, r, r < 0 ? strerrorname_np(e) : "", about(took), lane_of(sv[0], s, sizeof s));
    kill(ch, SIGKILL);
    waitpid(ch, 0, 0);
    return 0;
}

/* eintrw RESTART TIMEO: a socketpair, forked: the child reads one byte, then nothing until
 * 1.5 s, then everything; the parent's SO_SNDTIMEO TIMEO ms (0: none), SIGUSR1's handler
 * with SA_RESTART or not, two blocking writes of 1 MiB, a SIGUSR1 300 ms into each. */
static int eintrw(int restart, int timeo) {
    int sv[2];
    pid_t ch = forked_pair(sv);
    if (ch < 0) return 2;
    if (ch == 0) {
        static char buf[65536];
        if (read(sv[1], buf, 1) != 1) _exit(1);
        usleep(1500000);
        while (read(sv[1], buf, sizeof buf) > 0) {}
        _exit(0);
    }
    char b = 'x', s[64];
    timeo_ms(sv[0], SO_SNDTIMEO, timeo);
    if (write(sv[0], &b, 1) != 1) { perror("first byte"); return 2; }
    on_usr1_restarting(restart);
    static char big[1 << 20];
    for (int i = 1; i <= 2; i++) {
        double t0 = now();
        pthread_t t = storm_from_now(1);
        ssize_t r = write(sv[0], big, sizeof big);
        int e = errno;
        double took = now() - t0;
        pthread_join(t, 0);
        printf("write %d of 1 MiB: %s %s; ", i,
               r < 0 ? strerrorname_np(e) : r == (ssize_t)sizeof big ? "all" : "a part", about(took));
    }
    printf("lane %s\n", lane_of(sv[0], s, sizeof s));
    close(sv[0]);
    waitpid(ch, 0, 0);
    return 0;
}

static const char *about(double t) {
    return t < 0.2 ? "at once" : t < 1.0 ? "after ~500 ms" : t < 2.5 ? "after ~1.5 s" : "after more than 2.5 s";
}

static int sndtimeo(void) {
    int sv[2];
    pid_t ch = forked_pair(sv);
    if (ch < 0) return 2;
    if (ch == 0) echo_once_then_sleep(sv[1], 4);
    char b = 'x', s[64];
    timeo_ms(sv[0], SO_SNDTIMEO, 500);
    if (write(sv[0], &b, 1) != 1 || read(sv[0], &b, 1) != 1) { perror("first byte"); return 2; }
    static char big[1 << 20];
    for (int i = 1; i <= 2; i++) {
        double t0 = now();
        ssize_t r = write(sv[0], big, sizeof big);
        int e = errno;
        double t = now() - t0;
        printf("write %d of 1 MiB: %s %s; ", i, r < 0 ? strerrorname_np(e) : r > 0 && r < (ssize_t)sizeof big ? "a part" : "all or none", about(t));
    }
    printf("lane %s\n", lane_of(sv[0], s, sizeof s));
    kill(ch, SIGKILL);
    waitpid(ch, 0, 0);
    return 0;
}

/* dup2hi FILE: RLIMIT_NOFILE 64; a socketpair, forked, each end's SO_RCVTIMEO 200 ms; 20
 * one-byte ping-pongs, the parent having put FILE (6 bytes written) at descriptor 49
 * (dup2) after the first: how many ping-pongs came back and FILE's size. */
static int dup2hi(const char *path) {
    limit(64);
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0) { perror("socketpair"); return 2; }
    for (int i = 0; i < 2; i++) timeo_ms(sv[i], SO_RCVTIMEO, 200);
    pid_t ch = fork();
    if (ch == 0) {
        close(sv[0]);
        char b;
        while (read(sv[1], &b, 1) == 1)
            if (write(sv[1], &b, 1) != 1) break;
        _exit(0);
    }
    close(sv[1]);
    char b = 'x', s[64];
    if (write(sv[0], &b, 1) != 1 || read(sv[0], &b, 1) != 1) { perror("first byte"); return 2; }
    int f = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (f < 0 || write(f, "hello\n", 6) != 6) { perror(path); return 2; }
    if (dup2(f, 49) != 49) { perror("dup2"); return 2; }
    close(f);
    int done = 0;
    const char *why = "";
    for (; done < 20; done++) {
        if (write(sv[0], &b, 1) != 1) { why = strerrorname_np(errno); break; }
        if (read(sv[0], &b, 1) != 1) { why = strerrorname_np(errno); break; }
        usleep(2000); /* (the child sleeps in its read meanwhile) */
    }
    struct stat st;
    fstat(49, &st);
    printf("ping-pongs after the dup2: %d of 20 %s; the file at descriptor 49: %lld bytes (lane %s)\n", done, why,
           (long long)st.st_size, lane_of(sv[0], s, sizeof s));
    close(sv[0]);
    waitpid(ch, 0, 0);
    return 0;
}

static int rlimit_(int lim) {
    limit(lim);
    int pairs = 0, e = 0;
    char s[64] = "none";
    for (;;) {
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0) { e = errno; break; }
        char b = 'x';
        if (write(sv[0], &b, 1) != 1 || read(sv[1], &b, 1) != 1 || write(sv[1], &b, 1) != 1 || read(sv[0], &b, 1) != 1) {
            printf("pair %d: ping: %s\n", pairs, strerrorname_np(errno));
            return 1;
        }
        if (pairs == 0) lane_of(sv[0], s, sizeof s);
        pairs++;
    }
    printf("pairs until refused: %d, then %s (the first's lane: %s)\n", pairs, strerrorname_np(e), s);
    opens("then");
    return 0;
}

struct race {
    int fd, ep;
    ssize_t got;
    int err;
    short revents;
    int pollr;
    double poll_at, old_at;
    volatile int tids[3];
};

/* waits until thread TID sleeps (its state S in /proc), at most 2 s */
static void asleep(volatile int *tid) {
    double t0 = now();
    while (now() - t0 < 2) {
        char p[64], st[256];
        if (*tid) {
            snprintf(p, sizeof p, "/proc/self/task/%d/stat", *tid);
            int f = open(p, O_RDONLY);
            ssize_t k = f < 0 ? -1 : read(f, st, sizeof st - 1);
            if (f >= 0) close(f);
            if (k > 0) {
                st[k] = 0;
                char *c = strrchr(st, ')');
                if (c && c[1] == ' ' && c[2] == 'S') return;
            }
        }
        usleep(1000);
    }
}

static void *race_read(void *p) {
    struct race *r = p;
    char b[64];
    r->tids[0] = gettid();
    r->got = read(r->fd, b, sizeof b);
    r->err = errno;
    return 0;
}

static void *race_poll(void *p) {
    struct race *r = p;
    struct pollfd f = {.fd = r->fd, .events = POLLIN};
    r->tids[1] = gettid();
    r->pollr = poll(&f, 1, 150);
    r->poll_at = now();
    r->revents = f.revents;
    return 0;
}

static void *race_epoll(void *p) {
    struct race *r = p;
    double t0 = now();
    r->tids[2] = gettid();
    while (now() - t0 < 0.3) {
        struct epoll_event e[16];
        int k = epoll_wait(r->ep, e, 16, 100);
        for (int i = 0; i < k; i++)
            if (e[i].data.u64 == 1000 && !r->old_at) r->old_at = now();
        if (k > 0) usleep(20000);
    }
    return 0;
}

/* marks in SET (8192 numbers) this process's eventfd descriptors */
static void eventfd_numbers(char *set) {
    memset(set, 0, 8192);
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    char p[300], l[300];
    while ((e = readdir(d))) {
        snprintf(p, sizeof p, "/proc/self/fd/%s", e->d_name);
        ssize_t k = readlink(p, l, sizeof l - 1);
        int n = atoi(e->d_name);
        if (k > 0 && n >= 0 && n < 8192) { l[k] = 0; set[n] = strstr(l, "eventfd") != 0; }
    }
    closedir(d);
}

/* a new socketpair into NW, 100 bytes each way checked (counts into LOST, BAD), registered
 * in EP with data DATA, a byte 'N' left unread in NW[0] */
static int race_pair(int nw[2], int ep, int data, int *lost, int *bad) {
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, nw) < 0) { perror("socketpair 2"); return -1; }
    char out[100], in[100];
    for (int d = 0; d < 2; d++) {
        memset(out, 'a' + data % 26, sizeof out);
        out[0] = '0' + d;
        if (write(nw[d], out, sizeof out) != sizeof out) { perror("write new"); return -1; }
        size_t got = 0;
        while (got < sizeof in) {
            ssize_t k = read(nw[1 - d], in + got, sizeof in - got);
            if (k <= 0) break;
            got += k;
        }
        if (got != sizeof in) *lost += sizeof in - got;
        else if (memcmp(in, out, sizeof in)) (*bad)++;
    }
    struct epoll_event ne = {.events = EPOLLIN, .data.u64 = data};
    if (epoll_ctl(ep, EPOLL_CTL_ADD, nw[0], &ne) < 0) { perror("epoll_ctl new"); return -1; }
    char b = 'N';
    if (write(nw[1], &b, 1) != 1) { perror("write N"); return -1; }
    return 0;
}

static int closerace(int rounds) {
    int stolen = 0, read_eof = 0, read_err = 0, read_stuck = 0, poll_wrong = 0, poll_late = 0, poll_none = 0;
    int old_wrong = 0, lost = 0, bad = 0, unreported = 0, laned = 0, reused = 0, ev_reused = 0, ev_left = 0;
    char lane[64], before[8192], after[8192];
    for (int round = 0; round < rounds; round++) {
        int old[2];
        if (socketpair(AF_UNIX, SOCK_STREAM, 0, old) < 0) { perror("socketpair"); return 2; }
        char b = 'o';
        if (write(old[0], &b, 1) != 1 || read(old[1], &b, 1) != 1 || write(old[1], &b, 1) != 1 || read(old[0], &b, 1) != 1) {
            perror("ping");
            return 2;
        }
        if (!strcmp(lane_of(old[0], lane, sizeof lane), "direct")) laned++;
        int ep = epoll_create1(0);
        struct epoll_event ev = {.events = EPOLLIN, .data.u64 = 1000};
        if (epoll_ctl(ep, EPOLL_CTL_ADD, old[0], &ev) < 0) { perror("epoll_ctl"); return 2; }
        eventfd_numbers(before);
        struct race r = {.fd = old[0], .ep = ep, .got = -2};
        pthread_t tr, tp, te;
        pthread_create(&tr, 0, race_read, &r);
        pthread_create(&tp, 0, race_poll, &r);
        pthread_create(&te, 0, race_epoll, &r);
        for (int i = 0; i < 3; i++) asleep(&r.tids[i]);
        usleep(20000);
        int oldfd = old[0];
        close(old[0]);
        /* the old end's number at once: a pipe holding a byte 'P' */
        int pp[2];
        if (pipe(pp) < 0) { perror("pipe"); return 2; }
        if (pp[0] == oldfd) reused++;
        if (write(pp[1], "P", 1) != 1) { perror("write P"); return 2; }
        int nw[4][2];
        for (int i = 0; i < 2; i++)
            if (race_pair(nw[i], ep, 2000 + i, &lost, &bad) < 0) return 2;
        usleep(50000);
        double peer_closed = now();
        close(old[1]);
        /* the second wave once the old lane's holders let go (both ends closed, the poll and
         * the epoll_waits over) */
        usleep(400000);
        for (int i = 2; i < 4; i++)
            if (race_pair(nw[i], ep, 2000 + i, &lost, &bad) < 0) return 2;
        eventfd_numbers(after);
        for (int i = 0; i < 8192; i++) ev_reused += before[i] && after[i];
        pthread_join(tp, 0);
        pthread_join(te, 0);
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += 3;
        if (pthread_timedjoin_np(tr, 0, &until) != 0) {
            read_stuck++;
            pthread_cancel(tr);
            pthread_join(tr, 0);
        }
        if (r.got > 0) stolen++;
        else if (r.got == 0) read_eof++;
        else if (r.got == -1) read_err++;
        /* a readiness of the old end's number before its peer's close is another file's (Linux's
         * poll looks the number up again at each round: the pipe's; said, not judged) */
        if (r.pollr > 0 && r.poll_at < peer_closed) poll_wrong++;
        else if (r.pollr > 0) poll_late++;
        else poll_none++;
        if (r.old_at && r.old_at < peer_closed) old_wrong++;
        /* every new end reported by the set (its 'N'), then read back; the pipe's 'P' too */
        int seen[4] = {0};
        struct epoll_event e[16];
        int k = epoll_wait(ep, e, 16, 200);
        for (int i = 0; i < k; i++)
            if (e[i].data.u64 >= 2000 && e[i].data.u64 < 2004) seen[e[i].data.u64 - 2000] = 1;
        for (int i = 0; i < 4; i++) {
            if (!seen[i]) unreported++;
            char c = 0;
            if (recv(nw[i][0], &c, 1, MSG_DONTWAIT) != 1 || c != 'N') lost++;
            close(nw[i][0]);
            close(nw[i][1]);
        }
        char c = 0;
        fcntl(pp[0], F_SETFL, O_NONBLOCK);
        if (read(pp[0], &c, 1) != 1 || c != 'P') lost++;
        close(pp[0]);
        close(pp[1]);
        close(ep);
        /* every lane of the round closed: none of their eventfds is left */
        eventfd_numbers(after);
        for (int i = 0; i < 8192; i++) ev_left += after[i];
    }
    printf("closerace: %d rounds (%d laned; the old end's number reused at once %d times, an eventfd's number of "
           "the old lane by a later lane %d times): the old end's read: %d got a byte, %d EOF, %d an error, %d stuck; "
           "its poll: %d woken before its peer's close, %d after, %d nothing; its epoll registration: %d reported "
           "before its peer's close; the new files: %d bytes lost, %d wrong, %d not reported by the set; eventfds left "
           "at the rounds' ends: %d\n",
           rounds, laned, reused, ev_reused, stolen, read_eof, read_err, read_stuck, poll_wrong, poll_late, poll_none,
           old_wrong, lost, bad, unreported, ev_left);
    return 0;
}

int main(int argc, char **argv) {
    setvbuf(stdout, 0, _IOLBF, 0);
    if (argc >= 5 && !strcmp(argv[1], "server")) return server(argv[2], atoi(argv[3]), atoi(argv[4]));
    if (argc >= 5 && !strcmp(argv[1], "client")) return client(argv[2], atoi(argv[3]), atoi(argv[4]));
    if (argc >= 5 && !strcmp(argv[1], "eintr")) return eintr(atoi(argv[2]), atoi(argv[3]), atoi(argv[4]));
    if (argc >= 2 && !strcmp(argv[1], "sndtimeo")) return sndtimeo();
    if (argc >= 4 && !strcmp(argv[1], "waitintr")) return waitintr(argv[2], atoi(argv[3]));
    if (argc >= 4 && !strcmp(argv[1], "eintrw")) return eintrw(atoi(argv[2]), atoi(argv[3]));
    if (argc >= 3 && !strcmp(argv[1], "dup2hi")) return dup2hi(argv[2]);
    if (argc >= 3 && !strcmp(argv[1], "rlimit")) return rlimit_(atoi(argv[2]));
    if (argc >= 3 && !strcmp(argv[1], "closerace")) return closerace(atoi(argv[2]));
    fprintf(stderr, "usage: see the head of adversarial_lanes3.c\n");
    return 2;
}
