/* What the C twins of the scenarios in this directory share: errno names,
 * passing files the way Python's socket.send_fds/recv_fds do, and where a
 * socket lives. tests/conformance/programs.rs builds each twin with
 * `gcc -static` and runs it on the kernel and through `udsfs run`. The lane
 * attack program integration/adversarial_lanes4.c passes its files with it too. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

/* The errno's name (ENOENT), as Python's errno.errorcode prints it. */
static inline const char *errname(int e)
{
	const char *n = strerrorname_np(e);
	return n ? n : "unknown errno";
}

/* "where: udsfs" for a udsfs socket (its .udsfs/sock/N/data file), else
 * "where: kernel": the harness checks and drops this line. */
static inline void where(int fd)
{
	char link[64], target[512] = {0};
	snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
	ssize_t n = readlink(link, target, sizeof target - 1);
	target[n < 0 ? 0 : n] = 0;
	printf("where: %s\n", strstr(target, "/.udsfs/sock/") ? "udsfs" : "kernel");
}

/* socket.send_fds(s, [data], fds): one sendmsg, -1 and errno on failure. */
static inline ssize_t send_fds(int s, const void *data, size_t len, const int *fds, int nfds)
{
	struct iovec iov = {.iov_base = (void *)data, .iov_len = len};
	union {
		char buf[CMSG_SPACE(64 * sizeof(int))];
		struct cmsghdr align;
	} u;
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
	if (nfds > 0) {
		memset(u.buf, 0, sizeof u.buf);
		m.msg_control = u.buf;
		m.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
		struct cmsghdr *c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(nfds * sizeof(int));
		memcpy(CMSG_DATA(c), fds, nfds * sizeof(int));
	}
	return sendmsg(s, &m, 0);
}

/* socket.recv_fds(s, len, maxfds, rflags): a control buffer of
 * CMSG_LEN(maxfds ints), as Python sizes it; rflags are recvmsg's (e.g.
 * MSG_CMSG_CLOEXEC). The files land in fds (their count in *nfds), the
 * message flags in *flags. */
static inline ssize_t recv_fds_flags(int s, void *data, size_t len, int maxfds, int rflags, int *fds, int *nfds,
				     int *flags)
{
	struct iovec iov = {.iov_base = data, .iov_len = len};
	union {
		char buf[CMSG_SPACE(64 * sizeof(int))];
		struct cmsghdr align;
	} u;
	memset(u.buf, 0, sizeof u.buf);
	struct msghdr m = {
		.msg_iov = &iov,
		.msg_iovlen = 1,
		.msg_control = u.buf,
		.msg_controllen = CMSG_LEN(maxfds * sizeof(int)),
	};
	*nfds = 0;
	ssize_t n = recvmsg(s, &m, rflags);
	if (n < 0)
		return n;
	*flags = m.msg_flags;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		int k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		memcpy(fds + *nfds, CMSG_DATA(c), k * sizeof(int));
		*nfds += k;
	}
	return n;
}

/* socket.recv_fds(s, len, maxfds): recv_fds_flags with no flags. */
static inline ssize_t recv_fds(int s, void *data, size_t len, int maxfds, int *fds, int *nfds, int *flags)
{
	return recv_fds_flags(s, data, len, maxfds, 0, fds, nfds, flags);
}

/* Ends the program on a call that must not fail. */
static inline void must(int ok, const char *what)
{
	if (!ok) {
		printf("%s: %s\n", what, errname(errno));
		exit(1);
	}
}
