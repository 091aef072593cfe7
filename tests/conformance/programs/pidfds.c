/* pidfds.py's twin in C, built static: SO_PASSPIDFD, SO_PEERPIDFD and
 * SCM_PIDFD (Linux 6.5), what a receiver gets, in which order, with which
 * flags. Pids are printed relative (self, parent, child). A call that fails
 * prints its errno in place of its result, so both runs print as many lines. */
#include "programs.h"

#include <fcntl.h>
#include <poll.h>
#include <stddef.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>

#define SO_PASSPIDFD_ 76
#define SO_PEERPIDFD_ 77
#define SCM_PIDFD_ 4

static pid_t child = -1;

static int pid_of(int pidfd)
{
	char path[64], line[256];
	snprintf(path, sizeof path, "/proc/self/fdinfo/%d", pidfd);
	FILE *f = fopen(path, "r");
	int pid = 0;
	if (!f)
		return 0;
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "Pid: %d", &pid) == 1)
			break;
	fclose(f);
	return pid;
}

static const char *who(int pid)
{
	static char num[32];
	if (pid == getpid())
		return "self";
	if (pid == getppid())
		return "parent";
	if (pid == child)
		return "child";
	snprintf(num, sizeof num, "%d", pid);
	return num;
}

static void opt(const char *label, int s, int name)
{
	int v = -1;
	socklen_t len = sizeof v;
	if (getsockopt(s, SOL_SOCKET, name, &v, &len) < 0)
		printf("  %s: %s\n", label, errname(errno));
	else if (name == SO_PEERPIDFD_) {
		printf("  %s: %s\n", label, who(pid_of(v)));
		close(v);
	} else
		printf("  %s: %d\n", label, v);
}

/* A failure shows in what the next getsockopt or message shows. */
static void set(int s, int name, int v)
{
	setsockopt(s, SOL_SOCKET, name, &v, sizeof v);
}

/* The control messages of `m`, as pidfds.py names them, into `out`
 * (empty when there are none); the descriptors received are closed. */
static void controls(struct msghdr *m, char *out, size_t size)
{
	out[0] = 0;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR(m, c)) {
		char one[128] = "";
		if (c->cmsg_level != SOL_SOCKET)
			continue;
		if (c->cmsg_type == SCM_PIDFD_) {
			int fd;
			memcpy(&fd, CMSG_DATA(c), sizeof fd);
			int cloexec = fcntl(fd, F_GETFD) & FD_CLOEXEC;
			snprintf(one, sizeof one, "PIDFD(%s, cloexec=%s) ", who(pid_of(fd)),
				 cloexec ? "True" : "False");
			close(fd);
		} else if (c->cmsg_type == SCM_CREDENTIALS) {
			struct ucred cr;
			memcpy(&cr, CMSG_DATA(c), sizeof cr);
			snprintf(one, sizeof one, "CREDENTIALS(%s) ", who(cr.pid));
		} else if (c->cmsg_type == SCM_RIGHTS) {
			int k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
			snprintf(one, sizeof one, "RIGHTS(%d) ", k);
			for (int i = 0; i < k; i++) {
				int fd;
				memcpy(&fd, CMSG_DATA(c) + i * sizeof fd, sizeof fd);
				close(fd);
			}
		}
		strncat(out, one, size - strlen(out) - 1);
	}
	size_t len = strlen(out);
	if (len)
		out[len - 1] = 0;
}

/* One recvmsg of at most 10 bytes with `space` control bytes, shown as
 * pidfds.py shows it. What is not there within 5 s is shown as missing
 * (where udsfs merged two stream sends the kernel keeps apart). */
static void show(const char *label, int s, size_t space, int flags)
{
	char data[11] = {0};
	union {
		char buf[256];
		struct cmsghdr align;
	} u;
	memset(u.buf, 0, sizeof u.buf);
	struct iovec iov = {.iov_base = data, .iov_len = 10};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = space ? u.buf : NULL, .msg_controllen = space};
	struct pollfd p = {.fd = s, .events = POLLIN};
	if (poll(&p, 1, 5000) != 1) {
		printf("  %s: nothing to read\n", label);
		return;
	}
	ssize_t n = recvmsg(s, &m, flags | MSG_DONTWAIT);
	if (n < 0) {
		printf("  %s: %s\n", label, errname(errno));
		return;
	}
	char out[512];
	controls(&m, out, sizeof out);
	printf("  %s: '%.*s' %s flags=%d\n", label, (int)n, data, out[0] ? out : "-", m.msg_flags);
}

/* A datagram larger than one message ioctl: through udsfs it is a record
 * of the socket's `msg` file, which names the sender by its pid only. */
static void show_big(int a, int b, size_t space)
{
	static char big[40000], back[sizeof big];
	memset(big, 'b', sizeof big);
	if (send(a, big, sizeof big, 0) != (ssize_t)sizeof big) {
		printf("  large datagram: send %s\n", errname(errno));
		return;
	}
	union {
		char buf[256];
		struct cmsghdr align;
	} u;
	memset(u.buf, 0, sizeof u.buf);
	struct iovec iov = {.iov_base = back, .iov_len = sizeof back};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = space};
	struct pollfd p = {.fd = b, .events = POLLIN};
	ssize_t n = poll(&p, 1, 5000) == 1 ? recvmsg(b, &m, MSG_DONTWAIT) : -1;
	if (n < 0) {
		printf("  large datagram: %s\n", errname(errno));
		return;
	}
	char out[512];
	controls(&m, out, sizeof out);
	printf("  large datagram: %zd bytes, same=%d %s flags=%d\n", n, !memcmp(big, back, sizeof big),
	       out[0] ? out : "-", m.msg_flags);
}

/* Whether pidfd `fd` names this process: pidfs gives each process one
 * inode (Linux 6.9), whatever pid namespace /proc shows. */
static int names_self(int fd)
{
	struct stat a, b;
	int mine = syscall(SYS_pidfd_open, getpid(), 0);
	int same = mine >= 0 && fstat(fd, &a) == 0 && fstat(mine, &b) == 0 && a.st_ino == b.st_ino;
	if (mine >= 0)
		close(mine);
	return same;
}

/* One message of up to `len` bytes on `s`: its length and whether its
 * SCM_PIDFD names this process. */
static void show_self(const char *label, int s, size_t len)
{
	static char back[40000];
	union {
		char buf[256];
		struct cmsghdr align;
	} u;
	memset(u.buf, 0, sizeof u.buf);
	struct iovec iov = {.iov_base = back, .iov_len = len};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf};
	struct pollfd p = {.fd = s, .events = POLLIN};
	ssize_t n = poll(&p, 1, 5000) == 1 ? recvmsg(s, &m, MSG_DONTWAIT) : -1;
	if (n < 0) {
		printf("  %s: %s\n", label, errname(errno));
		return;
	}
	const char *pidfd = "none";
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_PIDFD_)
			continue;
		int fd;
		memcpy(&fd, CMSG_DATA(c), sizeof fd);
		pidfd = names_self(fd) ? "self" : "another process";
		close(fd);
	}
	printf("  %s: %zd bytes, SCM_PIDFD of %s, flags=%d\n", label, n, pidfd, m.msg_flags);
}

/* In a pid namespace of its own (pid 1 there), a process sends to itself,
 * small and large: through udsfs the large one is a `msg` record, which
 * names the sender by its pid in that namespace, not in the supervisor's. */
static void in_pid_namespace(void)
{
	printf("pid namespace\n");
	if (unshare(CLONE_NEWPID) != 0) {
		printf("  unshare: %s\n", errname(errno));
		return;
	}
	pid_t kid = fork();
	if (kid == 0) {
		printf("  getpid: %d\n", getpid());
		int ab[2];
		must(socketpair(AF_UNIX, SOCK_DGRAM, 0, ab) == 0, "socketpair");
		set(ab[1], SO_PASSPIDFD_, 1);
		send(ab[0], "ns", 2, 0);
		show_self("small", ab[1], 10);
		static char big[40000];
		memset(big, 'n', sizeof big);
		if (send(ab[0], big, sizeof big, 0) != (ssize_t)sizeof big)
			printf("  large: send %s\n", errname(errno));
		else
			show_self("large", ab[1], sizeof big);
		_exit(0);
	}
	must(kid > 0, "fork");
	waitpid(kid, NULL, 0);
}

static const char *type_name(int ty)
{
	return ty == SOCK_STREAM ? "SOCK_STREAM" : ty == SOCK_DGRAM ? "SOCK_DGRAM" : "SOCK_SEQPACKET";
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	int types[] = {SOCK_STREAM, SOCK_DGRAM, SOCK_SEQPACKET};
	size_t space = CMSG_SPACE(4) * 3 + CMSG_SPACE(12);
	for (int t = 0; t < 3; t++) {
		int ty = types[t];
		printf("%s\n", type_name(ty));
		int ab[2];
		must(socketpair(AF_UNIX, ty, 0, ab) == 0, "socketpair");
		if (t == 0)
			where(ab[0]);
		int a = ab[0], b = ab[1];
		opt("SO_PASSPIDFD default", b, SO_PASSPIDFD_);
		set(b, SO_PASSPIDFD_, 1);
		opt("SO_PASSPIDFD set", b, SO_PASSPIDFD_);
		opt("SO_PEERPIDFD", b, SO_PEERPIDFD_);
		if (ty == SOCK_STREAM) {
			/* Sent before anyone asked for credentials: no pidfd for it. */
			int cd[2];
			must(socketpair(AF_UNIX, ty, 0, cd) == 0, "socketpair");
			send(cd[0], "early", 5, 0);
			set(cd[1], SO_PASSPIDFD_, 1);
			send(cd[0], "late", 4, 0);
			show("sent before SO_PASSPIDFD", cd[1], space, 0);
			show("sent after", cd[1], space, 0);
			close(cd[0]);
			close(cd[1]);
		}
		send(a, "one", 3, 0);
		show("pidfd only", b, space, 0);
		int p[2];
		must(pipe(p) == 0, "pipe");
		send_fds(a, "two", 3, &p[0], 1);
		set(b, SO_PASSCRED, 1);
		show("with rights and creds", b, space, MSG_CMSG_CLOEXEC);
		/* A message from a child, still alive when it is read: its pidfd. */
		int hold[2];
		must(pipe(hold) == 0, "pipe");
		child = fork();
		if (child == 0) {
			char c;
			send(a, "kid", 3, 0);
			read(hold[0], &c, 1);
			_exit(0);
		}
		show("from a child", b, space, 0);
		must(write(hold[1], "x", 1) == 1, "write");
		waitpid(child, NULL, 0);
		close(hold[0]);
		close(hold[1]);
		/* From a child already exited and reaped when it is read: Linux
		 * 6.18 gives a pidfd that names no process any more (Pid: -1). */
		child = fork();
		if (child == 0) {
			send(a, "gone", 4, 0);
			_exit(0);
		}
		waitpid(child, NULL, 0);
		show("from a reaped child", b, space, 0);
		set(b, SO_PASSCRED, 0);
		send(a, "small", 5, 0);
		show("no room", b, 0, 0);
		if (ty != SOCK_STREAM)
			show_big(a, b, space);
		close(p[0]);
		close(p[1]);
		close(a);
		close(b);
	}
	/* Without a peer: ENODATA. */
	int s = socket(AF_UNIX, SOCK_DGRAM, 0);
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	int len = snprintf(addr.sun_path + 1, sizeof addr.sun_path - 1, "pidfds-%d", getpid());
	must(bind(s, (struct sockaddr *)&addr, offsetof(struct sockaddr_un, sun_path) + 1 + len) == 0, "bind");
	int v;
	socklen_t vl = sizeof v;
	if (getsockopt(s, SOL_SOCKET, SO_PEERPIDFD_, &v, &vl) == 0)
		printf("unconnected SO_PEERPIDFD: no error\n");
	else
		printf("unconnected SO_PEERPIDFD: %s\n", strerror(errno));
	in_pid_namespace();
	printf("done\n");
	return 0;
}
