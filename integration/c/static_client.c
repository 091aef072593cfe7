/* static_client: socket, connect, send, recv through raw system calls of a
 * statically linked program (no preload library can reach it), for
 * integration/run_seccomp.sh. Prints the reply, its peer's name and its pid. */
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: static_client PATH MSG\n");
		return 2;
	}
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	if (fd < 0) {
		perror("socket");
		return 1;
	}
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	strncpy(a.sun_path, argv[1], sizeof a.sun_path - 1);
	if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
		perror("connect");
		return 1;
	}
	char msg[256];
	int n = snprintf(msg, sizeof msg, "%s\n", argv[2]);
	if (send(fd, msg, n, 0) != n) {
		perror("send");
		return 1;
	}
	char buf[256];
	ssize_t got = recv(fd, buf, sizeof buf - 1, 0);
	if (got < 0) {
		perror("recv");
		return 1;
	}
	buf[got] = 0;
	struct sockaddr_un p;
	socklen_t len = sizeof p;
	if (getpeername(fd, (struct sockaddr *)&p, &len) < 0) {
		perror("getpeername");
		return 1;
	}
	printf("reply: %s", buf);
	printf("peer: %s\n", p.sun_path);
	printf("pid: %d\n", (int)getpid());
	close(fd);
	return 0;
}
