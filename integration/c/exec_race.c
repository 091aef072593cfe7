/* exec_race: a trapped call whose thread dies under it, for
 * integration/adversarial_exec_race.sh. Run under `udsfs run --front
 * seccomp`, static.
 *
 *   exec_race CALL DAEMON_PID
 *     CALL (getsockname or fstat) is made by the main thread
 *     (the thread-group leader) on a udsfs socket of a socketpair, its
 *     output pointers at WHERE, an address mapped in no process of this
 *     program. Before it, DAEMON_PID (0: none) is stopped, so that the
 *     supervisor's call waits in the daemon. A second thread then execs
 *     this program as "victim": de_thread kills the trapped leader, and the
 *     new image takes the leader's thread id, the one the supervisor
 *     writes the call's results to. The victim maps WHERE, continues the
 *     daemon, waits, and says whether anything was written there: the
 *     trapped call's thread is gone, so nothing may be (Linux never writes
 *     a dead call's results into the image that replaced it). */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

/* The call's output (a sockaddr, a struct stat) and, a
 * page on, its length. */
#define WHERE ((uintptr_t)0x5a5a00000000)
#define LENGTH (WHERE + 4096)

static char *self, *call, *daemon_arg;

static void *exec_later(void *unused)
{
	(void)unused;
	/* Long enough for the leader to be trapped and its call to wait. */
	usleep(500 * 1000);
	char *argv[] = {self, "victim", call, daemon_arg, NULL};
	execv("/proc/self/exe", argv);
	perror("execv");
	_exit(3);
}

static int victim(pid_t daemon)
{
	char *m = mmap((void *)WHERE, 8192, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	if (m == MAP_FAILED) {
		perror("victim mmap");
		return 3;
	}
	/* What a length argument would hold. */
	*(uint32_t *)LENGTH = 4096;
	if (daemon > 0)
		kill(daemon, SIGCONT);
	/* The supervisor's call ends once the daemon answers it. */
	sleep(2);
	int written = 0;
	for (int i = 0; i < 4096; i++)
		written |= m[i] != 0;
	uint32_t len = *(uint32_t *)LENGTH;
	if (written || len != 4096) {
		printf("%s: the victim's memory was written (first bytes %02x %02x, length %u)\n",
		       call, (unsigned char)m[0], (unsigned char)m[1], len);
		return 1;
	}
	printf("%s: the victim's memory untouched\n", call);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 4 && strcmp(argv[1], "victim") == 0) {
		call = argv[2];
		return victim(atoi(argv[3]));
	}
	if (argc != 3) {
		fprintf(stderr, "usage: exec_race getsockname|fstat DAEMON_PID\n");
		return 2;
	}
	self = argv[0], call = argv[1], daemon_arg = argv[2];
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0) {
		perror("socketpair");
		return 3;
	}
	pid_t daemon = atoi(daemon_arg);
	pthread_t t;
	pthread_create(&t, NULL, exec_later, NULL);
	if (daemon > 0 && kill(daemon, SIGSTOP) < 0) {
		perror("kill SIGSTOP");
		return 3;
	}
	long r;
	if (strcmp(call, "getsockname") == 0)
		r = getsockname(sv[0], (void *)WHERE, (socklen_t *)LENGTH);
	else
		r = fstat(sv[0], (struct stat *)WHERE);
	/* On the kernel the call fails EFAULT at once; the exec ends this thread. */
	(void)r;
	pause();
	return 3;
}
