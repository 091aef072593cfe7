/* raw_client: a dynamically linked client whose socket calls the preload
 * library cannot see: `raw` makes socket, connect, sendto and recvfrom with
 * the syscall instruction itself (no C library function, not even
 * syscall()); `libc` makes them through the C library (for a copy the
 * loader runs without the library: set-group-ID). For
 * integration/run_filter.sh. Prints the reply, its pid, what its socket's
 * descriptor names (a udsfs socket: a data file in the mount), its
 * effective group, whether the loader ran it in secure mode, and whether
 * the preload library is mapped. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

static long raw(long nr, long a, long b, long c, long d, long e, long f)
{
	long r;
	register long r10 __asm__("r10") = d;
	register long r8 __asm__("r8") = e;
	register long r9 __asm__("r9") = f;
	__asm__ volatile("syscall"
			 : "=a"(r)
			 : "a"(nr), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
			 : "rcx", "r11", "memory");
	if (r < 0 && r > -4096) {
		errno = -r;
		return -1;
	}
	return r;
}

int main(int argc, char **argv)
{
	if (argc != 4 || (strcmp(argv[1], "raw") && strcmp(argv[1], "libc"))) {
		fprintf(stderr, "usage: raw_client raw|libc PATH MSG\n");
		return 2;
	}
	int r = !strcmp(argv[1], "raw");
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	strncpy(a.sun_path, argv[2], sizeof a.sun_path - 1);
	int fd = r ? raw(SYS_socket, AF_UNIX, SOCK_STREAM, 0, 0, 0, 0) : socket(AF_UNIX, SOCK_STREAM, 0);
	if (fd < 0) {
		perror("socket");
		return 1;
	}
	if ((r ? raw(SYS_connect, fd, (long)&a, sizeof a, 0, 0, 0)
	       : connect(fd, (struct sockaddr *)&a, sizeof a)) < 0) {
		perror("connect");
		return 1;
	}
	char msg[256];
	int n = snprintf(msg, sizeof msg, "%s\n", argv[3]);
	if ((r ? raw(SYS_sendto, fd, (long)msg, n, 0, 0, 0) : send(fd, msg, n, 0)) != n) {
		perror("send");
		return 1;
	}
	char buf[256];
	long got = r ? raw(SYS_recvfrom, fd, (long)buf, sizeof buf - 1, 0, 0, 0)
		     : recv(fd, buf, sizeof buf - 1, 0);
	if (got < 0) {
		perror("recv");
		return 1;
	}
	buf[got] = 0;
	printf("reply: %s", buf);
	printf("pid: %d\n", (int)getpid());
	char link[64], target[4096];
	snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
	ssize_t k = readlink(link, target, sizeof target - 1);
	target[k < 0 ? 0 : k] = 0;
	printf("fd: %s\n", target);
	printf("egid: %d secure: %lu\n", (int)getegid(), getauxval(AT_SECURE));
	FILE *maps = fopen("/proc/self/maps", "r");
	int lib = 0;
	char line[4096];
	while (maps && fgets(line, sizeof line, maps))
		lib |= strstr(line, "libudsfs_preload") != NULL;
	printf("library: %s\n", lib ? "yes" : "no");
	close(fd);
	return 0;
}
