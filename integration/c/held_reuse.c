/* held_reuse: a receive waiting on a socket whose number another thread
 * closes and gives to a new socket, for integration/adversarial_close_race.sh.
 * Static, for the supervisor.
 *
 *   held_reuse BLOCKERS
 *     BLOCKERS threads block in recv on sockets of their own (past the
 *     supervisor's parking slots, notify.rs PARKED, a receive is held
 *     without a thread: wait.rs). Then one more thread blocks in recv on
 *     socket A, at number N; the main thread closes N, makes a socketpair
 *     whose first end takes N, sends "wrong" to it, then "right" to A.
 *     Linux's recv works on the file it took at its start: it reads
 *     "right", whatever N names since. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int a_fd;
static char got[16];

static void *block(void *arg)
{
	char c;
	recv((int)(long)arg, &c, 1, 0);
	return NULL;
}

static void *receive_a(void *unused)
{
	(void)unused;
	ssize_t n = recv(a_fd, got, sizeof got - 1, 0);
	if (n < 0)
		snprintf(got, sizeof got, "error");
	return NULL;
}

int main(int argc, char **argv)
{
	int blockers = argc > 1 ? atoi(argv[1]) : 0;
	int (*pairs)[2] = calloc(blockers + 1, sizeof *pairs);
	pthread_t t;
	for (int i = 0; i < blockers; i++) {
		if (socketpair(AF_UNIX, SOCK_STREAM, 0, pairs[i]) < 0) {
			perror("socketpair");
			return 3;
		}
		pthread_create(&t, NULL, block, (void *)(long)pairs[i][0]);
	}
	int a[2];
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, a) < 0)
		return 3;
	a_fd = a[0];
	/* Let the blockers take the parking slots first. */
	sleep(2);
	pthread_t r;
	pthread_create(&r, NULL, receive_a, NULL);
	sleep(1);
	close(a_fd);
	int b[2];
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, b) < 0 || b[0] != a_fd) {
		fprintf(stderr, "the new socket is at %d, not %d\n", b[0], a_fd);
		return 3;
	}
	if (write(b[1], "wrong", 5) != 5 || write(a[1], "right", 5) != 5)
		return 3;
	pthread_join(r, NULL);
	printf("the receive that waited on the closed number read: %s\n", got);
	fflush(stdout);
	/* The blockers are still in recv: end them all. */
	_exit(strcmp(got, "right") == 0 ? 0 : 1);
}
