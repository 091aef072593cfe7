/* efault: socket calls given memory the program cannot read or write — a
 * msghdr, iovec array, buffer, name, control buffer, mmsghdr vector,
 * timeout, option length or address length that points at an unmapped
 * page (or a read-only one where the call writes). Linux answers EFAULT and
 * the program goes on; each case prints what the call returned, what stayed
 * queued after it (a good non-blocking receive on the other end), and that
 * the program is alive. integration/adversarial_efault.sh runs it on kernel
 * sockets, through the preload library and through the supervisor and
 * compares the outputs line by line. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "report.h"

static char *BAD; /* an unmapped page */
static char *RO;  /* a read-only page */
static char *HDR; /* a page made read-only for a case */
static char *LONG; /* five pages, then an unmapped one */
static int ncase;

/* What waits at `fd` (non-blocking): "queued: BYTES" or "queued: EAGAIN". */
static void queued(int fd)
{
	char buf[64] = {0};
	ssize_t n = recv(fd, buf, sizeof buf - 1, MSG_DONTWAIT);
	if (n < 0)
		printf("  queued: %s\n", strerrorname_np(errno));
	else
		printf("  queued: %zd '%s'\n", n, buf);
}

static void result(const char *what, long r)
{
	ncase++;
	if (r < 0)
		printf("%s: -1 %s\n", what, strerrorname_np(errno));
	else
		printf("%s: %ld\n", what, r);
	printf("  alive after case %d\n", ncase);
	fflush(stdout);
}

static const char *tyname(int ty)
{
	return ty == SOCK_STREAM ? "stream" : ty == SOCK_DGRAM ? "dgram" : "seqpacket";
}

/* A socketpair of `ty`; the sending end autobound, so that a receive has a
 * name to report. */
static void pair(int ty, int s[2])
{
	if (socketpair(AF_UNIX, ty, 0, s) < 0) {
		perror("socketpair");
		exit(1);
	}
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	if (bind(s[0], (struct sockaddr *)&a, sizeof(sa_family_t)) < 0) {
		perror("autobind");
		exit(1);
	}
}

/* One case of sends() or recvs(), in their frame (ty, s, h, iov, what): a fresh pair
 * of `ty`, `fill` run (what a receive finds queued), `h` reset to the one iovec `iov`,
 * `setup` run; then `call`, what it returned and what stayed queued at s[1] printed. */
#define CASE(name, fill, setup, call)                                   \
	do {                                                            \
		pair(ty, s);                                            \
		fill;                                                   \
		memset(&h, 0, sizeof h);                                \
		h.msg_iov = &iov;                                       \
		h.msg_iovlen = 1;                                       \
		setup;                                                  \
		snprintf(what, sizeof what, "%s %s", tyname(ty), name); \
		result(what, call);                                     \
		queued(s[1]);                                           \
		close(s[0]);                                            \
		close(s[1]);                                            \
	} while (0)

/* What a receive case finds: "hello" and "world" sent at `fd`; `iov` is the whole of
 * `buf`, zeroed. */
static void two_queued(int fd, char *buf, size_t n, struct iovec *iov)
{
	if (send(fd, "hello", 5, 0) != 5 || send(fd, "world", 5, 0) != 5) {
		perror("send");
		exit(1);
	}
	memset(buf, 0, n);
	*iov = (struct iovec){buf, n};
}

static void sends(int ty)
{
	char what[128];
	int s[2];
	struct iovec iov = {"hello", 5};
	struct sockaddr_un to = {.sun_family = AF_UNIX};
	struct msghdr h;
#define SEND_CASE(name, setup, call) CASE(name, , setup, call)
	SEND_CASE("sendmsg, msghdr unmapped", , sendmsg(s[0], (struct msghdr *)BAD, 0));
	SEND_CASE("sendmsg, msg_iov unmapped", h.msg_iov = (struct iovec *)BAD, sendmsg(s[0], &h, 0));
	struct iovec bad_base = {BAD, 5};
	SEND_CASE("sendmsg, iov_base unmapped", h.msg_iov = &bad_base, sendmsg(s[0], &h, 0));
	struct iovec half[2] = {{"hel", 3}, {BAD, 2}};
	SEND_CASE("sendmsg, second iov_base unmapped", (h.msg_iov = half, h.msg_iovlen = 2),
		  sendmsg(s[0], &h, 0));
	SEND_CASE("sendmsg, msg_name unmapped", (h.msg_name = BAD, h.msg_namelen = sizeof to),
		  sendmsg(s[0], &h, 0));
	SEND_CASE("sendmsg, msg_control unmapped",
		  (h.msg_control = BAD, h.msg_controllen = CMSG_SPACE(sizeof(int))),
		  sendmsg(s[0], &h, 0));
	/* Larger than one of udsfs's message pieces, its end unmapped. */
	struct iovec big = {LONG, 5 * 4096 + 100};
	SEND_CASE("sendmsg, 20580 bytes, the last 100 unmapped", h.msg_iov = &big,
		  sendmsg(s[0], &h, MSG_DONTWAIT));
	SEND_CASE("send, its buffer unmapped", , send(s[0], BAD, 5, 0));
	SEND_CASE("sendmmsg, its vector unmapped", , sendmmsg(s[0], (struct mmsghdr *)BAD, 1, 0));
#undef SEND_CASE
}

static void recvs(int ty)
{
	char what[128];
	char buf[64];
	int s[2];
	struct iovec iov;
	struct sockaddr_un from;
	struct msghdr h;
	struct mmsghdr mm;
#define RECV_CASE(name, setup, call) CASE(name, two_queued(s[0], buf, sizeof buf, &iov), setup, call)
	RECV_CASE("recvmsg, msghdr unmapped", , recvmsg(s[1], (struct msghdr *)BAD, MSG_DONTWAIT));
	RECV_CASE("recvmsg, msg_iov unmapped", h.msg_iov = (struct iovec *)BAD,
		  recvmsg(s[1], &h, MSG_DONTWAIT));
	/* The msghdr can be read but not written: the receive happens, its
	 * results cannot be reported. */
	RECV_CASE("recvmsg, msghdr read-only",
		  (memcpy(HDR, &h, sizeof h), mprotect(HDR, 4096, PROT_READ)),
		  recvmsg(s[1], (struct msghdr *)HDR, MSG_DONTWAIT));
	mprotect(HDR, 4096, PROT_READ | PROT_WRITE);
	struct iovec bad_base = {BAD, 64};
	RECV_CASE("recvmsg, iov_base unmapped", h.msg_iov = &bad_base, recvmsg(s[1], &h, MSG_DONTWAIT));
	struct iovec ro_base = {RO, 64};
	RECV_CASE("recvmsg, iov_base read-only", h.msg_iov = &ro_base, recvmsg(s[1], &h, MSG_DONTWAIT));
	struct iovec half[2] = {{buf, 3}, {BAD, 64}};
	RECV_CASE("recvmsg, second iov_base unmapped", (h.msg_iov = half, h.msg_iovlen = 2),
		  recvmsg(s[1], &h, MSG_DONTWAIT));
	RECV_CASE("recvmsg MSG_PEEK, second iov_base unmapped", (h.msg_iov = half, h.msg_iovlen = 2),
		  recvmsg(s[1], &h, MSG_DONTWAIT | MSG_PEEK));
	/* Buffers that end inside the third of many chunks: Linux copies a
	 * stream a sender's write (an skb) at a time, so the two whole chunks
	 * come and the third stays queued whole. */
	struct iovec two_and_a_bit[2] = {{buf, 12}, {BAD, 64}};
	RECV_CASE("recvmsg, buffers end inside the third write",
		  (send(s[0], "abcde", 5, 0), h.msg_iov = two_and_a_bit, h.msg_iovlen = 2),
		  recvmsg(s[1], &h, MSG_DONTWAIT));
	RECV_CASE("recvmsg, msg_name unmapped", (h.msg_name = BAD, h.msg_namelen = sizeof from),
		  recvmsg(s[1], &h, MSG_DONTWAIT));
	RECV_CASE("recvmsg, msg_control unmapped",
		  (h.msg_control = BAD, h.msg_controllen = CMSG_SPACE(sizeof(int))),
		  recvmsg(s[1], &h, MSG_DONTWAIT));
	int on = 1;
	RECV_CASE("recvmsg, msg_control unmapped, SO_PASSCRED on",
		  (setsockopt(s[1], SOL_SOCKET, SO_PASSCRED, &on, sizeof on),
		   h.msg_control = BAD, h.msg_controllen = 64),
		  recvmsg(s[1], &h, MSG_DONTWAIT));
	RECV_CASE("recv, its buffer unmapped", , recv(s[1], BAD, 64, MSG_DONTWAIT));
	socklen_t *bad_len = (socklen_t *)BAD;
	RECV_CASE("recvfrom, its address length unmapped", ,
		  recvfrom(s[1], buf, sizeof buf, MSG_DONTWAIT, (struct sockaddr *)&from, bad_len));
	RECV_CASE("recvmmsg, its vector unmapped", ,
		  recvmmsg(s[1], (struct mmsghdr *)BAD, 1, MSG_DONTWAIT, NULL));
	RECV_CASE("recvmmsg, its timeout unmapped",
		  (memset(&mm, 0, sizeof mm), mm.msg_hdr.msg_iov = &iov, mm.msg_hdr.msg_iovlen = 1),
		  recvmmsg(s[1], &mm, 1, MSG_DONTWAIT, (struct timespec *)BAD));
#undef RECV_CASE
}

static void options(void)
{
	int s[2], v = 0;
	socklen_t len = sizeof v;
	pair(SOCK_STREAM, s);
	result("getsockopt, optlen unmapped",
	       getsockopt(s[0], SOL_SOCKET, SO_SNDBUF, &v, (socklen_t *)BAD));
	result("getsockopt, optval unmapped", getsockopt(s[0], SOL_SOCKET, SO_SNDBUF, BAD, &len));
	result("setsockopt, optval unmapped",
	       setsockopt(s[0], SOL_SOCKET, SO_SNDBUF, BAD, sizeof(int)));
	result("getsockname, address unmapped",
	       getsockname(s[0], (struct sockaddr *)BAD, &len));
	close(s[0]);
	close(s[1]);

	/* accept: the connection is taken, then its address cannot be
	 * written: EFAULT, and the connection is gone. */
	int l = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
	struct sockaddr_un a = {.sun_family = AF_UNIX}, name;
	socklen_t nl = sizeof name;
	if (bind(l, (struct sockaddr *)&a, sizeof(sa_family_t)) < 0 || listen(l, 4) < 0 ||
	    getsockname(l, (struct sockaddr *)&name, &nl) < 0) {
		perror("listener");
		exit(1);
	}
	where(l);
	int cl = socket(AF_UNIX, SOCK_STREAM, 0);
	if (connect(cl, (struct sockaddr *)&name, nl) < 0) {
		perror("connect");
		exit(1);
	}
	where(cl);
	result("accept, address length unmapped",
	       accept(l, (struct sockaddr *)&a, (socklen_t *)BAD));
	int again = accept(l, NULL, NULL);
	printf("  then accept: %s\n", again < 0 ? strerrorname_np(errno) : "a connection");
	result("connect, address unmapped", connect(cl, (struct sockaddr *)BAD, sizeof a));
	result("bind, address unmapped", bind(cl, (struct sockaddr *)BAD, sizeof a));
	close(cl);
	close(l);
}

/* The program's own SIGSEGV handling is its own: a fault of its own runs
 * its handler (on its alternate stack) or, by default, kills it. */
static sigjmp_buf back;
static volatile void *fault_addr;
static volatile int on_altstack;

static void own_handler(int sig, siginfo_t *si, void *ctx)
{
	(void)sig;
	(void)ctx;
	stack_t now;
	sigaltstack(NULL, &now);
	on_altstack = now.ss_flags & SS_ONSTACK;
	fault_addr = si->si_addr;
	siglongjmp(back, 1);
}

static void *in_thread(void *arg)
{
	(void)arg;
	recvs(SOCK_STREAM);
	return NULL;
}

static void dispositions(void)
{
	struct sigaction o;
	sigaction(SIGSEGV, NULL, &o);
	printf("SIGSEGV reads back as: %s\n",
	       o.sa_handler == SIG_DFL ? "SIG_DFL" : "something else");
	pid_t c = fork();
	if (c == 0) {
		*(volatile char *)BAD = 1;
		_exit(0);
	}
	int st = 0;
	waitpid(c, &st, 0);
	printf("a child's own fault, SIGSEGV by default: %s\n",
	       WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV ? "killed by SIGSEGV" : "not killed by SIGSEGV");

	static char alt[65536];
	stack_t ss = {.ss_sp = alt, .ss_size = sizeof alt};
	sigaltstack(&ss, NULL);
	struct sigaction a = {.sa_sigaction = own_handler, .sa_flags = SA_SIGINFO | SA_ONSTACK};
	sigemptyset(&a.sa_mask);
	sigaction(SIGSEGV, &a, NULL);
	sigaction(SIGSEGV, NULL, &o);
	printf("SIGSEGV reads back as: %s\n",
	       o.sa_sigaction == own_handler ? "the program's handler" : "something else");
	/* EFAULT with the program's handler in place, then its own fault. */
	sends(SOCK_DGRAM);
	if (sigsetjmp(back, 1) == 0)
		*(volatile char *)BAD = 1;
	printf("the program's handler ran for its own fault: %s, on its alternate stack: %s\n",
	       fault_addr == BAD ? "yes" : "no", on_altstack ? "yes" : "no");
	/* In a thread. */
	pthread_t t;
	pthread_create(&t, NULL, in_thread, NULL);
	pthread_join(t, NULL);
	fault_addr = NULL;
	if (sigsetjmp(back, 1) == 0)
		*(volatile char *)RO = 1;
	printf("and again, a write to a read-only page: %s\n", fault_addr == RO ? "yes" : "no");
	a.sa_handler = SIG_DFL;
	a.sa_flags = 0;
	sigaction(SIGSEGV, &a, NULL);
	sigaction(SIGSEGV, NULL, &o);
	printf("SIGSEGV reads back as: %s\n",
	       o.sa_handler == SIG_DFL ? "SIG_DFL" : "something else");
	recvs(SOCK_DGRAM);
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	BAD = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	RO = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	HDR = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	LONG = mmap(NULL, 6 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (BAD == MAP_FAILED || RO == MAP_FAILED || HDR == MAP_FAILED || LONG == MAP_FAILED ||
	    mprotect(LONG + 5 * 4096, 4096, PROT_NONE) < 0) {
		perror("mmap");
		return 1;
	}
	int w[2];
	socketpair(AF_UNIX, SOCK_STREAM, 0, w);
	where(w[0]);
	int types[] = {SOCK_STREAM, SOCK_DGRAM, SOCK_SEQPACKET};
	for (int i = 0; i < 3; i++)
		sends(types[i]);
	for (int i = 0; i < 3; i++)
		recvs(types[i]);
	options();
	dispositions();
	printf("all %d cases done\n", ncase);
	return 0;
}
