/* flood: many threads of one program blocked in recv at once, for
 * integration/run_seccomp_flood.sh (through the supervisor).
 *
 *   flood THREADS
 *     A child makes THREADS threads (64 KiB stacks) that each block in a
 *     1-byte recv() on one end of a stream socketpair and prints "blocked".
 *     The parent, another process of the same program (the same seccomp
 *     listener), then times a round trip of its own on a second socketpair
 *     ("probe: SECONDS"), prints "probed", waits for a line on stdin, sends
 *     THREADS bytes (one for each receiver) and prints "received N" once
 *     the child says every recv returned. Exit status 0 when all went so. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int pair[2];

static void *receiver(void *arg)
{
	char c;
	(void)arg;
	if (recv(pair[0], &c, 1, 0) != 1) {
		perror("recv");
		exit(1);
	}
	return NULL;
}

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: flood THREADS\n");
		return 2;
	}
	int n = atoi(argv[1]);
	setvbuf(stdout, NULL, _IONBF, 0);
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, pair) < 0) {
		perror("socketpair");
		return 1;
	}
	pid_t child = fork();
	if (child == 0) {
		pthread_attr_t a;
		pthread_attr_init(&a);
		pthread_attr_setstacksize(&a, 65536);
		pthread_t *t = calloc(n, sizeof(*t));
		for (int i = 0; i < n; i++)
			if (pthread_create(&t[i], &a, receiver, NULL)) {
				fprintf(stderr, "pthread_create %d failed\n", i);
				return 1;
			}
		printf("blocked\n");
		for (int i = 0; i < n; i++)
			pthread_join(t[i], NULL);
		return 0;
	}
	/* Let the child's receivers trap first. */
	char line[64];
	sleep(2);
	int p[2];
	char buf[4] = "ping", got[4];
	double t0 = now();
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, p) < 0 || send(p[1], buf, 4, 0) != 4 ||
	    recv(p[0], got, 4, MSG_WAITALL) != 4 || memcmp(buf, got, 4)) {
		perror("probe");
		return 1;
	}
	printf("probe: %.3f\n", now() - t0);
	printf("probed\n");
	if (!fgets(line, sizeof(line), stdin))
		return 1;
	char *all = calloc(n, 1);
	for (int off = 0; off < n;) {
		ssize_t k = send(pair[1], all + off, n - off, 0);
		if (k <= 0) {
			perror("send");
			return 1;
		}
		off += k;
	}
	int st;
	if (waitpid(child, &st, 0) != child || !WIFEXITED(st) || WEXITSTATUS(st)) {
		fprintf(stderr, "the receivers' process ended with status %d\n", st);
		return 1;
	}
	printf("received %d\n", n);
	return 0;
}
