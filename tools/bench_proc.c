/* Starting and stopping the processes a benchmark runs; see bench_proc.h. */
#include "bench_proc.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"

int bench_proc_spawn(struct bench_proc *p, char *const argv[])
{
	pid_t parent = getpid(), pid = fork();
	int fd;

	if (pid < 0)
		return -errno;
	if (pid > 0) {
		p->pid = pid;
		return 0;
	}
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(127);
	fd = open(p->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd < 0)
		_exit(127);
	dup2(fd, STDOUT_FILENO);
	dup2(fd, STDERR_FILENO);
	fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (fd >= 0)
		dup2(fd, STDIN_FILENO);
	signal(SIGPIPE, SIG_DFL);
	execvp(argv[0], argv);
	fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
	_exit(127);
}

bool bench_proc_exited(struct bench_proc *p)
{
	int status;

	if (p->pid <= 0)
		return true;
	if (waitpid(p->pid, &status, WNOHANG) != p->pid)
		return false;
	if (WIFSIGNALED(status))
		fprintf(stderr, "%s (pid %d) was killed by signal %d; its log: %s\n", p->name,
			(int)p->pid, WTERMSIG(status), p->log);
	else
		fprintf(stderr, "%s (pid %d) exited with status %d; its log: %s\n", p->name,
			(int)p->pid, WEXITSTATUS(status), p->log);
	p->pid = -1;
	return true;
}

uint64_t bench_proc_cpu_us(const struct bench_proc *p)
{
	char path[64], line[1024], *at;
	unsigned long long utime, stime;
	long ticks = sysconf(_SC_CLK_TCK);
	FILE *f;
	bool read;

	if (p->pid <= 0 || ticks <= 0)
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)p->pid);
	f = fopen(path, "re");
	if (!f)
		return 0;
	read = fgets(line, sizeof(line), f) != NULL;
	fclose(f);
	/* The name (field 2) may hold spaces and parentheses: the fields
	 * after it start past the last ')'. utime and stime are 14 and 15. */
	at = read ? strrchr(line, ')') : NULL;
	if (!at || sscanf(at + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime,
			  &stime) != 2)
		return 0;
	return (utime + stime) * 1000000ull / (unsigned long long)ticks;
}

void bench_sleep_ms(unsigned ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

void bench_proc_stop(struct bench_proc *p)
{
	uint64_t deadline = clock_now_ms() + BENCH_STOP_GRACE_MS;

	if (p->pid <= 0)
		return;
	kill(p->pid, SIGTERM);
	while (waitpid(p->pid, NULL, WNOHANG) == 0) {
		if (clock_now_ms() >= deadline) {
			fprintf(stderr, "%s (pid %d) still running %d ms after SIGTERM: SIGKILL\n",
				p->name, (int)p->pid, BENCH_STOP_GRACE_MS);
			kill(p->pid, SIGKILL);
			waitpid(p->pid, NULL, 0);
			break;
		}
		bench_sleep_ms(10);
	}
	p->pid = -1;
}

bool bench_have_program(const char *name)
{
	const char *path = getenv("PATH");
	char file[PATH_MAX];

	for (const char *p = path ? path : "/usr/bin:/bin"; *p;) {
		size_t n = strcspn(p, ":");

		snprintf(file, sizeof(file), "%.*s/%s", (int)n, p, name);
		if (access(file, X_OK) == 0)
			return true;
		p += n + (p[n] == ':');
	}
	return false;
}
