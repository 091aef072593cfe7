/* fork_exit.c: a static program whose calls the supervisor carries, then ends
 * (run_seccomp.sh's end of the pool): a socketpair (a udsfs one under the
 * supervisor) and one exchange; with an argument N > 0 a child makes an
 * exchange too and sleeps N ms, and the parent exits at once without waiting
 * for it. Exits 7, so that the run's status is told from a plain success. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
    int sv[2];
    char b[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) {
        perror("socketpair");
        return 1;
    }
    if (send(sv[0], "hi", 2, 0) != 2 || recv(sv[1], b, 2, 0) != 2) {
        perror("exchange");
        return 1;
    }
    long ms = argc > 1 ? atol(argv[1]) : 0;
    if (ms > 0 && fork() == 0) {
        struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
        if (send(sv[1], "yo", 2, 0) != 2 || recv(sv[0], b, 2, 0) != 2)
            _exit(1);
        nanosleep(&t, NULL);
        _exit(0);
    }
    printf("exchanged\n");
    return 7;
}
