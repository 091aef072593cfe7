/* pass_fds.py's twin in C, built static: files of every kind passed over
 * AF_UNIX socketpairs and what the receiver gets; files in flight closed
 * with an unread queue; MSG_CTRUNC; a send with a file that blocks for room. */
#include "programs.h"

#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <netinet/in.h>
#include <time.h>

#define NFILES 6

static const char *kind(int fd)
{
	struct stat st;
	if (fstat(fd, &st) < 0)
		return errname(errno);
	if (S_ISREG(st.st_mode))
		return "reg";
	if (S_ISFIFO(st.st_mode))
		return "fifo";
	if (S_ISSOCK(st.st_mode))
		return "sock";
	return "other";
}

static const char *type_name(int ty)
{
	switch (ty) {
	case SOCK_STREAM:
		return "SOCK_STREAM";
	case SOCK_DGRAM:
		return "SOCK_DGRAM";
	case SOCK_SEQPACKET:
		return "SOCK_SEQPACKET";
	}
	return "?";
}

static const char *labels[NFILES] = {"regular", "pipe", "eventfd", "memfd", "inet socket", "unix socket"};

/* The files to pass, and what is kept open besides them (pipe's write end,
 * the unix pair's other end). */
static void files(int *fds, int *keep)
{
	FILE *t = tmpfile();
	must(t != NULL, "tmpfile");
	fds[0] = dup(fileno(t));
	fclose(t);
	must(write(fds[0], "regular file\n", 13) == 13, "write");
	int p[2];
	must(pipe(p) == 0, "pipe");
	must(write(p[1], "through a pipe\n", 15) == 15, "write");
	fds[1] = p[0];
	keep[0] = p[1];
	fds[2] = eventfd(7, 0);
	fds[3] = memfd_create("fds", 0);
	must(write(fds[3], "memfd bytes\n", 12) == 12, "write");
	fds[4] = socket(AF_INET, SOCK_DGRAM, 0);
	int cd[2];
	must(socketpair(AF_UNIX, SOCK_STREAM, 0, cd) == 0, "socketpair");
	const char *m = "to the passed unix socket";
	must(send(cd[1], m, strlen(m), 0) == (ssize_t)strlen(m), "send");
	fds[5] = cd[0];
	keep[1] = cd[1];
}

/* What the receiver reads back from a passed file of kind i. */
static void read_back(int i, int fd, char *out, size_t room)
{
	char buf[128] = {0};
	ssize_t n = -1;
	switch (i) {
	case 0:
	case 3:
		n = pread(fd, buf, sizeof buf - 1, 0);
		break;
	case 1:
		n = read(fd, buf, sizeof buf - 1);
		break;
	case 2: {
		uint64_t v;
		n = read(fd, &v, 8);
		if (n == 8) {
			snprintf(out, room, "%llu", (unsigned long long)v);
			return;
		}
		break;
	}
	case 4: {
		int ty;
		socklen_t len = sizeof ty;
		if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &ty, &len) == 0) {
			snprintf(out, room, "%s", type_name(ty));
			return;
		}
		break;
	}
	case 5:
		n = recv(fd, buf, sizeof buf - 1, 0);
		break;
	}
	if (n < 0) {
		snprintf(out, room, "error %s", errname(errno));
		return;
	}
	buf[n] = 0;
	/* As Python's repr would show a trailing newline, without the quotes. */
	char *nl = strchr(buf, '\n');
	if (nl)
		strcpy(nl, "\\n");
	snprintf(out, room, "%s", buf);
}

static int drain_fd, drain_count;

static void *drain(void *arg)
{
	(void)arg;
	nanosleep(&(struct timespec){0, 300 * 1000 * 1000}, NULL);
	char buf[1000];
	for (int i = 0; i < drain_count; i++)
		recv(drain_fd, buf, sizeof buf, 0);
	return NULL;
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	int types[] = {SOCK_STREAM, SOCK_DGRAM, SOCK_SEQPACKET};
	for (int t = 0; t < 3; t++) {
		int ab[2];
		must(socketpair(AF_UNIX, types[t], 0, ab) == 0, "socketpair");
		if (t == 0)
			where(ab[0]);
		int fs[NFILES], keep[2];
		files(fs, keep);
		ssize_t n = send_fds(ab[0], "hello", 5, fs, NFILES);
		char msg[101] = {0};
		int got[16], ngot = 0, flags = 0;
		ssize_t m = recv_fds(ab[1], msg, 100, 10, got, &ngot, &flags);
		printf("%s sent %zd got %s %d fds, flags %d\n", type_name(types[t]), n,
		       m < 0 ? errname(errno) : msg, ngot, flags);
		for (int i = 0; i < ngot && i < NFILES; i++) {
			char back[160];
			read_back(i, got[i], back, sizeof back);
			printf("  %s %s %s\n", labels[i], kind(got[i]), back);
			close(got[i]);
		}
		/* Closing the receiver with a message unread closes the files it
		 * carries: the reader of a pipe whose only other write end was in
		 * flight sees EOF (udsfs: once its daemon handles the release). */
		int p[2];
		must(pipe(p) == 0, "pipe");
		send_fds(ab[0], "unread", 6, &p[1], 1);
		close(p[1]);
		close(ab[1]);
		struct pollfd pf = {.fd = p[0], .events = POLLIN};
		int ready = poll(&pf, 1, 10000);
		char c;
		printf("  pipe EOF after the receiver closed: %s\n",
		       ready == 1 && read(p[0], &c, 1) == 0 ? "True" : "False");
		close(p[0]);
		/* Too small a control buffer: the rest is cut (MSG_CTRUNC) and closed. */
		int ab2[2];
		must(socketpair(AF_UNIX, types[t], 0, ab2) == 0, "socketpair");
		must(pipe(p) == 0, "pipe");
		send_fds(ab2[0], "x", 1, p, 2);
		close(p[1]);
		m = recv_fds(ab2[1], msg, 10, 1, got, &ngot, &flags);
		printf("  one of two: %d ctrunc %s\n", ngot, flags & MSG_CTRUNC ? "True" : "False");
		for (int i = 0; i < ngot; i++)
			close(got[i]);
		close(p[0]);
		close(ab[0]);
		close(ab2[0]);
		close(ab2[1]);
		for (int i = 0; i < NFILES; i++)
			close(fs[i]);
		close(keep[0]);
		close(keep[1]);
	}
	/* A send with files that must wait for room: it blocks, then goes
	 * through whole once the reader drains the queue. */
	for (int t = 0; t < 2; t++) {
		int ab[2];
		must(socketpair(AF_UNIX, types[t], 0, ab) == 0, "socketpair");
		char fill[1000];
		memset(fill, 'f', sizeof fill);
		int queued = 0;
		while (send(ab[0], fill, sizeof fill, MSG_DONTWAIT) == (ssize_t)sizeof fill)
			queued++;
		drain_fd = ab[1];
		drain_count = queued;
		pthread_t th;
		must(pthread_create(&th, NULL, drain, NULL) == 0, "pthread_create");
		int p[2];
		must(pipe(p) == 0, "pipe");
		ssize_t n = send_fds(ab[0], "after", 5, &p[1], 1);
		pthread_join(th, NULL);
		close(p[1]);
		char msg[11] = {0};
		int got[4], ngot = 0, flags = 0;
		recv_fds(ab[1], msg, 10, 1, got, &ngot, &flags);
		char two[3] = {0};
		if (ngot > 0) {
			must(write(got[0], "ok", 2) == 2, "write");
			must(read(p[0], two, 2) == 2, "read");
		}
		printf("%s blocked send with a file: %zd %s %d %s\n", type_name(types[t]), n, msg,
		       ngot, two);
		for (int i = 0; i < ngot; i++)
			close(got[i]);
		close(p[0]);
		close(ab[0]);
		close(ab[1]);
	}
	printf("done\n");
	return 0;
}
