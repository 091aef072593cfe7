/* exec_list: the list forms of exec (execl, execlp, execle) from a dynamically
 * linked program, for integration/run_exec_static.sh. Each runs in a child
 * the parent waits for, printing "child PID status N" after it:
 *   exec_list STATIC SOCK: the static client through execl, execlp (found in
 *     $PATH by its name) and execle (envp after the NULL);
 *   exec_list echo: /bin/echo and sh through lists long enough that items and
 *     execle's envp are passed on the stack, not in registers. */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static void waited(pid_t p)
{
	int st = 0;
	waitpid(p, &st, 0);
	printf("child %d status %d\n", p, WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
	fflush(stdout);
}

#define CHILD(call)                                                                 \
	do {                                                                        \
		fflush(stdout);                                                     \
		pid_t p = fork();                                                   \
		if (p == 0) {                                                       \
			call;                                                       \
			perror(#call);                                              \
			_exit(127);                                                 \
		}                                                                   \
		waited(p);                                                          \
	} while (0)

int main(int argc, char **argv)
{
	if (argc == 3) {
		const char *name = strrchr(argv[1], '/') ? strrchr(argv[1], '/') + 1 : argv[1];
		CHILD(execl(argv[1], argv[1], argv[2], "from-execl", (char *)NULL));
		CHILD(execlp(name, name, argv[2], "from-execlp", (char *)NULL));
		CHILD(execle(argv[1], argv[1], argv[2], "from-execle", (char *)NULL, environ));
		return 0;
	}
	if (argc == 2 && !strcmp(argv[1], "echo")) {
		CHILD(execl("/bin/echo", "echo", "a1", "a2", "a3", "a4", "a5", "a6", "a7", "a8", "a9",
			    (char *)NULL));
		CHILD(execlp("echo", "echo", "p1", "p2", "p3", "p4", "p5", "p6", "p7", (char *)NULL));
		char *env[] = {"X=from-envp", NULL};
		/* envp in r9, then on the stack. */
		CHILD(execle("/bin/sh", "sh", "-c", "echo $X", (char *)NULL, env));
		CHILD(execle("/bin/sh", "sh", "-c", "echo $X $0 $1 $2 $3", "e0", "e1", "e2", "e3",
			     (char *)NULL, env));
		return 0;
	}
	fprintf(stderr, "usage: exec_list STATIC SOCK | exec_list echo\n");
	return 2;
}
