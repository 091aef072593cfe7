/* lanes_probe.h: what the lane attack programs (adversarial_lanes3.c, adversarial_lanes4.c,
 * adversarial_lanes6.c, adversarial_lanes7.c) look at in their own process: the time, RLIMIT_NOFILE set, a
 * descriptor's lane (its status file's lane= field) and how many eventfds the process
 * holds, its udsfs data files and lane mappings; a socket's way filled; and a laned stream
 * pair made. Included by each
 * (static functions: each program is one file, built by its script with gcc). */
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static void limit(int n) {
    struct rlimit r;
    getrlimit(RLIMIT_NOFILE, &r);
    r.rlim_cur = n;
    if (setrlimit(RLIMIT_NOFILE, &r) < 0) { perror("setrlimit"); exit(2); }
}

/* "direct", "none" (a kernel socket) or the status file's lane= value */
static const char *lane_of(int fd, char *out, size_t n) {
    char p[64], link[512], st[4096];
    snprintf(p, sizeof p, "/proc/self/fd/%d", fd);
    ssize_t k = readlink(p, link, sizeof link - 1);
    snprintf(out, n, "none");
    if (k <= 0) return out;
    link[k] = 0;
    char *d = strstr(link, "/data");
    if (!d) return out;
    strcpy(d, "/status");
    int s = open(link, O_RDONLY);
    if (s < 0) return out;
    k = read(s, st, sizeof st - 1);
    close(s);
    if (k <= 0) return out;
    st[k] = 0;
    char *l = strstr(st, "lane=");
    if (!l) return out;
    l += 5;
    size_t i = 0;
    while (l[i] && l[i] != '\n' && l[i] != ' ' && i + 1 < n) { out[i] = l[i]; i++; }
    out[i] = 0;
    return out;
}

/* How many of the process's descriptors link to a name with `what` in it. */
static inline int fds_naming(const char *what) {
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    int n = 0;
    char p[300], l[300];
    while (d && (e = readdir(d))) {
        snprintf(p, sizeof p, "/proc/self/fd/%s", e->d_name);
        ssize_t k = readlink(p, l, sizeof l - 1);
        if (k > 0) { l[k] = 0; if (strstr(l, what)) n++; }
    }
    if (d) closedir(d);
    return n;
}

static inline int eventfds(void) { return fds_naming("eventfd"); }

/* How many of the process's descriptors name a udsfs socket's data file. */
static inline int data_files(void) { return fds_naming("/data"); }

/* How many mappings of lane regions the process has. */
static inline int regions(void) {
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512];
    int n = 0;
    while (f && fgets(line, sizeof line, f)) n += strstr(line, "udsfs-lane") != NULL;
    if (f) fclose(f);
    return n;
}

/* Fills fd's way to its peer without waiting: the bytes sent. */
static inline long fill(int fd) {
    static char chunk[4096];
    long sent = 0;
    for (;;) {
        ssize_t k = send(fd, chunk, sizeof chunk, MSG_DONTWAIT);
        if (k <= 0) return sent;
        sent += k;
    }
}

/* A stream socketpair with a byte each way (laned on a mount with lanes), or exits. */
static inline void laned_stream_pair(int sv[2]) {
    char b;
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0) { perror("socketpair"); exit(2); }
    if (write(sv[0], "a", 1) != 1 || read(sv[1], &b, 1) != 1 || write(sv[1], "b", 1) != 1 ||
        read(sv[0], &b, 1) != 1) { perror("laned_stream_pair ping"); exit(2); }
}

/* A laned stream pair (its first end's lane written to `lane`) and a thread running
 * fn(&sv[0]), given `settle` microseconds to block in it: the thread. */
static inline pthread_t thread_on_laned_pair(int sv[2], char lane[32], void *(*fn)(void *),
                                             useconds_t settle) {
    pthread_t t;
    laned_stream_pair(sv);
    lane_of(sv[0], lane, 32);
    pthread_create(&t, NULL, fn, &sv[0]);
    usleep(settle);
    return t;
}
