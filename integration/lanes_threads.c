/* lanes_threads.c: the programs of lanes_threads.sh, the same binary on kernel sockets and
 * through `udsfs run` (lanes on). Several threads of one process share one end of a
 * socketpair (no SO_SNDBUF: a setsockopt but the timeouts takes a socketpair's lane
 * down, docs/LANE.md; the rings are 128 KiB). `lanes_threads SCENARIO REPS [DIR]` runs SCENARIO REPS times (a listener is bound in DIR, /tmp by default); each run prints
 *   "SCENARIO: ..."   the summary, which must be the same on the kernel and on udsfs;
 *   "info: ..."       counts that may differ (EINTRs, EAGAINs, the ends' lane= field).
 * Scenarios:
 *   stream      16 writer threads, 2000 tagged messages each (64 or 3000 bytes: thread,
 *               sequence, checksum) with blocking writes to one end, one reader on the
 *               other: every message whole, once, each writer's in order.
 *   seqpacket   8 writers and 8 readers on the two ends of a seqpacket pair: every record
 *               whole, once, each writer's in order within each reader.
 *   nonblock    16 writers with MSG_DONTWAIT spinning on EAGAIN through poll(); 4 readers
 *               on an O_NONBLOCK end: 2 sharing a level-triggered epoll set, 2 with an
 *               EPOLLET set each. Fixed 200-byte messages (reads of whole multiples).
 *   sigrestart  4 writers, 3 readers (blocking, the readers slowed now and then), a
 *               thread sending SIGUSR1 to all of them every 200 us; SA_RESTART: no EINTR.
 *   signorestart the same without SA_RESTART: EINTRs retried by the program.
 *   close       one thread blocked reading and one blocked writing 1 MiB (send with
 *               MSG_NOSIGNAL) on an end when the main thread closes it: both stay
 *               blocked (they hold the file), the peer's bytes reach the reader, the
 *               peer's reads let the writer finish.
 *   closewrite  the same with the writer's write() (no flags).
 *   dup2        the same with /dev/null put at the end's number (dup2).
 *   closepeer   the same close, then the peer closes: the reader gets EOF (or
 *               ECONNRESET: racy on Linux), the writer a part (the bytes sent before).
 *   duplex      one thread blocked writing 1 MiB on an end (its peer not reading), another
 *               reading it byte by byte: each of the peer's 50 bytes reaches the reader
 *               within 1 s (it stops at a late one); then the peer reads: the writer's
 *               whole MiB comes (1 s without a byte at most).
 *   fork        3 writer threads and 2 reader threads run while the main thread forks;
 *               the child writes 500 messages and reads some (its calls go through the
 *               daemon), the parent's threads go on: every message exactly once.
 *   sleeper_epoll, sleeper_epollet, sleeper_poll
 *               a connect/accept pair in one process: thread L asleep in epoll_wait (level,
 *               EPOLLET) or poll() on the accepted end from before any lane while thread W
 *               writes a greeting (W's first call on it), then 20 requests of the client's:
 *               each wakes L, which hands it to W (a nonblocking peek: nothing there is a
 *               spurious wake-up), W reads it and replies.
 * Each run has an alarm: a hang prints "TIMEOUT" and exits 3. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* (only lane_of of its helpers) */
#pragma GCC diagnostic ignored "-Wunused-function"
#include "lanes_probe.h"

#define MAGIC 0x4c4e5448u
#define MAXW 16
#define MAXSEQ 4000
#define HDR 16

static const char *scenario;
static atomic_int progress; /* messages seen so far, said at a timeout */

static void on_alarm(int sig) {
    (void)sig;
    char b[160];
    int n = snprintf(b, sizeof b, "TIMEOUT: %s hung, %d messages seen\n", scenario, atomic_load(&progress));
    if (write(1, b, n) < 0) _exit(4);
    _exit(3);
}

static atomic_long sigs;
static void on_usr1(int sig) { (void)sig; atomic_fetch_add(&sigs, 1); }

/* ---- tagged messages: magic, writer, total length, sequence, checksum, payload */

static uint8_t pay(int w, int seq, int i) { return (uint8_t)(w * 131 + seq * 17 + i * 3); }

static void make_msg(uint8_t *m, int w, int seq, int len) {
    uint32_t sum = 0, h[4] = {MAGIC, (uint32_t)w | (uint32_t)len << 16, (uint32_t)seq, 0};
    for (int i = HDR; i < len; i++) { m[i] = pay(w, seq, i); sum = sum * 31 + m[i]; }
    h[3] = sum;
    memcpy(m, h, HDR);
}

/* What the readers saw: each message once (seen), each writer's in order per reader. */
struct tally {
    atomic_uchar seen[MAXW][MAXSEQ];
    atomic_int count, dup, bad, order;
};
static struct tally T;

static void tally_reset(void) { memset(&T, 0, sizeof T); }

/* checks one whole message at m (n bytes of it there): its length, or -1 when m is no
 * message (counted bad) */
static int check_msg(const uint8_t *m, int n, int *last) {
    uint32_t h[4];
    if (n < HDR) return 0;
    memcpy(h, m, HDR);
    int w = h[1] & 0xffff, len = h[1] >> 16, seq = h[2];
    if (h[0] != MAGIC || w >= MAXW || seq >= MAXSEQ || len < HDR || len > 3000) {
        atomic_fetch_add(&T.bad, 1);
        return -1;
    }
    if (n < len) return 0;
    uint32_t sum = 0;
    for (int i = HDR; i < len; i++) {
        if (m[i] != pay(w, seq, i)) { atomic_fetch_add(&T.bad, 1); return -1; }
        sum = sum * 31 + m[i];
    }
    if (sum != h[3]) { atomic_fetch_add(&T.bad, 1); return -1; }
    if (atomic_exchange(&T.seen[w][seq], 1)) atomic_fetch_add(&T.dup, 1);
    if (last) {
        if (seq <= last[w]) atomic_fetch_add(&T.order, 1);
        last[w] = seq;
    }
    atomic_fetch_add(&T.count, 1);
    atomic_fetch_add(&progress, 1);
    return len;
}

/* a read of whole fixed-size messages: each checked; a part of one counts bad */
static void check_fixed(const uint8_t *b, int n, int size, int *last) {
    if (n % size) atomic_fetch_add(&T.bad, 1);
    for (int o = 0; o + size <= n; o += size)
        if (check_msg(b + o, size, last) != size) return;
}

static int missing(int writers, int per) {
    int m = 0;
    for (int w = 0; w < writers; w++)
        for (int s = 0; s < per; s++) m += !atomic_load(&T.seen[w][s]);
    return m;
}

static void wait_count(int total) {
    while (atomic_load(&T.count) < total && atomic_load(&T.bad) == 0) usleep(1000);
}

static void lanes_info(int a, int b, char *out, size_t n) {
    char la[32], lb[32];
    snprintf(out, n, "lanes %s %s", lane_of(a, la, sizeof la), lane_of(b, lb, sizeof lb));
}

/* a byte each way: both ends claimed (laned on udsfs) before the threads start */
static void ping(int a, int b) {
    char c = 'p';
    if (write(a, &c, 1) != 1 || read(b, &c, 1) != 1 || write(b, &c, 1) != 1 || read(a, &c, 1) != 1) {
        perror("ping");
        exit(2);
    }
}

/* A socketpair of TYPE whose ends each made a plain call (each claims its lane). */
static void laned_pair(int type, int sv[2]) {
    if (socketpair(AF_UNIX, type, 0, sv)) {
        perror("socketpair");
        exit(2);
    }
    ping(sv[0], sv[1]);
}

/* ---- workers */

struct worker {
    pthread_t t;
    int fd, id, per, size, mode; /* size 0: 64 and 3000 in turn */
    long eintr, eagain, shortw, ret;
    int err;
};

static atomic_int go;

static int size_of(struct worker *k, int seq) {
    return k->size ? k->size : ((seq + k->id) % 3 == 0 ? 3000 : 64);
}

/* blocking (mode 0) or MSG_DONTWAIT with poll(POLLOUT) on EAGAIN (mode 1) writes */
static void *writer(void *p) {
    struct worker *k = p;
    uint8_t m[3000];
    while (!atomic_load(&go)) sched_yield();
    for (int s = 0; s < k->per; s++) {
        int len = size_of(k, s);
        make_msg(m, k->id, s, len);
        for (;;) {
            ssize_t r = send(k->fd, m, len, MSG_NOSIGNAL | (k->mode ? MSG_DONTWAIT : 0));
            if (r == len) break;
            if (r >= 0) { k->shortw++; break; } /* a torn message: the readers say so */
            if (errno == EINTR) { k->eintr++; continue; }
            if (errno == EAGAIN && k->mode) {
                k->eagain++;
                struct pollfd pf = {k->fd, POLLOUT, 0};
                poll(&pf, 1, -1);
                continue;
            }
            k->err = errno;
            return NULL;
        }
    }
    return NULL;
}

/* one stream reader of mixed sizes: parses what it reads until EOF */
static void *stream_reader(void *p) {
    struct worker *k = p;
    static uint8_t buf[1 << 17];
    int have = 0, last[MAXW];
    memset(last, -1, sizeof last);
    for (;;) {
        ssize_t r = read(k->fd, buf + have, sizeof buf - have);
        if (r < 0 && errno == EINTR) { k->eintr++; continue; }
        if (r <= 0) { k->ret = r; k->err = r < 0 ? errno : 0; break; }
        have += r;
        int o = 0, len;
        while ((len = check_msg(buf + o, have - o, last)) > 0) o += len;
        if (len < 0) { k->ret = -2; break; }
        memmove(buf, buf + o, have - o);
        have -= o;
    }
    if (have) atomic_fetch_add(&T.bad, 1);
    return NULL;
}

/* fixed-size blocking reader (reads of 4 messages), slowed now and then */
static void *fixed_reader(void *p) {
    struct worker *k = p;
    uint8_t buf[4 * 3000];
    int last[MAXW], n = 0;
    memset(last, -1, sizeof last);
    for (;;) {
        ssize_t r = read(k->fd, buf, 4 * k->size);
        if (r < 0 && errno == EINTR) { k->eintr++; continue; }
        if (r <= 0) { k->ret = r; k->err = r < 0 ? errno : 0; break; }
        check_fixed(buf, r, k->size, last);
        if (k->mode && ++n % 64 == 0) usleep(500);
    }
    return NULL;
}

/* seqpacket reader: each read one record */
static void *record_reader(void *p) {
    struct worker *k = p;
    uint8_t buf[4096];
    int last[MAXW];
    memset(last, -1, sizeof last);
    for (;;) {
        ssize_t r = recv(k->fd, buf, sizeof buf, 0);
        if (r < 0 && errno == EINTR) { k->eintr++; continue; }
        if (r <= 0) { k->ret = r; k->err = r < 0 ? errno : 0; break; }
        if (check_msg(buf, r, last) != r) atomic_fetch_add(&T.bad, 1);
    }
    return NULL;
}

/* nonblocking reader on epoll set k->mode (its fd), edge-triggered when k->size < 0 */
struct epr {
    struct worker w;
    int ep, et;
};
static void *epoll_reader(void *p) {
    struct epr *e = p;
    struct worker *k = &e->w;
    uint8_t buf[8 * 200];
    int last[MAXW];
    memset(last, -1, sizeof last);
    for (;;) {
        struct epoll_event ev;
        int n = epoll_wait(e->ep, &ev, 1, -1);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) { k->err = errno; return NULL; }
        for (;;) {
            ssize_t r = read(k->fd, buf, sizeof buf);
            if (r < 0 && errno == EAGAIN) { k->eagain++; break; }
            if (r <= 0) { k->ret = r; k->err = r < 0 ? errno : 0; return NULL; }
            check_fixed(buf, r, 200, last);
            if (!e->et) break; /* level: one read a wake-up */
        }
    }
}

static void start(struct worker *k, void *(*f)(void *)) {
    if (pthread_create(&k->t, NULL, f, k)) { perror("pthread_create"); exit(2); }
}

/* The writers done: join them, wait until the readers have counted TOTAL messages, then
 * say the ends' lanes (in LI) while both are still open. */
static void writers_done(struct worker *ws, int writers, int total, int sv[2], char *li, size_t n) {
    for (int i = 0; i < writers; i++) pthread_join(ws[i].t, NULL);
    wait_count(total);
    lanes_info(sv[0], sv[1], li, n);
}

static long sum_field(struct worker *ks, int n, int which) {
    long s = 0;
    for (int i = 0; i < n; i++) s += which == 0 ? ks[i].eintr : which == 1 ? ks[i].eagain : ks[i].shortw;
    return s;
}

static int errs(struct worker *ks, int n) {
    int e = 0;
    for (int i = 0; i < n; i++) e += ks[i].err != 0;
    return e;
}

static void summary(const char *what, int writers, int per, struct worker *ws, int nw, struct worker *rs, int nr) {
    printf("%s: %d messages of %d writers read, %d missing, %d doubled, %d torn or wrong, %d out of order, "
           "%ld short writes, %d writer errors, %d reader errors, readers' last read %s\n",
           what, atomic_load(&T.count), writers, missing(writers, per), atomic_load(&T.dup), atomic_load(&T.bad),
           atomic_load(&T.order), sum_field(ws, nw, 2), errs(ws, nw), errs(rs, nr),
           rs[0].ret == 0 ? "EOF" : "not EOF");
}

/* ---- scenarios */

static void run_stream(void) {
    enum { W = 16, PER = 2000 };
    int sv[2];
    laned_pair(SOCK_STREAM, sv);
    struct worker ws[W] = {0}, r = {.fd = sv[1]};
    for (int i = 0; i < W; i++) { ws[i] = (struct worker){.fd = sv[0], .id = i, .per = PER}; start(&ws[i], writer); }
    start(&r, stream_reader);
    atomic_store(&go, 1);
    char li[64];
    writers_done(ws, W, W * PER, sv, li, sizeof li);
    close(sv[0]);
    pthread_join(r.t, NULL);
    close(sv[1]);
    summary("stream", W, PER, ws, W, &r, 1);
    printf("info: %s\n", li);
}

static void run_seqpacket(void) {
    enum { W = 8, R = 8, PER = 2000 };
    int sv[2];
    laned_pair(SOCK_SEQPACKET, sv);
    struct worker ws[W] = {0}, rs[R] = {0};
    for (int i = 0; i < R; i++) { rs[i].fd = sv[1]; start(&rs[i], record_reader); }
    for (int i = 0; i < W; i++) { ws[i] = (struct worker){.fd = sv[0], .id = i, .per = PER}; start(&ws[i], writer); }
    atomic_store(&go, 1);
    char li[64];
    writers_done(ws, W, W * PER, sv, li, sizeof li);
    close(sv[0]);
    int eofs = 0;
    for (int i = 0; i < R; i++) { pthread_join(rs[i].t, NULL); eofs += rs[i].ret == 0; }
    close(sv[1]);
    summary("seqpacket", W, PER, ws, W, rs, R);
    printf("info: %s; %d of %d readers at EOF\n", li, eofs, R);
}

static void run_nonblock(void) {
    enum { W = 16, PER = 2000, R = 4 };
    int sv[2];
    laned_pair(SOCK_STREAM, sv);
    fcntl(sv[1], F_SETFL, fcntl(sv[1], F_GETFL) | O_NONBLOCK);
    int level = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP};
    if (epoll_ctl(level, EPOLL_CTL_ADD, sv[1], &ev)) { perror("epoll_ctl"); exit(2); }
    struct epr rs[R];
    memset(rs, 0, sizeof rs);
    for (int i = 0; i < R; i++) {
        rs[i].w.fd = sv[1];
        rs[i].et = i >= 2;
        if (rs[i].et) {
            rs[i].ep = epoll_create1(EPOLL_CLOEXEC);
            struct epoll_event e2 = {.events = EPOLLIN | EPOLLRDHUP | EPOLLET};
            if (epoll_ctl(rs[i].ep, EPOLL_CTL_ADD, sv[1], &e2)) { perror("epoll_ctl ET"); exit(2); }
        } else {
            rs[i].ep = level;
        }
        if (pthread_create(&rs[i].w.t, NULL, epoll_reader, &rs[i])) exit(2);
    }
    struct worker ws[W] = {0};
    for (int i = 0; i < W; i++) {
        ws[i] = (struct worker){.fd = sv[0], .id = i, .per = PER, .size = 200, .mode = 1};
        start(&ws[i], writer);
    }
    atomic_store(&go, 1);
    char li[64];
    writers_done(ws, W, W * PER, sv, li, sizeof li);
    close(sv[0]);
    struct worker rw[R];
    int eofs = 0;
    long eagain = 0;
    for (int i = 0; i < R; i++) {
        pthread_join(rs[i].w.t, NULL);
        rw[i] = rs[i].w;
        eofs += rw[i].ret == 0;
        eagain += rw[i].eagain;
        if (rs[i].et) close(rs[i].ep);
    }
    close(level);
    close(sv[1]);
    summary("nonblock", W, PER, ws, W, rw, R);
    printf("info: %s; %d of %d readers at EOF; writers' EAGAINs %ld, readers' %ld\n", li, eofs, R,
           sum_field(ws, W, 1), eagain);
}

struct sigger {
    struct worker *ks;
    int n;
    atomic_int stop;
};
static void *sigger(void *p) {
    struct sigger *s = p;
    while (!atomic_load(&s->stop)) {
        for (int i = 0; i < s->n; i++) pthread_kill(s->ks[i].t, SIGUSR1);
        usleep(200);
    }
    return NULL;
}

static void run_signals(int restart) {
    enum { W = 4, R = 3, PER = 3000, SZ = 512 };
    struct sigaction sa = {.sa_handler = on_usr1, .sa_flags = restart ? SA_RESTART : 0};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, NULL);
    atomic_store(&sigs, 0);
    int sv[2];
    laned_pair(SOCK_STREAM, sv);
    struct worker ks[W + R] = {0};
    for (int i = 0; i < W; i++) { ks[i] = (struct worker){.fd = sv[0], .id = i, .per = PER, .size = SZ}; start(&ks[i], writer); }
    for (int i = W; i < W + R; i++) { ks[i] = (struct worker){.fd = sv[1], .size = SZ, .mode = 1}; start(&ks[i], fixed_reader); }
    struct sigger sg = {.ks = ks, .n = W + R};
    pthread_t st;
    pthread_create(&st, NULL, sigger, &sg);
    atomic_store(&go, 1);
    char li[64];
    writers_done(ks, W, W * PER, sv, li, sizeof li);
    atomic_store(&sg.stop, 1);
    pthread_join(st, NULL);
    close(sv[0]);
    for (int i = W; i < W + R; i++) pthread_join(ks[i].t, NULL);
    close(sv[1]);
    long eintr = sum_field(ks, W + R, 0);
    summary(restart ? "sigrestart" : "signorestart", W, PER, ks, W, ks + W, R);
    if (restart) printf("sigrestart: EINTRs seen by the program: %ld\n", eintr);
    printf("info: %s; %ld signals handled, EINTRs: writers %ld, readers %ld\n", li, atomic_load(&sigs),
           sum_field(ks, W, 0), sum_field(ks + W, R, 0));
}

/* ---- close (or dup2 over) an end under its blocked threads */

struct blocked {
    pthread_t t;
    int fd, writes;
    atomic_int done;
    ssize_t r;
    int err;
    char got[16];
};
static void *blocked_read(void *p) {
    struct blocked *b = p;
    b->r = read(b->fd, b->got, sizeof b->got - 1);
    b->err = b->r < 0 ? errno : 0;
    atomic_store(&b->done, 1);
    return NULL;
}
#define BIG (1 << 20)
static void *blocked_write(void *p) {
    struct blocked *b = p;
    char *m = malloc(BIG);
    memset(m, 'w', BIG);
    b->r = b->writes == 2 ? write(b->fd, m, BIG) : send(b->fd, m, BIG, MSG_NOSIGNAL);
    b->err = b->r < 0 ? errno : 0;
    atomic_store(&b->done, 1);
    free(m);
    return NULL;
}

static const char *state(struct blocked *b, char *out, size_t n) {
    if (!atomic_load(&b->done)) return "blocked";
    /* the peer's close with bytes unread: EOF or ECONNRESET, whichever of the reader and
     * the writer takes the socket's error first (Linux, unix_release_sock) */
    if (b->r < 0 && b->err == ECONNRESET && !b->writes) snprintf(out, n, "EOF or ECONNRESET");
    else if (b->r < 0) snprintf(out, n, "%s", strerrorname_np(b->err));
    else if (b->r == 0 && !b->writes) snprintf(out, n, "EOF or ECONNRESET");
    else if (b->r == BIG) snprintf(out, n, "all");
    else if (b->r > 0 && b->writes) snprintf(out, n, "a part");
    else snprintf(out, n, "%zd '%.*s'", b->r, (int)(b->r > 0 ? b->r : 0), b->got);
    return out;
}

/* how: 0 close, 1 dup2, 2 close then the peer closes; 3 close with the writer's write()
 * (the others: send(MSG_NOSIGNAL)) */
static void run_close(int how) {
    const char *name = how == 0 ? "close" : how == 1 ? "dup2" : how == 2 ? "closepeer" : "closewrite";
    int sv[2];
    laned_pair(SOCK_STREAM, sv);
    struct blocked r = {.fd = sv[0]}, w = {.fd = sv[0], .writes = how == 3 ? 2 : 1};
    pthread_create(&r.t, NULL, blocked_read, &r);
    pthread_create(&w.t, NULL, blocked_write, &w);
    usleep(300000);
    char s1[32], s2[32], li[64];
    printf("%s: before: reader %s, writer %s", name, state(&r, s1, sizeof s1), state(&w, s2, sizeof s2));
    lanes_info(sv[0], sv[1], li, sizeof li);
    if (how == 1) {
        int n = open("/dev/null", O_RDWR);
        dup2(n, sv[0]);
        close(n);
    } else {
        close(sv[0]);
    }
    usleep(300000);
    printf("; after the %s: reader %s, writer %s", how == 1 ? "dup2" : "close", state(&r, s1, sizeof s1),
           state(&w, s2, sizeof s2));
    if (how == 2) {
        close(sv[1]);
        for (int i = 0; i < 300 && !(atomic_load(&r.done) && atomic_load(&w.done)); i++) usleep(10000);
        printf("; after the peer's close: reader %s, writer %s\n", state(&r, s1, sizeof s1), state(&w, s2, sizeof s2));
    } else {
        if (write(sv[1], "hello", 5) != 5) perror("peer write");
        for (int i = 0; i < 100 && !atomic_load(&r.done); i++) usleep(10000);
        printf("; the peer's 'hello': reader %s", state(&r, s1, sizeof s1));
        /* the peer reads what the writer sends, 2 s without a byte at most */
        static char buf[65536];
        long got = 0;
        int bad = 0;
        for (;;) {
            struct pollfd pf = {sv[1], POLLIN, 0};
            if (poll(&pf, 1, 2000) != 1) break;
            ssize_t k = read(sv[1], buf, sizeof buf);
            if (k <= 0) break;
            for (ssize_t i = 0; i < k; i++) bad += buf[i] != 'w';
            got += k;
            if (got >= BIG && atomic_load(&w.done)) break;
        }
        for (int i = 0; i < 100 && !atomic_load(&w.done); i++) usleep(10000);
        printf("; the peer read %ld bytes (%d not the writer's); writer %s\n", got, bad, state(&w, s2, sizeof s2));
        close(sv[1]);
    }
    pthread_join(r.t, NULL);
    pthread_join(w.t, NULL);
    if (how == 1) close(sv[0]);
    printf("info: before the %s: %s\n", how == 1 ? "dup2" : "close", li);
}

/* ---- one thread blocked writing, another reading, on the same end */

static atomic_int duplex_got;
static void *duplex_reader(void *p) {
    int fd = *(int *)p;
    char c;
    while (read(fd, &c, 1) == 1 && c == 'x') atomic_fetch_add(&duplex_got, 1);
    return NULL;
}

static void run_duplex(void) {
    enum { BYTES = 50 };
    int sv[2];
    laned_pair(SOCK_STREAM, sv);
    atomic_store(&duplex_got, 0);
    struct blocked w = {.fd = sv[0], .writes = 1};
    pthread_t r;
    pthread_create(&w.t, NULL, blocked_write, &w);
    pthread_create(&r, NULL, duplex_reader, &sv[0]);
    usleep(100000);
    char li[64];
    lanes_info(sv[0], sv[1], li, sizeof li);
    /* each byte the peer sends must reach the reader at once, however the writer sleeps */
    int late = 0, worst = 0;
    for (int i = 0; i < BYTES; i++) {
        if (write(sv[1], "x", 1) != 1) { perror("duplex write"); exit(2); }
        int ms = 0;
        while (atomic_load(&duplex_got) <= i && ms < 1000) { usleep(1000); ms++; }
        if (ms > worst) worst = ms;
        if (ms >= 1000 && ++late) break; /* one is enough (the run's time) */
    }
    char s2[32];
    printf("duplex: %d bytes of %d read (the peer stops at a late one), %d not within 1 s; writer %s", atomic_load(&duplex_got), BYTES, late,
           state(&w, s2, sizeof s2));
    /* the peer reads the writer's MiB */
    static char buf[65536];
    long got = 0;
    while (got < BIG) {
        /* 1 s without a byte: the writer sleeps on (said, rather than the alarm) */
        struct pollfd pf = {sv[1], POLLIN, 0};
        if (poll(&pf, 1, 1000) != 1) break;
        ssize_t k = read(sv[1], buf, sizeof buf);
        if (k <= 0) break;
        got += k;
    }
    for (int i = 0; i < 100 && !atomic_load(&w.done); i++) usleep(10000);
    printf(", then %s after the peer read %ld bytes\n", state(&w, s2, sizeof s2), got);
    close(sv[1]);
    pthread_join(w.t, NULL);
    pthread_join(r, NULL);
    close(sv[0]);
    printf("info: %s; the slowest byte %d ms\n", li, worst);
}

/* ---- fork under running threads */

static void run_fork(void) {
    enum { W = 3, R = 2, PER = 3000, SZ = 256, CHILD = 15, CPER = 500 };
    int sv[2], pp[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) || pipe(pp)) { perror("socketpair"); exit(2); }
    ping(sv[0], sv[1]);
    struct worker ks[W + R] = {0};
    for (int i = 0; i < W; i++) { ks[i] = (struct worker){.fd = sv[0], .id = i, .per = PER, .size = SZ}; start(&ks[i], writer); }
    for (int i = W; i < W + R; i++) { ks[i] = (struct worker){.fd = sv[1], .size = SZ, .mode = 1}; start(&ks[i], fixed_reader); }
    atomic_store(&go, 1);
    while (atomic_load(&T.count) < 1000) usleep(200);
    char li[64];
    lanes_info(sv[0], sv[1], li, sizeof li);
    pid_t c = fork();
    if (c == 0) {
        /* the child: its own messages, and some reads of the parent's (a record of each
         * message it read goes to the parent: writer, sequence) */
        struct worker me = {.fd = sv[0], .id = CHILD, .per = CPER, .size = SZ};
        atomic_store(&go, 1);
        writer(&me);
        uint8_t buf[SZ];
        int reads = 0;
        for (int i = 0; i < 200; i++) {
            struct pollfd pf = {sv[1], POLLIN, 0};
            if (poll(&pf, 1, 300) != 1) break;
            /* nonblocking: the parent's readers may take what poll saw */
            ssize_t k = recv(sv[1], buf, SZ, MSG_DONTWAIT);
            if (k < 0 && errno == EAGAIN) continue;
            if (k != SZ) { uint32_t bad[2] = {0xffffffff, (uint32_t)k}; if (write(pp[1], bad, 8) < 0) _exit(5); break; }
            uint32_t h[4], rec[2];
            memcpy(h, buf, HDR);
            rec[0] = h[0] == MAGIC ? (h[1] & 0xffff) : 0xfffffffe;
            rec[1] = h[2];
            if (write(pp[1], rec, 8) != 8) _exit(5);
            reads++;
        }
        _exit(me.err ? 6 : me.shortw ? 7 : 0);
    }
    close(pp[1]);
    uint32_t rec[2];
    int child_bad = 0, child_read = 0;
    while (read(pp[0], rec, 8) == 8) {
        if (rec[0] >= MAXW || rec[1] >= MAXSEQ) { child_bad++; continue; }
        if (atomic_exchange(&T.seen[rec[0]][rec[1]], 1)) atomic_fetch_add(&T.dup, 1);
        atomic_fetch_add(&T.count, 1);
        child_read++;
    }
    close(pp[0]);
    int st;
    waitpid(c, &st, 0);
    for (int i = 0; i < W; i++) pthread_join(ks[i].t, NULL);
    wait_count(W * PER + CPER);
    close(sv[0]);
    for (int i = W; i < W + R; i++) pthread_join(ks[i].t, NULL);
    close(sv[1]);
    /* the child's messages are writer 15's */
    int miss = missing(W, PER);
    for (int s = 0; s < CPER; s++) miss += !atomic_load(&T.seen[CHILD][s]);
    printf("fork: child exit %d, %d messages read, %d missing, %d doubled, %d torn or wrong (child: %d), "
           "%d out of order, %d writer errors, %d reader errors\n",
           WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st), atomic_load(&T.count), miss,
           atomic_load(&T.dup), atomic_load(&T.bad), child_bad, atomic_load(&T.order), errs(ks, W),
           errs(ks + W, R));
    printf("info: before the fork: %s; the child read %d messages\n", li, child_read);
}

/* ---- sleeper: a thread asleep in the kernel on an accepted end while another claims it */

#define SROUNDS 20
#define SLEN 100
static int s_conn, s_cl, s_ep, s_how; /* s_how: 0 epoll level, 1 EPOLLET, 2 poll() */
static int s_req[2], s_done[2];       /* L -> W "readable", W -> L "request read" (pipes) */
static int s_wakes, s_in, s_spurious, s_replies;

static uint8_t spay(int round, int i, int dir) { return (uint8_t)(round * 7 + i * 13 + dir * 101); }

static void xfer(int fd, void *b, int n, int rd) {
    for (int got = 0; got < n;) {
        ssize_t k = rd ? read(fd, (char *)b + got, n - got) : write(fd, (char *)b + got, n - got);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) { perror(rd ? "sleeper read" : "sleeper write"); exit(2); }
        got += k;
    }
}

/* L: asleep in epoll_wait (or poll) on the accepted end from before any lane; each wake-up
 * hands the end to W and, once W read the request, sleeps again: W's reply then asks for
 * the lane and claims it while L sleeps (slapd's listener and worker). */
static void *sleeper_l(void *p) {
    (void)p;
    for (int r = 0; r < SROUNDS; r++) {
        int n, in;
        if (s_how == 2) {
            struct pollfd f = {.fd = s_conn, .events = POLLIN};
            n = poll(&f, 1, -1);
            in = n == 1 && (f.revents & POLLIN);
        } else {
            struct epoll_event e;
            n = epoll_wait(s_ep, &e, 1, -1);
            in = n == 1 && e.data.u64 == 42 && (e.events & EPOLLIN);
        }
        if (n < 0 && errno == EINTR) { r--; continue; }
        if (n != 1) { printf("sleeper: L's wait returned %d\n", n); exit(2); }
        s_wakes++;
        s_in += in;
        char c = 'r', d;
        xfer(s_req[1], &c, 1, 0);
        xfer(s_done[0], &d, 1, 1);
        if (d == 's') r--; /* spurious: nothing there */
    }
    return NULL;
}

/* W: each request L said was there (a nonblocking peek first: nothing there is a spurious
 * wake-up), then its reply. */
static void *sleeper_w(void *p) {
    (void)p;
    uint8_t b[SLEN];
    for (int r = 1; r <= SROUNDS; r++) {
        char c;
        xfer(s_req[0], &c, 1, 1);
        ssize_t k = recv(s_conn, b, 1, MSG_DONTWAIT | MSG_PEEK);
        if (k < 0 && errno == EAGAIN) {
            s_spurious++;
            r--;
            xfer(s_done[1], "s", 1, 0);
            continue;
        }
        xfer(s_conn, b, SLEN, 1);
        xfer(s_done[1], "d", 1, 0);
        int ok = 1;
        for (int i = 0; i < SLEN; i++) ok &= b[i] == spay(r, i, 0);
        for (int i = 0; i < SLEN; i++) b[i] = spay(r, i, 1) ^ (uint8_t)!ok;
        xfer(s_conn, b, SLEN, 0);
    }
    return NULL;
}

static void request(int r) {
    uint8_t b[SLEN];
    for (int i = 0; i < SLEN; i++) b[i] = spay(r, i, 0);
    xfer(s_cl, b, SLEN, 0);
}

/* The client: reads each reply, then sends the next request (the first is sent before). */
static void *sleeper_c(void *p) {
    (void)p;
    uint8_t b[SLEN];
    for (int r = 1; r <= SROUNDS; r++) {
        if (r > 1) request(r);
        xfer(s_cl, b, SLEN, 1);
        int ok = 1;
        for (int i = 0; i < SLEN; i++) ok &= b[i] == spay(r, i, 1);
        s_replies += ok;
        atomic_store(&progress, r);
    }
    return NULL;
}

static const char *bind_dir = "/tmp";

static void run_sleeper(int how) {
    char path[108];
    snprintf(path, sizeof path, "%s/sleeper.%d", bind_dir, getpid());
    unlink(path);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    strcpy(a.sun_path, path);
    int srv = socket(AF_UNIX, SOCK_STREAM, 0);
    if (srv < 0 || bind(srv, (struct sockaddr *)&a, sizeof a) || listen(srv, 4)) { perror("sleeper listen"); exit(2); }
    s_cl = socket(AF_UNIX, SOCK_STREAM, 0);
    if (s_cl < 0 || connect(s_cl, (struct sockaddr *)&a, sizeof a)) { perror("sleeper connect"); exit(2); }
    s_conn = accept(srv, NULL, NULL);
    if (s_conn < 0) { perror("sleeper accept"); exit(2); }
    close(srv);
    unlink(path);
    s_how = how;
    s_wakes = s_in = s_spurious = s_replies = 0;
    if (pipe(s_req) || pipe(s_done)) { perror("pipe"); exit(2); }
    /* The client's first request before the server's first call: the client asks first
     * and its bytes wait in the daemon, so the lane comes at W's reply. */
    request(1);
    s_ep = epoll_create1(0);
    struct epoll_event e = {.events = EPOLLIN | (how == 1 ? EPOLLET : 0), .data.u64 = 42};
    if (how != 2 && epoll_ctl(s_ep, EPOLL_CTL_ADD, s_conn, &e)) { perror("epoll_ctl"); exit(2); }
    pthread_t l, w, c;
    pthread_create(&w, NULL, sleeper_w, NULL);
    pthread_create(&l, NULL, sleeper_l, NULL);
    pthread_create(&c, NULL, sleeper_c, NULL);
    pthread_join(c, NULL);
    pthread_join(w, NULL);
    pthread_join(l, NULL);
    char li[80];
    lanes_info(s_conn, s_cl, li, sizeof li);
    printf("%s: %d of %d replies right, L woke %d times (%d readable), %d spurious\n", scenario, s_replies,
           SROUNDS, s_wakes, s_in, s_spurious);
    printf("info: %s\n", li);
    close(s_ep);
    close(s_conn);
    close(s_cl);
    for (int i = 0; i < 2; i++) close(s_req[i]), close(s_done[i]);
}

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: %s SCENARIO [REPS]\n", argv[0]); return 2; }
    scenario = argv[1];
    int reps = argc > 2 ? atoi(argv[2]) : 1;
    if (argc > 3) bind_dir = argv[3];
    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGPIPE, SIG_IGN);
    signal(SIGALRM, on_alarm);
    for (int rep = 0; rep < reps; rep++) {
        tally_reset();
        atomic_store(&go, 0);
        atomic_store(&progress, 0);
        alarm(15);
        if (!strcmp(scenario, "stream")) run_stream();
        else if (!strcmp(scenario, "seqpacket")) run_seqpacket();
        else if (!strcmp(scenario, "nonblock")) run_nonblock();
        else if (!strcmp(scenario, "sigrestart")) run_signals(1);
        else if (!strcmp(scenario, "signorestart")) run_signals(0);
        else if (!strcmp(scenario, "close")) run_close(0);
        else if (!strcmp(scenario, "dup2")) run_close(1);
        else if (!strcmp(scenario, "closepeer")) run_close(2);
        else if (!strcmp(scenario, "closewrite")) run_close(3);
        else if (!strcmp(scenario, "fork")) run_fork();
        else if (!strcmp(scenario, "duplex")) run_duplex();
        else if (!strcmp(scenario, "sleeper_epoll")) run_sleeper(0);
        else if (!strcmp(scenario, "sleeper_epollet")) run_sleeper(1);
        else if (!strcmp(scenario, "sleeper_poll")) run_sleeper(2);
        else { fprintf(stderr, "unknown scenario %s\n", scenario); return 2; }
        alarm(0);
    }
    return 0;
}
