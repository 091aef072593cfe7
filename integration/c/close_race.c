/* close_race: a descriptor closed and its number taken again while another
 * thread's call on it is in flight, for integration/adversarial_close_race.sh.
 *
 *   close_race PATH DAEMON_PID
 *     A kernel AF_UNIX socket at number N; a second thread connects it to
 *     PATH (in the mount: the call that makes it a udsfs socket), with
 *     DAEMON_PID (0: none) stopped first, so that the conversion waits in
 *     the daemon. Meanwhile the main thread closes N and opens a pipe,
 *     whose read end takes N, then continues the daemon. Once the connect
 *     returned, N must still be the pipe (Linux's connect works on the
 *     file it took at its start; it never puts anything at N): it says
 *     what N is and whether the pipe's bytes are read through it. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

static int n;
static struct sockaddr_un addr = {.sun_family = AF_UNIX};

static void *connector(void *unused)
{
	(void)unused;
	connect(n, (struct sockaddr *)&addr, sizeof addr);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: close_race PATH DAEMON_PID\n");
		return 2;
	}
	snprintf(addr.sun_path, sizeof addr.sun_path, "%s", argv[1]);
	pid_t daemon = atoi(argv[2]);
	n = socket(AF_UNIX, SOCK_STREAM, 0);
	if (n < 0) {
		perror("socket");
		return 3;
	}
	if (daemon > 0 && kill(daemon, SIGSTOP) < 0) {
		perror("kill SIGSTOP");
		return 3;
	}
	pthread_t t;
	pthread_create(&t, NULL, connector, NULL);
	/* The connect is in flight (waiting in the stopped daemon). */
	usleep(500 * 1000);
	close(n);
	int p[2];
	if (pipe(p) < 0 || p[0] != n) {
		fprintf(stderr, "the pipe's read end is %d, not %d\n", p[0], n);
		return 3;
	}
	if (write(p[1], "piped", 5) != 5)
		return 3;
	if (daemon > 0)
		kill(daemon, SIGCONT);
	pthread_join(t, NULL);
	struct stat st;
	char buf[16] = {0};
	if (fstat(n, &st) < 0) {
		printf("fd %d: %s\n", n, strerror(errno));
		return 1;
	}
	if (!S_ISFIFO(st.st_mode)) {
		printf("fd %d: no longer the pipe (mode %o)\n", n, st.st_mode & S_IFMT);
		return 1;
	}
	ssize_t got = read(n, buf, sizeof buf - 1);
	printf("fd %d: the pipe, read %s\n", n, got > 0 ? buf : "nothing");
	return 0;
}
