/* msgbench: hackbench's thread pattern (-T) with the message calls: per group
 * 20 receiver threads, each on a stream socketpair, and 20 sender threads
 * that send LOOPS 100-byte messages to every receiver with send(); receivers
 * take them with recv(). Unlike hackbench's read/write, every message is a
 * socket call, so built static it measures the seccomp supervisor's path
 * (scripts/bench row 2e). Prints "Time: SECONDS" as hackbench does. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define FDS 20
#define MSG 100

static int loops;

struct group {
	int rx[FDS], tx[FDS];
};

static void *receiver(void *arg)
{
	int fd = *(int *)arg;
	long want = (long)FDS * loops * MSG;
	char buf[MSG];
	while (want > 0) {
		ssize_t n = recv(fd, buf, want < MSG ? want : MSG, 0);
		if (n <= 0) {
			perror("recv");
			exit(1);
		}
		want -= n;
	}
	return NULL;
}

static void *sender(void *arg)
{
	struct group *g = arg;
	char buf[MSG] = {0};
	for (int i = 0; i < loops; i++)
		for (int j = 0; j < FDS; j++)
			for (size_t off = 0; off < MSG;) {
				ssize_t n = send(g->tx[j], buf + off, MSG - off, 0);
				if (n <= 0) {
					perror("send");
					exit(1);
				}
				off += n;
			}
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: msgbench GROUPS LOOPS\n");
		return 2;
	}
	int groups = atoi(argv[1]);
	loops = atoi(argv[2]);
	if (groups < 1 || groups > 100 || loops < 1) {
		fprintf(stderr, "msgbench: bad GROUPS or LOOPS\n");
		return 2;
	}
	struct group *gs = calloc(groups, sizeof *gs);
	pthread_t *th = calloc((size_t)groups * FDS * 2, sizeof *th);
	if (!gs || !th)
		return 1;
	for (int g = 0; g < groups; g++)
		for (int j = 0; j < FDS; j++) {
			int sv[2];
			if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0) {
				perror("socketpair");
				return 1;
			}
			gs[g].rx[j] = sv[0];
			gs[g].tx[j] = sv[1];
		}
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	int n = 0;
	for (int g = 0; g < groups; g++) {
		for (int j = 0; j < FDS; j++)
			pthread_create(&th[n++], NULL, receiver, &gs[g].rx[j]);
		for (int j = 0; j < FDS; j++)
			pthread_create(&th[n++], NULL, sender, &gs[g]);
	}
	for (int i = 0; i < n; i++)
		pthread_join(th[i], NULL);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("Time: %.3f\n", (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9);
	return 0;
}
