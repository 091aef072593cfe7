/* forger: a process outside every `udsfs run` tree that tries to get its
 * socket calls served by one, for integration/adversarial_run.sh. It puts
 * itself under a seccomp filter of its own that traps socket and connect,
 * sends the filter's listener over the kernel socket HANDOFF to an accomplice
 * inside the run (which hands it to the run as its own), waits for a byte
 * back, and then connects to TARGET: only a supervisor serving its calls can
 * make that a udsfs socket. Prints what each call gave. */
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

static int unix_connect(const char *path)
{
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	if (fd < 0)
		return -1;
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	strncpy(a.sun_path, path, sizeof a.sun_path - 1);
	if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0)
		return -1;
	return fd;
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: forger HANDOFF TARGET\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IONBF, 0);
	int h = unix_connect(argv[1]);
	if (h < 0) {
		perror("connect to the accomplice");
		return 1;
	}
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_socket, 2, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_connect, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF),
	};
	struct sock_fprog prog = {.len = sizeof f / sizeof f[0], .filter = f};
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
		perror("no_new_privs");
		return 1;
	}
	int l = syscall(__NR_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
	if (l < 0) {
		perror("seccomp");
		return 1;
	}
	char byte = 'l';
	struct iovec iov = {.iov_base = &byte, .iov_len = 1};
	char ctl[CMSG_SPACE(sizeof(int))] = {0};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof ctl};
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &l, sizeof l);
	if (sendmsg(h, &m, 0) != 1) {
		perror("sendmsg");
		return 1;
	}
	close(l);
	if (read(h, &byte, 1) != 1) {
		printf("the accomplice gave up\n");
		return 1;
	}
	printf("handed over: %c\n", byte);
	int s = unix_connect(argv[2]);
	if (s < 0) {
		printf("forger: %s\n", strerror(errno));
		return 0;
	}
	char buf[128] = {0};
	int n = write(s, "forger\n", 7) == 7 ? read(s, buf, sizeof buf - 1) : -1;
	printf("forger connected: %s\n", n > 0 ? buf : "(nothing)");
	return 0;
}
