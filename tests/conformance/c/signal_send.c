/* Sends from a signal handler (the self-pipe trick) while the interrupted thread
 * sends too and allocates: a send or receive on a socketpair must not allocate or
 * take locks, or the handler deadlocks on a lock the interrupted code holds
 * (integration/signal_send.sh runs it on kernel sockets and through `udsfs run`).
 * Prints what went through; a deadlock is the runner's timeout. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

static int wake[2];     /* the self-pipe: the handler writes to wake[0] */
static volatile sig_atomic_t fired, handler_sent;

static void on_alarm(int sig) {
    (void)sig;
    int saved = errno;
    char b = 's', r[64];
    /* MSG_DONTWAIT and MSG_NOSIGNAL take the library's message path. */
    if (send(wake[0], &b, 1, MSG_DONTWAIT | MSG_NOSIGNAL) == 1)
        handler_sent++;
    /* A receive too, as handlers that drain their own pipe do. */
    (void)recv(wake[0], r, sizeof r, MSG_DONTWAIT);
    fired++;
    errno = saved;
}

static void *drain(void *arg) {
    (void)arg;
    char buf[256];
    for (;;) {
        ssize_t n = recv(wake[1], buf, sizeof buf, 0);
        if (n < 0 && errno != EINTR)
            break;
        if (n > 0 && buf[0] == 'q')
            break;
    }
    return NULL;
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 20000;
    if (socketpair(AF_UNIX, SOCK_DGRAM, 0, wake) < 0) {
        perror("socketpair");
        return 1;
    }
    sigset_t alarm;
    sigemptyset(&alarm);
    sigaddset(&alarm, SIGALRM);
    /* The drainer never takes the signal: it goes to the sending thread. */
    pthread_sigmask(SIG_BLOCK, &alarm, NULL);
    pthread_t t;
    pthread_create(&t, NULL, drain, NULL);
    pthread_sigmask(SIG_UNBLOCK, &alarm, NULL);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGALRM, &sa, NULL);
    /* Every millisecond: through udsfs a handler makes two FUSE round trips, and a
     * shorter period can leave the main thread little time between handlers. */
    struct itimerval it = {{0, 1000}, {0, 1000}};
    setitimer(ITIMER_REAL, &it, NULL);
    char msg[100];
    memset(msg, 'm', sizeof msg);
    long main_sent = 0;
    for (int i = 0; i < rounds || fired < 200; i++) {
        /* Allocations of the size the library once made, around each send. */
        char *p = malloc(16384 + (i % 64));
        if (send(wake[0], msg, sizeof msg, MSG_DONTWAIT | MSG_NOSIGNAL) == sizeof msg)
            main_sent++;
        free(p);
    }
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    char q = 'q';
    while (send(wake[0], &q, 1, MSG_NOSIGNAL) < 0 && errno == EINTR)
        ;
    pthread_join(t, NULL);
    printf("main sends: %s\n", main_sent > 0 ? "some" : "none");
    printf("handler ran: %s, its sends: %s\n", fired >= 200 ? "200 or more" : "fewer",
           handler_sent > 0 ? "some" : "none");
    printf("done\n");
    return 0;
}
