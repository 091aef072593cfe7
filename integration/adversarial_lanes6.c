/* adversarial_lanes6.c: attacks on a laned end's sleeps (futex words, learnt looks),
 * run by adversarial_lanes6.sh on kernel sockets and through `udsfs run --lanes`.
 * Modes (each prints one line; "lane X" at its end is the lane's word, not compared):
 *   jmpout RESTART HOW  a SIGALRM handler siglongjmps out of the main thread's blocking
 *                    read (HOW read), or write with the way full (write), on a laned end
 *                    (SA_RESTART or not); the end is closed: does its peer get what was
 *                    sent, then EOF; both closed, five laned pairs made and closed, then
 *                    a SIGUSR1 handler runs three times (the library's trampoline).
 *   nest WHERE       a SIGUSR2 handler (on the thread's stack, or on a signal stack above
 *                    it) makes laned calls while the thread's blocking read sleeps; the
 *                    main thread then closes the read's number and the peer sends a byte:
 *                    does the read (which holds its file, as Linux's) get it.
 *   cancel           pthread_cancel of a thread blocked in a laned read: cancelled?
 *   idle HOW         a thread blocked on a laned end with nothing coming (HOW: read,
 *                    poll, epoll; pollloop, epollloop: 1 ms timeouts over and over): the
 *                    process's CPU over 2 s after 300 ms.
 *   hostile HOW      a thread's blocking read on a laned end; the peer (this process's
 *                    other thread, through the region's mapping as a peer maps it)
 *                    clears every *_sleeping word (HOW clear), sets them huge (huge), or
 *                    bumps and FUTEX_WAKEs the futex words for 1 s (bump); then closes
 *                    its end: the read's result, and the sleeper's CPU meanwhile. */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "lanes_probe.h"

static double cpu_of(clockid_t c) {
    struct timespec t;
    clock_gettime(c, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}



/* ---------------------------------------------------------------- jmpout */
static sigjmp_buf jb;
static volatile int usr1s;
static void on_alrm_jump(int s) { (void)s; siglongjmp(jb, 1); }
static void on_usr1(int s) { (void)s; usr1s++; }


static int jmpout(int restart, int writes) {
    int sv[2];
    char s[32], b = 0;
    laned_stream_pair(sv);
    lane_of(sv[0], s, sizeof s);
    long sent = writes ? fill(sv[0]) : 0;
    struct sigaction sa = {0};
    sa.sa_handler = on_alrm_jump;
    sa.sa_flags = restart ? SA_RESTART : 0;
    sigaction(SIGALRM, &sa, NULL);
    int jumped = 0;
    if (sigsetjmp(jb, 1) == 0) {
        struct itimerval it = {{0, 0}, {0, 200000}};
        setitimer(ITIMER_REAL, &it, NULL);
        ssize_t r = writes ? write(sv[0], "w", 1) : read(sv[0], &b, 1);
        printf("the call returned %zd?\n", r);
    } else {
        jumped = 1;
    }
    close(sv[0]);
    /* The peer reads what was sent, then must see EOF. */
    long got = 0;
    ssize_t r;
    char buf[4096];
    for (;;) {
        struct pollfd p = {sv[1], POLLIN, 0};
        if (poll(&p, 1, 1000) <= 0) { r = -2; break; }
        r = read(sv[1], buf, sizeof buf);
        if (r <= 0) break;
        got += r;
    }
    const char *peer = r == 0 ? "EOF" : r == -2 ? "nothing in 1 s (its socket still open)" : "an error";
    close(sv[1]);
    for (int i = 0; i < 5; i++) {
        int q[2];
        laned_stream_pair(q);
        close(q[0]);
        close(q[1]);
    }
    struct sigaction su = {0};
    su.sa_handler = on_usr1;
    sigaction(SIGUSR1, &su, NULL);
    for (int i = 0; i < 3; i++) raise(SIGUSR1);
    usleep(100000);
    printf("jumped out: %d; the peer after the end's close: %s, %s; SIGUSR1 handlers after: %d; "
           "regions mapped after: %d; eventfds after: %d; socket files after: %d; lane %s\n",
           jumped, got == sent ? "all that was sent" : "not what was sent", peer, usr1s,
           regions(), eventfds(), data_files(), s);
    return 0;
}

/* ------------------------------------------------------------------ nest */
static int nest_a[2], nest_b[2];
static volatile int nest_said = -1;
/* While the thread's read on nest_a sleeps: laned calls of the handler's own. */
static void on_usr2_calls(int s) {
    (void)s;
    char b = 0;
    nest_said = write(nest_b[0], "n", 1) == 1 && read(nest_b[1], &b, 1) == 1 && b == 'n';
}

static char *nest_stack;
static void *nest_reader(void *p) {
    (void)p;
    if (nest_stack) {
        stack_t st = {.ss_sp = nest_stack, .ss_size = 1 << 16, .ss_flags = 0};
        sigaltstack(&st, NULL);
    }
    char b = 0;
    ssize_t r = read(nest_a[0], &b, 1);
    return (void *)(long)(r == 1 && b == 'y');
}

/* nest same|alt: a handler (on the thread's stack, or on a signal stack above it: in
 * the main thread's frame) makes laned calls while the thread's read sleeps; then the
 * main thread closes the read's number and its peer sends a byte: Linux's read holds its
 * file, and gets the byte; the peer sees EOF once the read is over. */
static int nest(int alt) {
    char s[32], stack[1 << 16];
    nest_stack = alt ? stack : NULL;
    laned_stream_pair(nest_a);
    laned_stream_pair(nest_b);
    lane_of(nest_a[0], s, sizeof s);
    struct sigaction sa = {0};
    sa.sa_handler = on_usr2_calls;
    sa.sa_flags = SA_RESTART | (alt ? SA_ONSTACK : 0);
    sigaction(SIGUSR2, &sa, NULL);
    pthread_t t;
    pthread_create(&t, NULL, nest_reader, NULL);
    usleep(200000);
    pthread_kill(t, SIGUSR2);
    usleep(200000);
    close(nest_a[0]);
    int sent = write(nest_a[1], "y", 1) == 1;
    void *got = NULL;
    pthread_join(t, &got);
    struct pollfd p = {nest_a[1], POLLIN, 0};
    char b;
    int eof = poll(&p, 1, 1000) == 1 && read(nest_a[1], &b, 1) == 0;
    close(nest_a[1]);
    close(nest_b[0]);
    close(nest_b[1]);
    usleep(100000);
    printf("the handler's calls: %s; the byte sent after the close: %s; the read: %s; the "
           "peer after it: %s; regions mapped after: %d; eventfds after: %d; socket files "
           "after: %d; lane %s\n",
           nest_said == 1 ? "ok" : "failed", sent ? "sent" : "failed",
           got ? "got it" : "failed", eof ? "EOF" : "no EOF", regions(), eventfds(),
           data_files(), s);
    return 0;
}

/* ---------------------------------------------------------------- cancel */
static void *read_one(void *p) {
    char b;
    (void)!read(*(int *)p, &b, 1);
    return NULL;
}

static int cancel(void) {
    int sv[2];
    char s[32];
    pthread_t t = thread_on_laned_pair(sv, s, read_one, 300000);
    double t0 = now();
    pthread_cancel(t);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 2;
    void *r = NULL;
    int e = pthread_timedjoin_np(t, &r, &until);
    double took = now() - t0;
    printf("pthread_cancel of a thread in a blocking read: %s; lane %s\n",
           e ? "not cancelled in 2 s" : r == PTHREAD_CANCELED ? (took < 0.5 ? "cancelled at once" : "cancelled late") : "returned?", s);
    _exit(0);
}

/* ---------------------------------------------------------------- idle */
static const char *idle_how;
static void *idle_wait(void *p) {
    int idle_fd = *(int *)p;
    char b;
    struct pollfd pf = {idle_fd, POLLIN, 0};
    struct epoll_event ev = {.events = EPOLLIN}, out;
    int ep = -1;
    if (strstr(idle_how, "epoll")) {
        ep = epoll_create1(0);
        epoll_ctl(ep, EPOLL_CTL_ADD, idle_fd, &ev);
    }
    if (!strcmp(idle_how, "read")) (void)!read(idle_fd, &b, 1);
    else if (!strcmp(idle_how, "poll")) poll(&pf, 1, -1);
    else if (!strcmp(idle_how, "epoll")) epoll_wait(ep, &out, 1, -1);
    else if (!strcmp(idle_how, "pollloop")) for (;;) poll(&pf, 1, 1);
    else if (!strcmp(idle_how, "epollloop")) for (;;) epoll_wait(ep, &out, 1, 1);
    return NULL;
}

static int idle(const char *how) {
    int sv[2];
    char s[32];
    idle_how = how;
    thread_on_laned_pair(sv, s, idle_wait, 300000);
    double c0 = cpu_of(CLOCK_PROCESS_CPUTIME_ID);
    usleep(2000000);
    double ms = (cpu_of(CLOCK_PROCESS_CPUTIME_ID) - c0) * 1000;
    /* the loops' own calls cost the kernel ~10-60 ms here; a sleep ~0 */
    int limit = strstr(how, "loop") ? 250 : 40;
    printf("%s: CPU over 2 s %s; lane %s\n", how, ms < limit ? "low" : "high", s);
    fprintf(stderr, "  (%s: %.1f ms of CPU over 2 s)\n", how, ms);
    _exit(0);
}

/* ---------------------------------------------------------------- altstack */
/* Two threads share one sigaltstack and a fatal SA_ONSTACK SIGSEGV handler (as
 * varnishd's THR_Init does), with a laned pair open; each loops epoll_ctl on
 * its own set: ADD and DEL with a NULL event (Linux ignores a DEL's) of a pipe
 * and of the laned end, and a MOD with NULL (EFAULT). Linux raises no signal;
 * the library's probes of the program's memory must not either (a fault of its
 * own runs on the shared stack: two at once resumed each in the other's
 * context, and varnishd's child died). */
static stack_t alt_stack;
static int alt_end;
static void alt_fatal(int s) { (void)s; write(2, "SIGSEGV in the program\n", 23); _exit(3); }
static void *alt_loop(void *arg) {
    int ep = epoll_create1(0), p[2], efault = 0;
    (void)arg;
    if (sigaltstack(&alt_stack, NULL)) { perror("sigaltstack"); exit(2); }
    if (pipe(p)) { perror("pipe"); exit(2); }
    for (int i = 0; i < 20000; i++) {
        int fd = i % 2 ? p[0] : alt_end;
        struct epoll_event ev = { .events = EPOLLIN };
        if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev)) { perror("add"); exit(2); }
        if (epoll_ctl(ep, EPOLL_CTL_MOD, fd, NULL) == -1 && errno == EFAULT) efault++;
        if (epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL)) { perror("del"); exit(2); }
    }
    return (void *)(long)efault;
}

static int altstack(void) {
    int sv[2];
    char s[32];
    void *r[2];
    pthread_t t[2];
    struct sigaction sa = { .sa_handler = alt_fatal, .sa_flags = SA_ONSTACK };
    laned_stream_pair(sv);
    alt_end = sv[0];
    alt_stack.ss_size = 1 << 16;
    alt_stack.ss_sp = malloc(alt_stack.ss_size);
    sigaction(SIGSEGV, &sa, NULL);
    for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, alt_loop, NULL);
    for (int i = 0; i < 2; i++) pthread_join(t[i], &r[i]);
    printf("two threads on one signal stack: no signal; MOD with NULL: EFAULT %s; lane %s\n",
           r[0] == (void *)20000L && r[1] == (void *)20000L ? "each time" : "not always",
           lane_of(sv[0], s, sizeof s));
    return 0;
}

/* ---------------------------------------------------------------- hostile */
static volatile ssize_t h_got = -9;
static volatile int h_err;
static clockid_t h_clock;
static void *h_read(void *p) {
    char b;
    pthread_getcpuclockid(pthread_self(), &h_clock);
    ssize_t r = read(*(int *)p, &b, 1);
    h_err = errno;
    h_got = r;
    return NULL;
}

/* The header of the process's one lane region (its memfd mapped at offset 0), or NULL. */
static volatile uint32_t *region(void) {
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512];
    unsigned long lo, off;
    volatile uint32_t *h = NULL;
    while (f && fgets(line, sizeof line, f)) {
        if (!strstr(line, "udsfs-lane")) continue;
        if (sscanf(line, "%lx-%*x %*s %lx", &lo, &off) == 2 && off == 0) {
            h = (volatile uint32_t *)lo;
            break;
        }
    }
    if (f) fclose(f);
    return h;
}
#define W(h, off) ((h)[(off) / 4])

static void wake(volatile uint32_t *w) { syscall(SYS_futex, w, FUTEX_WAKE, 0x7fffffff, NULL, NULL, 0); }

static int hostile(const char *how) {
    int sv[2];
    char s[32];
    thread_on_laned_pair(sv, s, h_read, 300000);
    volatile uint32_t *h = region();
    double c0 = cpu_of(h_clock);
    double end = now() + 1.0;
    while (h && now() < end) {
        for (int d = 0; d < 2; d++) {
            int b = 64 + 256 * d;
            if (!strcmp(how, "clear")) W(h, b + 16) = 0, W(h, b + 140) = 0;
            else if (!strcmp(how, "huge")) W(h, b + 16) = 0x7fffffff, W(h, b + 140) = 0x7fffffff;
            else if (!strcmp(how, "bump")) {
                __atomic_fetch_add(&W(h, b + 12), 1, __ATOMIC_SEQ_CST);
                wake(&W(h, b + 12));
                __atomic_fetch_add(&W(h, b + 136), 1, __ATOMIC_SEQ_CST);
                wake(&W(h, b + 136));
            }
        }
        if (strcmp(how, "bump")) usleep(1000);
    }
    if (!h) usleep(1000000);
    double ms = (cpu_of(h_clock) - c0) * 1000;
    double t0 = now();
    close(sv[1]);
    while (h_got == -9 && now() - t0 < 3) usleep(10000);
    double took = now() - t0;
    const char *got = h_got == 0 ? "EOF" : h_got == -9 ? "still asleep 3 s after" : "other";
    printf("%s: the read at the peer's close: %s %s; the sleeper's CPU meanwhile %s; lane %s\n", how, got,
           h_got == -9 ? "" : took < 0.5 ? "at once" : "late", ms < 100 ? "low" : "high", s);
    fprintf(stderr, "  (%s: region %s, sleeper's CPU %.1f ms in 1 s, read %zd after %.3f s)\n", how,
            h ? "mapped" : "none", ms, (ssize_t)h_got, took);
    _exit(0);
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IONBF, 0);
    if (argc >= 2 && !strcmp(argv[1], "cancel")) return cancel();
    (void)limit;
    if (argc >= 4 && !strcmp(argv[1], "jmpout")) return jmpout(atoi(argv[2]), !strcmp(argv[3], "write"));
    if (argc >= 3 && !strcmp(argv[1], "nest")) return nest(!strcmp(argv[2], "alt"));
    if (argc >= 3 && !strcmp(argv[1], "idle")) return idle(argv[2]);
    if (argc >= 3 && !strcmp(argv[1], "hostile")) return hostile(argv[2]);
    if (argc >= 2 && !strcmp(argv[1], "altstack")) return altstack();
    fprintf(stderr, "usage: %s jmpout 0|1 read|write | nest same|alt | idle read|poll|epoll|pollloop|epollloop | hostile clear|huge|bump | altstack\n", argv[0]);
    return 2;
}
