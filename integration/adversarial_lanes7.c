/* adversarial_lanes7.c: siglongjmp out of a laned end's blocking calls as unusual programs
 * do it (preload/src/wait_record.rs undoes a read's or write's sleep left so; lane_ready.rs's
 * poll and epoll_wait hold their ends while they sleep), run by adversarial_lanes7.sh on
 * kernel sockets and through `udsfs run --lanes`. A kicker thread sends each signal once
 * the thread is asleep in a system call (/proc/self/task/TID/syscall: the library's futex
 * or ppoll, the kernel's read), so the jump leaves the sleep itself.
 * Modes (each prints one line; "lane X" at its end is the lane's word, not compared):
 *   loop HOW       300 rounds, each on a fresh laned pair: a SIGALRM handler jumps out of
 *                  the blocking read (HOW sleep: once the read sleeps; write: a write with
 *                  the way full, once it sleeps, the peer's bytes then checked too; race: a timer 1-400
 *                  us after the read began, RACE_US to change, landing anywhere in the
 *                  call), the end closed: does every round's peer see EOF at once; what is
 *                  left at the end (race: where each leaking round's jump landed, on
 *                  stderr: addr2line -f -e libudsfs_preload.so OFFSET names it).
 *   nested HOW     a SIGALRM handler (SA_RESTART) interrupts a blocking read on pair A and
 *                  itself reads on pair B; a SIGUSR1 during that inner read jumps to a
 *                  sigsetjmp inside the SIGALRM handler (HOW handler: it then closes B's end
 *                  and returns: the outer read goes on and gets the byte sent after), or to
 *                  main (out: both reads left, both ends closed): each peer's EOF.
 *   threads        two threads each jump out of their own blocking read (pthread_kill to
 *                  each at once) and close their end, while two more keep a laned
 *                  ping-pong going: the ping-pong unaffected, both peers EOF.
 *   handoff HOW    a thread jumps out of its blocking read, then makes no laned call (HOW
 *                  exit: it ends; park: it sleeps in pause()); the main thread closes the
 *                  end: the peer's EOF.
 *   deep           a jump out of a blocking read, then the end closed from a call chain
 *                  8 deep with a 16 KiB array a level: the peer's EOF; then a pair made and
 *                  closed from main: the peer's EOF then.
 *   single HOW     a jump out of a blocking poll, epoll_wait, recvmsg or sendmsg (the way
 *                  full) on a laned end (HOW), then the end closed (and the epoll set): the
 *                  peer's bytes and EOF, what is left; pollagain, epollagain: the end kept
 *                  first, a byte through it, then a 500 ms poll (epoll_wait) with nothing
 *                  coming: timed out, and its thread's CPU. */
#define _GNU_SOURCE
#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <execinfo.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <ucontext.h>
#include <time.h>
#include <unistd.h>

#include "lanes_probe.h"

static pid_t tid(void) { return (pid_t)syscall(SYS_gettid); }



static void left_over(char *out, size_t n) {
    snprintf(out, n, "regions mapped after: %d; eventfds after: %d; socket files after: %d",
             regions(), eventfds(), data_files());
}

/* ------------------------------------------------------------ the kicker */
/* The system call thread t sleeps in (-1: none, running). */
static long sleeps_in(pid_t t) {
    char p[64], b[128];
    snprintf(p, sizeof p, "/proc/self/task/%d/syscall", t);
    int f = open(p, O_RDONLY);
    if (f < 0) return -1;
    ssize_t k = read(f, b, sizeof b - 1);
    close(f);
    if (k <= 0 || !isdigit((unsigned char)b[0])) return -1;
    b[k] = 0;
    return atol(b);
}

/* A blocking sleep's call: the kernel's socket calls, or the library's futex and ppoll, or
 * epoll_wait (not its ioctls to the daemon, nor a look at the ring). */
static int a_sleep(long nr) {
    static const long sleeps[] = {SYS_read, SYS_write, SYS_poll, SYS_recvfrom, SYS_sendto,
                                  SYS_recvmsg, SYS_sendmsg, SYS_futex, SYS_epoll_wait,
                                  SYS_epoll_pwait, SYS_ppoll, SYS_readv, SYS_writev};
    for (size_t i = 0; i < sizeof sleeps / sizeof *sleeps; i++)
        if (nr == sleeps[i]) return 1;
    return 0;
}

/* Waits (3 s at most) until thread t sleeps in a blocking call, twice 2 ms apart: the call. */
static long wait_asleep(pid_t t) {
    double end = now() + 3;
    long nr = -1;
    while (now() < end) {
        nr = sleeps_in(t);
        if (a_sleep(nr)) {
            usleep(2000);
            if (sleeps_in(t) == nr) return nr;
        }
        usleep(200);
    }
    return nr;
}

static atomic_int kick_sig;
static atomic_int kick_tid;
static long kicked_in; /* the call the last kick found the thread in */

static void *kicker(void *p) {
    (void)p;
    for (;;) {
        int sig = atomic_load(&kick_sig);
        if (!sig) {
            usleep(200);
            continue;
        }
        pid_t t = atomic_load(&kick_tid);
        kicked_in = wait_asleep(t);
        atomic_store(&kick_sig, 0);
        syscall(SYS_tgkill, getpid(), t, sig);
    }
    return NULL;
}

/* Asks the kicker to send sig to this thread once it sleeps (async-signal-safe). */
static void kick_me(int sig) {
    atomic_store(&kick_tid, tid());
    atomic_store(&kick_sig, sig);
}

static void start_kicker(void) {
    pthread_t k;
    pthread_create(&k, NULL, kicker, NULL);
    pthread_detach(k);
}

static const char *call_name(long nr) {
    return nr == SYS_futex ? "futex" : nr == SYS_ppoll ? "ppoll" : nr == SYS_read ? "read"
         : nr == SYS_write ? "write" : nr == SYS_poll ? "poll" : nr == SYS_recvmsg ? "recvmsg"
         : nr == SYS_sendmsg ? "sendmsg" : nr == SYS_epoll_wait ? "epoll_wait"
         : nr == SYS_epoll_pwait ? "epoll_pwait" : nr < 0 ? "none (running)" : "other";
}

/* ------------------------------------------------------------ jumps */
static __thread sigjmp_buf *alrm_to, *usr1_to;
static void on_alrm_jump(int s) { (void)s; siglongjmp(*alrm_to, 1); }
static void on_usr1_jump(int s) { (void)s; siglongjmp(*usr1_to, 1); }

static void handle(int sig, void (*h)(int), int flags) {
    struct sigaction sa = {0};
    sa.sa_handler = h;
    sa.sa_flags = flags;
    sigaction(sig, &sa, NULL);
}

/* The peer's view after its other end was closed: "EOF", or what else within `wait` s
 * (bytes it read counted into *got). */
static const char *peer_sees(int fd, double wait, long *got) {
    char buf[4096];
    for (;;) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, (int)(wait * 1000)) <= 0) return "nothing (its socket still open)";
        ssize_t r = read(fd, buf, sizeof buf);
        if (r == 0) return "EOF";
        if (r < 0) return "an error";
        if (got) *got += r;
    }
}


/* ------------------------------------------------------------ loop */
/* Where the last SIGALRM landed (its instruction pointer), for loop race's report. */
static volatile unsigned long landed;
/* and the calls it landed in (backtrace: warmed up before, for the report only) */
static void *landed_in[16];
static int landed_n;
static void on_alrm_jump_noted(int s, siginfo_t *i, void *ctx) {
    (void)s, (void)i;
    landed = (unsigned long)((ucontext_t *)ctx)->uc_mcontext.gregs[REG_RIP];
    landed_n = backtrace(landed_in, 16);
    siglongjmp(*alrm_to, 1);
}

/* "object+offset" of an address (addr2line -e object offset names the place). */
static void place(unsigned long a, char *out, size_t n) {
    Dl_info d;
    if (dladdr((void *)a, &d) && d.dli_fname)
        snprintf(out, n, "%s+0x%lx", d.dli_fname, a - (unsigned long)d.dli_fbase);
    else
        snprintf(out, n, "0x%lx", a);
}

static int loop(int race, int writes) {
    const int rounds = 300;
    int jumped = 0, eofs = 0, direct = 0, first_bad = -1, asleep = 0, mapped = 0;
    static long sent; /* kept over the jump */
    char s[32], left[200];
    sigjmp_buf jb;
    alrm_to = &jb;
    struct sigaction sa = {0};
    sa.sa_sigaction = on_alrm_jump_noted;
    sa.sa_flags = SA_RESTART | SA_SIGINFO;
    sigaction(SIGALRM, &sa, NULL);
    start_kicker();
    landed_n = backtrace(landed_in, 16);
    srand(7);
    /* the timer's range: the read's first look and its way into the sleep come early */
    int race_us = getenv("RACE_US") ? atoi(getenv("RACE_US")) : 400;
    for (int i = 0; i < rounds; i++) {
        int sv[2];
        char b;
        laned_stream_pair(sv);
        direct += !strcmp(lane_of(sv[0], s, sizeof s), "direct");
        if (sigsetjmp(jb, 1) == 0) {
            if (race) {
                struct itimerval it = {{0, 0}, {0, 1 + rand() % race_us}};
                setitimer(ITIMER_REAL, &it, NULL);
            } else {
                kick_me(SIGALRM);
            }
            sent = writes ? fill(sv[0]) : 0;
            ssize_t r = writes ? write(sv[0], "w", 1) : read(sv[0], &b, 1);
            printf("round %d: the read returned %zd?\n", i, r);
        } else {
            jumped++;
            asleep += a_sleep(kicked_in);
        }
        close(sv[0]);
        long got = 0;
        int eof = !strcmp(peer_sees(sv[1], 0.5, &got), "EOF") && got == sent;
        eofs += eof;
        if (!eof && first_bad < 0) first_bad = i;
        close(sv[1]);
        int now_mapped = regions();
        if (race && (!eof || now_mapped > mapped)) {
            char at[300];
            place(landed, at, sizeof at);
            fprintf(stderr, "  (round %d: %s%s; the jump landed at %s, in", i, eof ? "" : "no EOF, ",
                    now_mapped > mapped ? "a region left" : "no region left", at);
            for (int f = 1; f < landed_n; f++) {
                place((unsigned long)landed_in[f] - 1, at, sizeof at);
                fprintf(stderr, " %s", strrchr(at, '/') ? strrchr(at, '/') + 1 : at);
            }
            fprintf(stderr, ")\n");
        }
        mapped = now_mapped;
        /* a run of failures says enough (each waits 0.5 s) */
        if (i - eofs >= 5) break;
    }
    usleep(100000);
    left_over(left, sizeof left);
    printf("jumped out: %d of %d; the peer's bytes, then EOF at once: %d of %d; %s; lane %s\n", jumped,
           rounds, eofs, rounds, left, direct == rounds ? "direct" : direct ? "partly" : s);
    if (first_bad >= 0 || direct != rounds)
        fprintf(stderr, "  (first round without EOF: %d; laned pairs: %d)\n", first_bad, direct);
    if (!race) fprintf(stderr, "  (kicked while asleep: %d)\n", asleep);
    return 0;
}

/* ------------------------------------------------------------ nested */
static int A[2], B[2];
static int nested_out;
static sigjmp_buf main_jb;
static volatile int inner_jumped, alrm_done, b_closed;
static volatile ssize_t inner_r = -9;
static volatile long outer_call, inner_call;

static void on_alrm_reads(int s) {
    (void)s;
    sigjmp_buf here;
    char b;
    outer_call = kicked_in;
    usr1_to = nested_out ? &main_jb : &here;
    if (sigsetjmp(here, 1) == 0) {
        kick_me(SIGUSR1);
        inner_r = read(B[0], &b, 1);
    } else {
        inner_jumped = 1;
    }
    inner_call = kicked_in;
    b_closed = close(B[0]) == 0;
    alrm_done = 1;
}

/* Sends the outer read its byte once the SIGALRM handler is over. */
static void *send_after(void *p) {
    (void)p;
    double end = now() + 3;
    while (!alrm_done && now() < end) usleep(1000);
    usleep(50000);
    (void)!write(A[1], "y", 1);
    return NULL;
}

static int nested(int out) {
    char s[32], b = 0, left[200];
    nested_out = out;
    laned_stream_pair(A);
    laned_stream_pair(B);
    lane_of(A[0], s, sizeof s);
    handle(SIGALRM, on_alrm_reads, SA_RESTART);
    handle(SIGUSR1, on_usr1_jump, SA_RESTART);
    start_kicker();
    pthread_t w;
    if (!out) pthread_create(&w, NULL, send_after, NULL);
    const char *outer;
    if (sigsetjmp(main_jb, 1) == 0) {
        kick_me(SIGALRM);
        ssize_t r = read(A[0], &b, 1);
        outer = r == 1 && b == 'y' ? "got the byte sent after" : r < 0 ? strerror(errno) : "other";
    } else {
        outer = "left by the jump to main";
        close(B[0]);
    }
    if (!out) pthread_join(w, NULL);
    const char *b_peer = peer_sees(B[1], 1, NULL);
    close(A[0]);
    const char *a_peer = peer_sees(A[1], 1, NULL);
    close(A[1]);
    close(B[1]);
    usleep(100000);
    left_over(left, sizeof left);
    printf("the inner read: %s; the outer read: %s; B's peer: %s; A's peer after its close: %s; "
           "%s; lane %s\n",
           inner_jumped ? "left by the jump into the handler" : out ? "left by the jump to main" : "returned?",
           outer, b_peer, a_peer, left, s);
    fprintf(stderr, "  (the outer read kicked in %s, the inner in %s)\n", call_name(outer_call),
            call_name(inner_call));
    return 0;
}

/* ------------------------------------------------------------ threads */
struct reader {
    int sv[2];
    pid_t tid;
    int jumped, closed;
};

static void *jumping_reader(void *p) {
    struct reader *r = p;
    sigjmp_buf jb;
    char b;
    r->tid = tid();
    alrm_to = &jb;
    if (sigsetjmp(jb, 1) == 0) (void)!read(r->sv[0], &b, 1);
    else r->jumped = 1;
    r->closed = close(r->sv[0]) == 0;
    return NULL;
}

static int P[2];
static atomic_int pp_stop;
static long pp_rounds, pp_bad;
static void *echo(void *p) {
    (void)p;
    char b;
    while (read(P[1], &b, 1) == 1 && write(P[1], &b, 1) == 1) {}
    return NULL;
}
static void *pinger(void *p) {
    (void)p;
    for (unsigned char i = 0; !atomic_load(&pp_stop); i++) {
        unsigned char b = 0;
        if (write(P[0], &i, 1) != 1 || read(P[0], &b, 1) != 1 || b != i) {
            pp_bad++;
            break;
        }
        pp_rounds++;
    }
    return NULL;
}

static int threads(void) {
    struct reader r[2] = {0};
    char s[32], left[200];
    pthread_t t[2], pe, pg;
    handle(SIGALRM, on_alrm_jump, SA_RESTART);
    laned_stream_pair(P);
    lane_of(P[0], s, sizeof s);
    pthread_create(&pe, NULL, echo, NULL);
    pthread_create(&pg, NULL, pinger, NULL);
    for (int i = 0; i < 2; i++) {
        laned_stream_pair(r[i].sv);
        pthread_create(&t[i], NULL, jumping_reader, &r[i]);
    }
    usleep(20000);
    long calls[2];
    for (int i = 0; i < 2; i++) calls[i] = wait_asleep(r[i].tid);
    long before = pp_rounds;
    for (int i = 0; i < 2; i++) pthread_kill(t[i], SIGALRM);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    const char *peer0 = peer_sees(r[0].sv[1], 1, NULL), *peer1 = peer_sees(r[1].sv[1], 1, NULL);
    usleep(200000);
    long during = pp_rounds - before;
    atomic_store(&pp_stop, 1);
    pthread_join(pg, NULL);
    close(P[0]);
    pthread_join(pe, NULL);
    close(P[1]);
    close(r[0].sv[1]);
    close(r[1].sv[1]);
    usleep(100000);
    left_over(left, sizeof left);
    printf("the readers jumped out: %d, %d, closed their ends: %d, %d; their peers: %s, %s; "
           "the ping-pong: %s; %s; lane %s\n",
           r[0].jumped, r[1].jumped, r[0].closed, r[1].closed, peer0, peer1,
           pp_bad ? "broken" : during > 0 ? "went on" : "stalled", left, s);
    fprintf(stderr, "  (readers kicked in %s, %s; ping-pong rounds after the kicks: %ld)\n",
            call_name(calls[0]), call_name(calls[1]), during);
    return 0;
}

/* ------------------------------------------------------------ handoff */
static int ho_sv[2];
static int ho_park;
static atomic_int ho_jumped;
static void *ho_reader(void *p) {
    (void)p;
    sigjmp_buf jb;
    char b;
    alrm_to = &jb;
    if (sigsetjmp(jb, 1) == 0) (void)!read(ho_sv[0], &b, 1);
    atomic_store(&ho_jumped, 1);
    /* no laned call of this thread's after the jump: it ends, or sleeps in no socket call */
    if (ho_park) pause();
    return NULL;
}

static int handoff(int park) {
    char s[32], left[200];
    pthread_t t;
    ho_park = park;
    handle(SIGALRM, on_alrm_jump, SA_RESTART);
    laned_stream_pair(ho_sv);
    lane_of(ho_sv[0], s, sizeof s);
    pthread_create(&t, NULL, ho_reader, NULL);
    usleep(20000);
    long call = 0;
    pid_t rt = 0;
    /* the reader's tid: the task that is not this one and sleeps (the only other) */
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (atoi(e->d_name) > 0 && atoi(e->d_name) != tid()) rt = atoi(e->d_name);
    if (d) closedir(d);
    call = wait_asleep(rt);
    pthread_kill(t, SIGALRM);
    double end = now() + 3;
    while (!atomic_load(&ho_jumped) && now() < end) usleep(1000);
    if (!park) pthread_join(t, NULL);
    else usleep(50000);
    int closed = close(ho_sv[0]) == 0;
    const char *peer = peer_sees(ho_sv[1], 1, NULL);
    close(ho_sv[1]);
    usleep(100000);
    left_over(left, sizeof left);
    printf("the reader jumped out: %d, then %s; its end closed by main: %d; the peer: %s; %s; lane %s\n",
           atomic_load(&ho_jumped), park ? "parked in pause()" : "ended", closed, peer, left, s);
    fprintf(stderr, "  (the reader kicked in %s)\n", call_name(call));
    return 0;
}

/* ------------------------------------------------------------ deep */
static int deep_close(int level, int fd) {
    volatile char frame[16384];
    frame[0] = (char)level;
    frame[sizeof frame - 1] = frame[0];
    int r = level == 0 ? close(fd) : deep_close(level - 1, fd);
    return r + frame[sizeof frame - 1] - frame[0];
}

static void *peer_sees_in_thread(void *fd) { return (void *)peer_sees(*(int *)fd, 1, NULL); }

/* The main thread set to jump to `jb` from SIGALRM (kick_me sends it once asleep), and a
 * laned pair made (its first end's lane written to `lane`). */
static void jumping_pair(sigjmp_buf *jb, int sv[2], char lane[32]) {
    alrm_to = jb;
    handle(SIGALRM, on_alrm_jump, SA_RESTART);
    start_kicker();
    laned_stream_pair(sv);
    lane_of(sv[0], lane, 32);
}

static int deep(void) {
    int sv[2], q[2];
    char s[32], b, left[200];
    sigjmp_buf jb;
    jumping_pair(&jb, sv, s);
    int jumped = 0;
    if (sigsetjmp(jb, 1) == 0) {
        kick_me(SIGALRM);
        (void)!read(sv[0], &b, 1);
    } else {
        jumped = 1;
    }
    int closed = deep_close(8, sv[0]) == 0;
    /* Looked at from another thread: a call of this thread's own would undo the read. */
    pthread_t t;
    void *seen = NULL;
    pthread_create(&t, NULL, peer_sees_in_thread, &sv[1]);
    pthread_join(t, &seen);
    const char *after_deep = seen;
    laned_stream_pair(q);
    close(q[0]);
    close(q[1]);
    const char *after_main = peer_sees(sv[1], 1, NULL);
    close(sv[1]);
    usleep(100000);
    left_over(left, sizeof left);
    printf("jumped out: %d; closed 8 calls deep: %d; the peer after it: %s; after a pair made "
           "and closed from main: %s; %s; lane %s\n",
           jumped, closed, after_deep, after_main, left, s);
    return 0;
}

/* ------------------------------------------------------------ single */
static double thread_cpu(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static int single(const char *how) {
    int sv[2], ep = -1;
    char s[32], b, left[200];
    long sent = 0, got = 0;
    sigjmp_buf jb;
    jumping_pair(&jb, sv, s);
    int writes = !strcmp(how, "sendmsg"), again = strstr(how, "again") != NULL;
    if (writes) sent = fill(sv[0]);
    if (!strncmp(how, "epoll", 5)) {
        struct epoll_event ev = {.events = EPOLLIN};
        ep = epoll_create1(0);
        epoll_ctl(ep, EPOLL_CTL_ADD, sv[0], &ev);
    }
    int jumped = 0;
    if (sigsetjmp(jb, 1) == 0) {
        kick_me(SIGALRM);
        struct pollfd p = {sv[0], POLLIN, 0};
        struct epoll_event out;
        struct iovec v = {&b, 1};
        struct msghdr m = {.msg_iov = &v, .msg_iovlen = 1};
        long r = -1;
        if (!strncmp(how, "poll", 4)) r = poll(&p, 1, -1);
        else if (!strncmp(how, "epoll", 5)) r = epoll_wait(ep, &out, 1, -1);
        else if (!strcmp(how, "recvmsg")) r = recvmsg(sv[0], &m, 0);
        else if (writes) r = sendmsg(sv[0], &m, 0);
        printf("the call returned %ld?\n", r);
    } else {
        jumped = 1;
    }
    /* again: the end kept; a byte through it, then a wait with nothing coming */
    char waited[120] = "";
    if (again) {
        int through = write(sv[1], "z", 1) == 1 && read(sv[0], &b, 1) == 1;
        struct pollfd p = {sv[0], POLLIN, 0};
        struct epoll_event out;
        double c0 = thread_cpu();
        int r = ep >= 0 ? epoll_wait(ep, &out, 1, 500) : poll(&p, 1, 500);
        double ms = (thread_cpu() - c0) * 1000;
        snprintf(waited, sizeof waited, "a byte through after: %s; a 500 ms wait then: %s, its CPU %s; ",
                 through ? "yes" : "no", r == 0 ? "timed out" : r > 0 ? "ready?" : "failed",
                 ms < 50 ? "low" : "high");
        fprintf(stderr, "  (%s: the 500 ms wait's CPU: %.1f ms)\n", how, ms);
    }
    int closed = close(sv[0]) == 0;
    if (ep >= 0) close(ep);
    const char *peer = peer_sees(sv[1], 1, &got);
    close(sv[1]);
    usleep(100000);
    left_over(left, sizeof left);
    printf("%s: jumped out: %d; %sclosed: %d; the peer: %s, %s; %s; lane %s\n", how, jumped,
           waited, closed, got == sent ? "all that was sent" : "not what was sent", peer, left, s);
    fprintf(stderr, "  (%s kicked in %s)\n", how, call_name(kicked_in));
    return 0;
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IONBF, 0);
    (void)limit;
    if (argc >= 3 && !strcmp(argv[1], "loop")) return loop(!strcmp(argv[2], "race"), !strcmp(argv[2], "write"));
    if (argc >= 3 && !strcmp(argv[1], "nested")) return nested(!strcmp(argv[2], "out"));
    if (argc >= 2 && !strcmp(argv[1], "threads")) return threads();
    if (argc >= 2 && !strcmp(argv[1], "deep")) return deep();
    if (argc >= 3 && !strcmp(argv[1], "handoff")) return handoff(!strcmp(argv[2], "park"));
    if (argc >= 3 && !strcmp(argv[1], "single")) return single(argv[2]);
    fprintf(stderr, "usage: %s loop sleep|write|race | nested handler|out | threads | handoff exit|park | deep | "
                    "single poll|epoll|pollagain|epollagain|recvmsg|sendmsg\n", argv[0]);
    return 2;
}
