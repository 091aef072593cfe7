/* report.h: how the test programs of integration/c print what a call gave
 * and where a descriptor lives, in lines compared between a kernel run and
 * a udsfs run (blocking.c, messages.c). Needs <errno.h>, <stdio.h>,
 * <string.h>, <unistd.h> and _GNU_SOURCE (strerrorname_np). */

/* "what: VALUE", or "what: ENAME" for a failure. */
static void show(const char *what, long r)
{
	if (r < 0)
		printf("%s: %s\n", what, strerrorname_np(errno));
	else
		printf("%s: %ld\n", what, r);
}

/* "where: udsfs" for a udsfs socket (its data file), else "where: kernel". */
static void where(int fd)
{
	char link[64], target[512] = {0};
	snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
	ssize_t n = readlink(link, target, sizeof target - 1);
	target[n < 0 ? 0 : n] = 0;
	printf("where: %s\n", strstr(target, "/.udsfs/sock/") ? "udsfs" : "kernel");
}
