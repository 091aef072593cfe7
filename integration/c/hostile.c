/* hostile: socket calls with bad pointers and lengths, on a server, client
 * and accepted socket bound in DIR; prints one line per call (its result or
 * errno name). integration/run_seccomp.sh runs it on kernel sockets and
 * through `udsfs run --front seccomp` and compares: the supervisor must give
 * Linux's answers and survive every one (the last line is an exchange). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

/* An unmapped address, hidden from the compiler's checks. */
static void *volatile bad_address = (void *)8;
#define BAD bad_address

static void show(const char *what, long r)
{
	if (r < 0)
		printf("%s: %s\n", what, strerrorname_np(errno));
	else
		printf("%s: ok\n", what);
}

static socklen_t name(struct sockaddr_un *a, const char *dir, const char *file)
{
	memset(a, 0, sizeof *a);
	a->sun_family = AF_UNIX;
	snprintf(a->sun_path, sizeof a->sun_path, "%s/%s", dir, file);
	return sizeof *a;
}

int main(int argc, char **argv)
{
	if (argc != 2)
		return 2;
	struct sockaddr_un a;
	int srv = socket(AF_UNIX, SOCK_STREAM, 0);
	show("bind srv", bind(srv, (struct sockaddr *)&a, name(&a, argv[1], "h.sock")));
	show("listen", listen(srv, 4));
	int cli = socket(AF_UNIX, SOCK_STREAM, 0);
	show("connect", connect(cli, (struct sockaddr *)&a, sizeof a));
	int acc = accept(srv, NULL, NULL);
	show("accept", acc);

	int fresh = socket(AF_UNIX, SOCK_STREAM, 0);
	show("bind bad address", bind(fresh, BAD, sizeof a));
	show("connect len 1", connect(fresh, (struct sockaddr *)&a, 1));
	show("bind again, len 200", bind(srv, (struct sockaddr *)&a, 200));
	socklen_t len = sizeof a;
	show("getsockname bad len pointer", getsockname(acc, (struct sockaddr *)&a, BAD));
	show("getsockname bad buffer", getsockname(acc, BAD, &len));
	len = (socklen_t)-1;
	show("getpeername negative len", getpeername(cli, (struct sockaddr *)&a, &len));
	int v = 0;
	show("getsockopt NULL len", getsockopt(cli, SOL_SOCKET, SO_TYPE, &v, NULL));
	len = 2;
	long r = getsockopt(cli, SOL_SOCKET, SO_TYPE, &v, &len);
	printf("getsockopt len 2: %ld len=%u v=%d\n", r, len, v);
	len = sizeof v;
	show("getsockopt level 999", getsockopt(cli, 999, 1, &v, &len));
	show("getsockopt name 9999", getsockopt(cli, SOL_SOCKET, 9999, &v, &len));
	show("setsockopt bad value", setsockopt(cli, SOL_SOCKET, SO_PASSCRED, BAD, 4));
	v = 1;
	show("setsockopt len 2", setsockopt(cli, SOL_SOCKET, SO_PASSCRED, &v, 2));
	show("send bad buffer", send(cli, BAD, 10, 0));
	show("sendto bad address", sendto(cli, "x", 1, 0, BAD, sizeof a));
	struct iovec iov = {.iov_base = "x", .iov_len = 1};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 100000};
	show("sendmsg 100000 iovecs", sendmsg(cli, &m, 0));
	m.msg_iovlen = 1;
	m.msg_iov = BAD;
	show("sendmsg bad iovec array", sendmsg(cli, &m, 0));
	show("recvmsg NULL msghdr", recvmsg(acc, NULL, 0));
	show("socketpair bad array", socketpair(AF_UNIX, SOCK_STREAM, 0, BAD));
	int sv[2];
	show("socketpair type 77", socketpair(AF_UNIX, 77, 0, sv));
	show("socketpair SOCK_RDM", socketpair(AF_UNIX, SOCK_RDM, 0, sv));
	show("socketpair protocol 9", socketpair(AF_UNIX, SOCK_STREAM, 9, sv));
	show("socketpair bad flags", socketpair(AF_UNIX, SOCK_STREAM | 0x10000, 0, sv));
	show("accept4 bad flags", accept4(srv, NULL, NULL, 0x10000));
	int cli2 = socket(AF_UNIX, SOCK_STREAM, 0);
	name(&a, argv[1], "h.sock");
	show("connect 2", connect(cli2, (struct sockaddr *)&a, sizeof a));
	len = sizeof a;
	show("accept bad address", accept(srv, BAD, &len));

	/* Where the sockets live: a udsfs socket is its .udsfs/sock/N/data file. */
	char link[64], target[512] = {0};
	int fds[] = {srv, cli, acc};
	for (int i = 0; i < 3; i++) {
		snprintf(link, sizeof link, "/proc/self/fd/%d", fds[i]);
		ssize_t n = readlink(link, target, sizeof target - 1);
		target[n < 0 ? 0 : n] = 0;
		printf("where: %s\n", strstr(target, "/.udsfs/sock/") ? "udsfs" : "kernel");
	}

	char buf[16] = {0};
	show("send ping", send(cli, "ping", 4, 0));
	r = recv(acc, buf, sizeof buf - 1, 0);
	printf("recv: %ld %s\n", r, buf);
	show("shutdown 99", shutdown(cli, 99));
	return 0;
}
