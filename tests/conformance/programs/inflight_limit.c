/* inflight_limit.py's twin in C, built static: files in flight count against
 * the sending user's RLIMIT_NOFILE; past it sendmsg fails with ETOOMANYREFS,
 * and receiving one (or closing the receiver) makes room again. Run as root;
 * drops to nobody. */
#include "programs.h"

#include <sys/resource.h>
#include <time.h>

static const char *refused;

/* Passes fd over s until a send fails (at most limit times): how many went. */
static int pass_until_refused(int s, int fd, int limit)
{
	for (int n = 0; n < limit; n++) {
		if (send_fds(s, "x", 1, &fd, 1) < 0) {
			refused = errname(errno);
			return n;
		}
	}
	refused = "no error";
	return limit;
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	int p[2];
	must(pipe(p) == 0, "pipe");
	struct rlimit rl = {16, 16};
	must(setrlimit(RLIMIT_NOFILE, &rl) == 0, "setrlimit");
	must(setgid(65534) == 0, "setgid");
	must(setuid(65534) == 0, "setuid");
	int ab[2], cd[2];
	must(socketpair(AF_UNIX, SOCK_STREAM, 0, ab) == 0, "socketpair");
	must(socketpair(AF_UNIX, SOCK_STREAM, 0, cd) == 0, "socketpair");
	where(ab[0]);
	int n = pass_until_refused(ab[0], p[0], 100);
	printf("pipe end: %d %s\n", n, refused);
	n = pass_until_refused(ab[0], cd[0], 1);
	printf("then a unix socket: %d %s\n", n, refused);
	char buf[1];
	int fds[1], nfds, flags;
	must(recv_fds(ab[1], buf, 1, 1, fds, &nfds, &flags) == 1, "recvmsg");
	printf("received %.1s %d fd\n", buf, nfds);
	for (int i = 0; i < nfds; i++)
		close(fds[i]);
	n = pass_until_refused(ab[0], p[0], 100);
	printf("after one received: %d %s\n", n, refused);
	close(ab[1]);
	/* The queue's files were closed with it: the user has none in flight.
	 * (A FUSE close returns before the daemon's release: wait for that.) */
	for (int i = 0; i < 400; i++) {
		n = pass_until_refused(cd[0], p[0], 1);
		if (n == 1)
			break;
		nanosleep(&(struct timespec){0, 25 * 1000 * 1000}, NULL);
	}
	printf("after the receiver closed: %d passes\n", n + pass_until_refused(cd[0], p[0], 4));
	return 0;
}
