/* messages: the message calls a statically linked program makes on
 * socketpairs: the queue ioctls, sendmmsg/recvmmsg, a socket passed with
 * SCM_RIGHTS, SCM_CREDENTIALS sent and received, receives into memory that
 * cannot be written. integration/run_seccomp.sh
 * compares its output on kernel sockets and through the supervisor. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <linux/sockios.h>
#include <stdlib.h>
#include <sys/wait.h>

#include "report.h"

int main(void)
{
	int s[2], d[2], p[2];
	show("socketpair stream", socketpair(AF_UNIX, SOCK_STREAM, 0, s));
	show("socketpair dgram", socketpair(AF_UNIX, SOCK_DGRAM, 0, d));
	show("socketpair to pass", socketpair(AF_UNIX, SOCK_STREAM, 0, p));
	where(s[0]);
	where(d[1]);

	/* the queue ioctls */
	show("send hello", send(s[0], "hello", 5, 0));
	int v = -1;
	show("FIONREAD", ioctl(s[1], FIONREAD, &v));
	printf("FIONREAD value: %d\n", v);
	v = -1;
	show("SIOCATMARK", ioctl(s[1], SIOCATMARK, &v));
	printf("SIOCATMARK value: %d\n", v);
	char buf[64] = {0};
	show("recv", recv(s[1], buf, sizeof buf, 0));
	v = -1;
	show("FIONREAD empty", ioctl(s[1], FIONREAD, &v));
	printf("FIONREAD empty value: %d\n", v);

	/* sendmmsg and recvmmsg */
	const char *words[] = {"one", "two", "three"};
	struct mmsghdr out[3], in[4];
	struct iovec oiov[3], iiov[4];
	char ibuf[4][16];
	memset(out, 0, sizeof out);
	memset(in, 0, sizeof in);
	for (int i = 0; i < 3; i++) {
		oiov[i] = (struct iovec){(void *)words[i], strlen(words[i])};
		out[i].msg_hdr.msg_iov = &oiov[i];
		out[i].msg_hdr.msg_iovlen = 1;
	}
	for (int i = 0; i < 4; i++) {
		iiov[i] = (struct iovec){ibuf[i], sizeof ibuf[i]};
		in[i].msg_hdr.msg_iov = &iiov[i];
		in[i].msg_hdr.msg_iovlen = 1;
	}
	show("sendmmsg", sendmmsg(d[0], out, 3, 0));
	printf("sent lens: %u %u %u\n", out[0].msg_len, out[1].msg_len, out[2].msg_len);
	int got = recvmmsg(d[1], in, 4, MSG_WAITFORONE, NULL);
	show("recvmmsg", got);
	for (int i = 0; i < got; i++)
		printf("got %d: %.*s\n", i, (int)in[i].msg_len, ibuf[i]);

	/* a socket passed with SCM_RIGHTS */
	union {
		char b[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} cu;
	struct iovec iov = {"x", 1};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cu.b, .msg_controllen = sizeof cu.b};
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &p[0], sizeof(int));
	show("sendmsg SCM_RIGHTS", sendmsg(s[0], &m, 0));
	close(p[0]);
	char one;
	iov = (struct iovec){&one, 1};
	memset(cu.b, 0, sizeof cu.b);
	m = (struct msghdr){.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cu.b, .msg_controllen = sizeof cu.b};
	show("recvmsg SCM_RIGHTS", recvmsg(s[1], &m, MSG_CMSG_CLOEXEC));
	c = CMSG_FIRSTHDR(&m);
	int passed = -1;
	if (c && c->cmsg_type == SCM_RIGHTS)
		memcpy(&passed, CMSG_DATA(c), sizeof(int));
	printf("controllen %zu, flags %d, a descriptor came: %s\n", (size_t)m.msg_controllen, m.msg_flags,
	       passed >= 0 ? "yes" : "no");
	show("send on the passed socket", send(passed, "via passed", 10, 0));
	memset(buf, 0, sizeof buf);
	show("recv on its peer", recv(p[1], buf, sizeof buf, 0));
	printf("peer got: %s\n", buf);

	/* SCM_CREDENTIALS, sent explicitly and attached for SO_PASSCRED */
	int on = 1;
	show("SO_PASSCRED", setsockopt(d[1], SOL_SOCKET, SO_PASSCRED, &on, sizeof on));
	union {
		char b[CMSG_SPACE(sizeof(struct ucred))];
		struct cmsghdr align;
	} cc;
	struct ucred cr = {getpid(), getuid(), getgid()};
	iov = (struct iovec){"c", 1};
	m = (struct msghdr){.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cc.b, .msg_controllen = sizeof cc.b};
	c = CMSG_FIRSTHDR(&m);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_CREDENTIALS;
	c->cmsg_len = CMSG_LEN(sizeof cr);
	memcpy(CMSG_DATA(c), &cr, sizeof cr);
	show("sendmsg SCM_CREDENTIALS", sendmsg(d[0], &m, 0));
	show("send plain", send(d[0], "p", 1, 0));
	for (int i = 0; i < 2; i++) {
		memset(cc.b, 0, sizeof cc.b);
		iov = (struct iovec){&one, 1};
		m = (struct msghdr){.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cc.b, .msg_controllen = sizeof cc.b};
		show("recvmsg with SO_PASSCRED", recvmsg(d[1], &m, 0));
		c = CMSG_FIRSTHDR(&m);
		struct ucred rc = {0};
		if (c && c->cmsg_type == SCM_CREDENTIALS)
			memcpy(&rc, CMSG_DATA(c), sizeof rc);
		printf("credentials: pid is ours %s, uid %s, gid %s\n", rc.pid == getpid() ? "yes" : "no",
		       rc.uid == getuid() ? "ours" : "other", rc.gid == getgid() ? "ours" : "other");
	}
	/* a forged pid is refused without CAP_SYS_ADMIN... as root it is allowed: skip */

	/* one blocking send of 1 MiB, far more than the buffer: it goes out whole */
	int big[2];
	show("socketpair big", socketpair(AF_UNIX, SOCK_STREAM, 0, big));
	size_t total = 1 << 20;
	unsigned char *data = malloc(total);
	for (size_t i = 0; i < total; i++)
		data[i] = (unsigned char)(i * 7 + i / 4096);
	fflush(stdout);
	pid_t child = fork();
	if (child == 0) {
		close(big[0]);
		unsigned long sum = 0, n = 0;
		unsigned char piece[3000];
		ssize_t r;
		while ((r = recv(big[1], piece, sizeof piece, 0)) > 0) {
			for (ssize_t i = 0; i < r; i++)
				sum = sum * 31 + piece[i];
			n += r;
		}
		printf("child got %lu bytes, sum %lu\n", n, sum);
		fflush(stdout);
		_exit(0);
	}
	close(big[1]);
	show("send 1 MiB", send(big[0], data, total, 0));
	close(big[0]);
	waitpid(child, NULL, 0);
	unsigned long sum = 0;
	for (size_t i = 0; i < total; i++)
		sum = sum * 31 + data[i];
	printf("sent sum %lu\n", sum);

	struct ucred peer;
	socklen_t len = sizeof peer;
	show("SO_PEERCRED", getsockopt(s[0], SOL_SOCKET, SO_PEERCRED, &peer, &len));
	printf("peer pid is ours: %s\n", peer.pid == getpid() ? "yes" : "no");
	/* Receives into memory that cannot be written: a stream's bytes stay
	 * queued (EFAULT when none fit, else what fit before), a datagram is
	 * taken and lost. */
	int t[2], g[2];
	socketpair(AF_UNIX, SOCK_STREAM, 0, t);
	socketpair(AF_UNIX, SOCK_DGRAM, 0, g);
	send(t[0], "one", 3, 0);
	send(t[0], "two", 3, 0);
	show("stream recv into a bad buffer", recv(t[1], (void *)16, 8, MSG_DONTWAIT));
	memset(buf, 0, sizeof buf);
	struct iovec bad2[2] = {{buf, 3}, {(void *)16, 8}};
	struct msghdr bh = {.msg_iov = bad2, .msg_iovlen = 2};
	show("stream recvmsg, its second buffer bad", recvmsg(t[1], &bh, MSG_DONTWAIT));
	printf("got: %s\n", buf);
	memset(buf, 0, sizeof buf);
	show("what stayed queued", recv(t[1], buf, sizeof buf, MSG_DONTWAIT));
	printf("got: %s\n", buf);
	send(g[0], "one", 3, 0);
	send(g[0], "two", 3, 0);
	show("dgram recv into a bad buffer", recv(g[1], (void *)16, 8, 0));
	memset(buf, 0, sizeof buf);
	show("what stayed queued", recv(g[1], buf, sizeof buf, MSG_DONTWAIT));
	printf("got: %s\n", buf);
	return 0;
}
