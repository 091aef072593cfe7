/* blocking: blocking socket calls of a statically linked program, for
 * integration/run_seccomp_blocking.sh, which runs it on kernel sockets and
 * through the supervisor.
 *
 *   blocking wait accept|connect|dgram DIR THREADS
 *     THREADS threads block in accept, in connect to a full backlog, or in
 *     a send of a datagram larger than the free receive space; "blocked"
 *     is printed, and once a line comes on stdin the program unblocks them
 *     (connects, accepts, reads) and says how each call ended.
 *   blocking signal DIR
 *     signals to threads blocked in recv, accept, connect to a full backlog
 *     and a send that does not fit: one kill(pid) ends one of four calls,
 *     SA_RESTART restarts, SO_RCVTIMEO/SO_SNDTIMEO give EINTR and EAGAIN.
 *   blocking mmsg
 *     recvmmsg's timeout, as recvmmsg(2) describes it (BUGS included). */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "report.h"

#define MAXT 64
#define BIG 32768

static const char *kind;
static int lfd, pair[2];
static struct sockaddr_un addr = {.sun_family = AF_UNIX};
static atomic_int done_early, results[MAXT];
static atomic_int running = 1;

static void ms(int n)
{
	struct timespec t = {n / 1000, (n % 1000) * 1000000L};
	while (nanosleep(&t, &t) < 0 && errno == EINTR)
		;
}

static int client(void)
{
	int c = socket(AF_UNIX, SOCK_STREAM, 0);
	if (connect(c, (struct sockaddr *)&addr, sizeof addr) < 0)
		return -1;
	return c;
}

/* One blocking call; its result: 1 done, -errno failed. */
static void *blocker(void *arg)
{
	long i = (long)arg;
	int r;
	if (!strcmp(kind, "accept")) {
		r = accept(lfd, NULL, NULL);
	} else if (!strcmp(kind, "connect")) {
		r = client();
	} else {
		static char big[BIG];
		r = send(pair[0], big, sizeof big, 0) == BIG ? 1 : -1;
	}
	if (atomic_load(&running))
		atomic_fetch_add(&done_early, 1);
	atomic_store(&results[i], r < 0 ? -errno : 1);
	return NULL;
}

static int wait_mode(const char *dir, int n)
{
	pthread_t t[MAXT];
	if (n < 1 || n > MAXT)
		return 2;
	snprintf(addr.sun_path, sizeof addr.sun_path, "%s/%s.sock", dir, kind);
	if (!strcmp(kind, "dgram")) {
		if (socketpair(AF_UNIX, SOCK_DGRAM, 0, pair) < 0)
			return perror("socketpair"), 1;
		where(pair[0]);
		/* Fill the receiver until a send would wait. */
		char small[512] = {0};
		while (send(pair[0], small, sizeof small, MSG_DONTWAIT) > 0)
			;
		if (errno != EAGAIN)
			return perror("filling send"), 1;
	} else {
		lfd = socket(AF_UNIX, SOCK_STREAM, 0);
		unlink(addr.sun_path);
		if (bind(lfd, (struct sockaddr *)&addr, sizeof addr) < 0)
			return perror("bind"), 1;
		/* Backlog 0: one connection fills it. */
		if (listen(lfd, !strcmp(kind, "connect") ? 0 : 128) < 0)
			return perror("listen"), 1;
		where(lfd);
		if (!strcmp(kind, "connect") && client() < 0)
			return perror("the connect that fills the backlog"), 1;
	}
	for (long i = 0; i < n; i++)
		pthread_create(&t[i], NULL, blocker, (void *)i);
	ms(200);
	printf("blocked\n");
	fflush(stdout);
	char line[16];
	if (!fgets(line, sizeof line, stdin))
		return 1;
	printf("ended before they were unblocked: %d\n", atomic_load(&done_early));
	atomic_store(&running, 0);
	if (!strcmp(kind, "accept")) {
		for (int i = 0; i < n; i++)
			if (client() < 0)
				return perror("connect"), 1;
	} else if (!strcmp(kind, "connect")) {
		for (int i = 0; i <= n; i++)
			if (accept(lfd, NULL, NULL) < 0)
				return perror("accept"), 1;
	} else {
		static char buf[BIG + 1];
		ssize_t got;
		while ((got = recv(pair[1], buf, sizeof buf, 0)) != BIG)
			if (got < 0)
				return perror("recv"), 1;
		printf("received the big datagram\n");
	}
	int ok = 0;
	for (int i = 0; i < n; i++) {
		pthread_join(t[i], NULL);
		ok += atomic_load(&results[i]) == 1;
	}
	printf("%s: %d of %d done\n", kind, ok, n);
	return 0;
}

/* signal: SIGUSR1 to threads blocked in recv. */
static atomic_int handled;
static void on_usr1(int sig)
{
	(void)sig;
	atomic_fetch_add(&handled, 1);
}

static void handler(int flags)
{
	struct sigaction sa = {.sa_handler = on_usr1, .sa_flags = flags};
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
}

#define NR 4
static int rx[NR][2];
static atomic_int eintr, got_msg, other_err;

static void *receiver(void *arg)
{
	long i = (long)arg;
	sigset_t none;
	sigemptyset(&none);
	pthread_sigmask(SIG_SETMASK, &none, NULL);
	char buf[64];
	for (;;) {
		ssize_t r = recv(rx[i][0], buf, sizeof buf, 0);
		if (r > 0) {
			atomic_fetch_add(&got_msg, 1);
			return NULL;
		}
		if (r < 0 && errno == EINTR)
			atomic_fetch_add(&eintr, 1);
		else {
			atomic_fetch_add(&other_err, 1);
			return NULL;
		}
	}
}

/* NR threads in recv; one kill(getpid()) with SIGUSR1 blocked in main. */
static void one_kill(const char *name, int flags)
{
	pthread_t t[NR];
	atomic_store(&eintr, 0);
	atomic_store(&got_msg, 0);
	atomic_store(&other_err, 0);
	atomic_store(&handled, 0);
	handler(flags);
	for (long i = 0; i < NR; i++) {
		socketpair(AF_UNIX, SOCK_STREAM, 0, rx[i]);
		pthread_create(&t[i], NULL, receiver, (void *)i);
	}
	ms(300);
	kill(getpid(), SIGUSR1);
	ms(1000);
	printf("%s: handlers %d, EINTR %d, messages %d, errors %d before the messages\n", name,
	       atomic_load(&handled), atomic_load(&eintr), atomic_load(&got_msg),
	       atomic_load(&other_err));
	for (int i = 0; i < NR; i++)
		send(rx[i][1], "m", 1, 0);
	for (int i = 0; i < NR; i++)
		pthread_join(t[i], NULL);
	printf("%s: EINTR %d, messages %d, errors %d at the end\n", name, atomic_load(&eintr),
	       atomic_load(&got_msg), atomic_load(&other_err));
	for (int i = 0; i < NR; i++) {
		close(rx[i][0]);
		close(rx[i][1]);
	}
}

struct timed {
	int fd, how; /* how: 0 recv, 1 accept, 2 connect to addr, 3 a BIG datagram */
	long r;
	int err;
};

static void *timed_call(void *arg)
{
	struct timed *c = arg;
	sigset_t none;
	sigemptyset(&none);
	pthread_sigmask(SIG_SETMASK, &none, NULL);
	char buf[8];
	static char big[BIG];
	switch (c->how) {
	case 0:
		c->r = recv(c->fd, buf, sizeof buf, 0);
		break;
	case 1:
		c->r = accept(c->fd, NULL, NULL);
		break;
	case 2:
		c->r = connect(c->fd, (struct sockaddr *)&addr, sizeof addr);
		break;
	default:
		c->r = send(c->fd, big, sizeof big, 0);
	}
	c->err = c->r < 0 ? errno : 0;
	return NULL;
}

static int full;
static void *accept_later(void *arg)
{
	(void)arg;
	ms(700);
	accept(full, NULL, NULL);
	return NULL;
}

/* One call of `how` on fd in a thread; SIGUSR1 after 300 ms if `sig`. */
static void one_timed(const char *name, int fd, int how, int sig)
{
	struct timed c = {.fd = fd, .how = how};
	pthread_t t;
	pthread_create(&t, NULL, timed_call, &c);
	if (sig) {
		ms(300);
		pthread_kill(t, SIGUSR1);
	}
	pthread_join(t, NULL);
	errno = c.err;
	show(name, c.r);
}

static int signal_mode(const char *dir)
{
	sigset_t usr1;
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &usr1, NULL);
	int s[2];
	socketpair(AF_UNIX, SOCK_STREAM, 0, s);
	where(s[0]);
	close(s[0]);
	close(s[1]);
	one_kill("kill, no SA_RESTART", 0);
	one_kill("kill, SA_RESTART", SA_RESTART);

	/* A signal to one thread, with and without a receive timeout. */
	socketpair(AF_UNIX, SOCK_STREAM, 0, s);
	snprintf(addr.sun_path, sizeof addr.sun_path, "%s/sig.sock", dir);
	unlink(addr.sun_path);
	int l = socket(AF_UNIX, SOCK_STREAM, 0);
	if (bind(l, (struct sockaddr *)&addr, sizeof addr) < 0 || listen(l, 4) < 0)
		return perror("bind/listen"), 1;
	where(l);
	handler(0);
	one_timed("recv, signal, no SA_RESTART", s[0], 0, 1);
	one_timed("accept, signal, no SA_RESTART", l, 1, 1);
	struct timeval tv = {5, 0};
	setsockopt(s[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	setsockopt(l, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	handler(SA_RESTART);
	one_timed("recv, SO_RCVTIMEO, signal, SA_RESTART", s[0], 0, 1);
	one_timed("accept, SO_RCVTIMEO, signal, SA_RESTART", l, 1, 1);
	tv = (struct timeval){0, 200000};
	setsockopt(s[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	setsockopt(l, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	one_timed("recv, SO_RCVTIMEO runs out", s[0], 0, 0);
	one_timed("accept, SO_RCVTIMEO runs out", l, 1, 0);

	/* The send side: a connect to a full backlog, a datagram that does not fit. */
	snprintf(addr.sun_path, sizeof addr.sun_path, "%s/full.sock", dir);
	unlink(addr.sun_path);
	int f = socket(AF_UNIX, SOCK_STREAM, 0);
	if (bind(f, (struct sockaddr *)&addr, sizeof addr) < 0 || listen(f, 0) < 0 || client() < 0)
		return perror("a full backlog"), 1;
	int d[2];
	socketpair(AF_UNIX, SOCK_DGRAM, 0, d);
	char small[512] = {0};
	while (send(d[0], small, sizeof small, MSG_DONTWAIT) > 0)
		;
	int c1 = socket(AF_UNIX, SOCK_STREAM, 0);
	handler(0);
	one_timed("connect, full backlog, signal, no SA_RESTART", c1, 2, 1);
	one_timed("big send, full, signal, no SA_RESTART", d[0], 3, 1);
	tv = (struct timeval){5, 0};
	setsockopt(c1, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
	setsockopt(d[0], SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
	handler(SA_RESTART);
	one_timed("connect, SO_SNDTIMEO, signal, SA_RESTART", c1, 2, 1);
	one_timed("big send, SO_SNDTIMEO, signal, SA_RESTART", d[0], 3, 1);
	tv = (struct timeval){0, 200000};
	setsockopt(c1, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
	setsockopt(d[0], SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
	one_timed("connect, SO_SNDTIMEO runs out", c1, 2, 0);
	one_timed("big send, SO_SNDTIMEO runs out", d[0], 3, 0);
	/* Restarted after the handler, the connect goes on to its connection. */
	int c2 = socket(AF_UNIX, SOCK_STREAM, 0);
	pthread_t th;
	full = f;
	pthread_create(&th, NULL, accept_later, NULL);
	one_timed("connect, signal, SA_RESTART, room at 700 ms", c2, 2, 1);
	pthread_join(th, NULL);
	printf("handlers: %d\n", atomic_load(&handled));
	return 0;
}

/* mmsg: recvmmsg's timeout. */
static int mm[2];

static void queue(int n)
{
	for (int i = 0; i < n; i++)
		send(mm[1], "d", 1, 0);
}

static void *send_later(void *arg)
{
	(void)arg;
	ms(400);
	queue(1);
	return NULL;
}

static void drain(void)
{
	char b[8];
	while (recv(mm[0], b, sizeof b, MSG_DONTWAIT) > 0)
		;
}

static long mmsg(int vlen, int flags, struct timespec *t)
{
	struct mmsghdr m[8];
	static char bufs[8][8];
	struct iovec iov[8];
	memset(m, 0, sizeof m);
	for (int i = 0; i < 8; i++) {
		iov[i] = (struct iovec){bufs[i], sizeof bufs[i]};
		m[i].msg_hdr.msg_iov = &iov[i];
		m[i].msg_hdr.msg_iovlen = 1;
	}
	return recvmmsg(mm[0], m, vlen, flags, t);
}

static void left(const char *name, struct timespec *t, long lo, long hi)
{
	printf("%s: time left %s\n", name,
	       t->tv_sec >= lo && t->tv_sec <= hi && t->tv_nsec >= 0 && t->tv_nsec < 1000000000
		       ? "as expected"
		       : "wrong");
}

static void pending_error(const char *what)
{
	int e = 0;
	socklen_t l = sizeof e;
	getsockopt(mm[0], SOL_SOCKET, SO_ERROR, &e, &l);
	printf("%s: SO_ERROR %s\n", what, e ? strerrorname_np(e) : "0");
}

/* An error after datagrams: their count, and the error left for the next
 * call (__sys_recvmmsg's sk_err); EAGAIN is not left. */
static void mmsg_errors(void)
{
	long page = sysconf(_SC_PAGESIZE);
	char *two = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	/* The second entry in a page of its own. */
	struct mmsghdr *m = (struct mmsghdr *)(two + page) - 1;
	static char buf[8];
	struct iovec good = {buf, sizeof buf}, bad = {(void *)16, 8};
	memset(m, 0, 2 * sizeof *m);
	m[0].msg_hdr.msg_iov = &good;
	m[0].msg_hdr.msg_iovlen = 1;
	m[1].msg_hdr.msg_iov = &bad;
	m[1].msg_hdr.msg_iovlen = 1;
	drain();
	queue(3);
	show("second buffer at a bad address, 3 queued", recvmmsg(mm[0], m, 2, 0, NULL));
	pending_error("bad buffer");
	show("then a receive", recv(mm[0], buf, sizeof buf, MSG_DONTWAIT));
	queue(2);
	show("bad buffer again, 2 queued", recvmmsg(mm[0], m, 2, 0, NULL));
	show("the next call gets the error", recv(mm[0], buf, sizeof buf, MSG_DONTWAIT));
	show("and then none is left", recv(mm[0], buf, sizeof buf, MSG_DONTWAIT));
	/* The second msg_len cannot be written: that datagram is taken, not
	 * counted. */
	m[1].msg_hdr.msg_iov = &good;
	mprotect(two + page, page, PROT_READ);
	queue(3);
	show("second msg_len read-only, 3 queued", recvmmsg(mm[0], m, 2, 0, NULL));
	pending_error("msg_len read-only");
	show("then a receive", recv(mm[0], buf, sizeof buf, MSG_DONTWAIT));
	queue(1);
	show("MSG_WAITFORONE, 1 queued, vlen 2", recvmmsg(mm[0], m, 2, MSG_WAITFORONE, NULL));
	pending_error("EAGAIN after a datagram");
	munmap(two, 2 * page);
}

static int mmsg_mode(void)
{
	socketpair(AF_UNIX, SOCK_DGRAM, 0, mm);
	where(mm[0]);
	struct timespec t = {0, 0};
	queue(3);
	show("zero timeout, 3 queued, vlen 5", mmsg(5, 0, &t));
	left("zero timeout", &t, 0, 0);
	printf("zero timeout: left %ld.%09ld\n", (long)t.tv_sec, t.tv_nsec);
	drain();
	queue(3);
	t = (struct timespec){10, 0};
	show("10 s, 3 queued, vlen 3", mmsg(3, 0, &t));
	left("10 s, 3 queued", &t, 9, 10);
	drain();
	queue(2);
	t = (struct timespec){10, 0};
	show("10 s, 2 queued, vlen 5, MSG_WAITFORONE", mmsg(5, MSG_WAITFORONE, &t));
	left("10 s, MSG_WAITFORONE", &t, 9, 10);
	/* Checked only after each datagram: it waits for the third past 100 ms. */
	queue(2);
	pthread_t th;
	pthread_create(&th, NULL, send_later, NULL);
	t = (struct timespec){0, 100000000};
	show("100 ms, 2 queued then 1 at 400 ms, vlen 5", mmsg(5, 0, &t));
	printf("100 ms: left %ld.%09ld\n", (long)t.tv_sec, t.tv_nsec);
	pthread_join(th, NULL);
	drain();
	/* Within the timeout: the third datagram came in time, the fourth never. */
	queue(1);
	pthread_create(&th, NULL, send_later, NULL);
	t = (struct timespec){0, 800000000};
	show("800 ms, 1 queued then 1 at 400 ms, MSG_WAITFORONE, vlen 5",
	     mmsg(5, MSG_WAITFORONE, &t));
	pthread_join(th, NULL);
	drain();
	t = (struct timespec){0, 1000000000};
	queue(1);
	show("tv_nsec 1e9", mmsg(5, 0, &t));
	t = (struct timespec){-1, 0};
	show("tv_sec -1", mmsg(5, 0, &t));
	show("timeout at a bad address", mmsg(5, 0, (struct timespec *)8));
	drain();
	t = (struct timespec){1, 0};
	show("MSG_DONTWAIT, nothing queued", mmsg(5, MSG_DONTWAIT, &t));
	printf("MSG_DONTWAIT: left %ld.%09ld\n", (long)t.tv_sec, t.tv_nsec);
	mmsg_errors();
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 5 && !strcmp(argv[1], "wait")) {
		kind = argv[2];
		return wait_mode(argv[3], atoi(argv[4]));
	}
	if (argc == 3 && !strcmp(argv[1], "signal"))
		return signal_mode(argv[2]);
	if (argc == 2 && !strcmp(argv[1], "mmsg"))
		return mmsg_mode();
	fprintf(stderr, "usage: blocking wait accept|connect|dgram DIR THREADS | signal DIR | mmsg\n");
	return 2;
}
