/*
 * hook.c - the after-change hook: fork + execve of an operator's
 * executable (no shell), in its own process group, killed with that
 * group after its timeout; one line logged per run (docs/agent.md).
 *
 * Its environment is the agent's own minus secrets (GPUPOOL_ENROLL_TOKEN;
 * the node token and push secret live in files, never in the
 * environment) plus GPUPOOL_CHANGED_GPUS, GPUPOOL_GENERATION and
 * GPUPOOL_NODE. All memory the child uses is prepared before fork: the
 * agent is multithreaded, so the child only makes async-signal-safe
 * calls until execve.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend.h"
#include "core/log.h"
#include "hook.h"
#include "util.h"

extern char **environ;

#define HOOK_STOP_GRACE_MS 5000 /* SIGTERM to SIGKILL when the agent stops */
#define HOOK_WAIT_STEP_US 20000

struct hook {
	char path[4096];
	int timeout_s;
	char node[256];
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool stop; /* under mu */
	/* the next run (under mu): the union of the GPUs changed since the last start */
	bool pending;
	char gpus[AG_MAX_GPUS][AG_UUID_MAX];
	int ngpus;
	long long gen;
};

int
hook_check_path(const char *path, char *err, size_t errlen)
{
	struct stat st;
	if (path == NULL || path[0] != '/') {
		snprintf(err, errlen, "%s is not an absolute path", path ? path : "(none)");
		return -1;
	}
	if (stat(path, &st) != 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	if (!S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "%s is not a regular file", path);
		return -1;
	}
	if (access(path, X_OK) != 0) {
		snprintf(err, errlen, "%s is not executable by this user", path);
		return -1;
	}
	return 0;
}

static bool
stopping(struct hook *h)
{
	pthread_mutex_lock(&h->mu);
	bool s = h->stop;
	pthread_mutex_unlock(&h->mu);
	return s;
}

/* NAME=... of the variables the hook never inherits: secrets, and the
 * ones the agent sets itself. */
static bool
dropped(const char *kv)
{
	static const char *const names[] = { "GPUPOOL_ENROLL_TOKEN=", "GPUPOOL_CHANGED_GPUS=",
		"GPUPOOL_GENERATION=", "GPUPOOL_NODE=" };
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strncmp(kv, names[i], strlen(names[i])) == 0)
			return true;
	return false;
}

static void
child_close_fds(int maxfd)
{
#ifdef SYS_close_range
	if (syscall(SYS_close_range, 3U, ~0U, 0U) == 0)
		return;
#endif
	for (int fd = 3; fd < maxfd; fd++)
		close(fd);
}

static void
run_once(struct hook *h, char (*gpus)[AG_UUID_MAX], int n, long long gen)
{
	char csv[AG_MAX_GPUS * AG_UUID_MAX + 1] = "";
	for (int i = 0; i < n; i++) {
		if (i > 0)
			strncat(csv, ",", sizeof(csv) - strlen(csv) - 1);
		strncat(csv, gpus[i], sizeof(csv) - strlen(csv) - 1);
	}
	char genv[64];
	snprintf(genv, sizeof(genv), "%lld", gen);
	size_t ne = 0;
	for (char **e = environ; e != NULL && *e != NULL; e++)
		ne++;
	char **envp = calloc(ne + 4, sizeof(*envp));
	size_t vlen = strlen(csv) + strlen(h->node) + 128;
	char *vars = malloc(vlen * 3);
	if (envp == NULL || vars == NULL) {
		free(envp);
		free(vars);
		log_error(NULL, "after-change hook not run: out of memory", "gpus", csv,
		    "generation", genv);
		return;
	}
	size_t k = 0;
	for (char **e = environ; e != NULL && *e != NULL; e++)
		if (!dropped(*e))
			envp[k++] = *e;
	snprintf(vars, vlen, "GPUPOOL_CHANGED_GPUS=%s", csv);
	snprintf(vars + vlen, vlen, "GPUPOOL_GENERATION=%s", genv);
	snprintf(vars + 2 * vlen, vlen, "GPUPOOL_NODE=%s", h->node);
	envp[k++] = vars;
	envp[k++] = vars + vlen;
	envp[k++] = vars + 2 * vlen;
	envp[k] = NULL;
	char *argv[] = { h->path, NULL };
	long om = sysconf(_SC_OPEN_MAX);
	int maxfd = om > 0 && om < 65536 ? (int)om : 65536;

	long long t0 = ag_mono_ms();
	pid_t pid = fork();
	if (pid == 0) {
		/* the child: async-signal-safe calls only, until execve */
		setpgid(0, 0);
		struct sigaction dfl;
		memset(&dfl, 0, sizeof(dfl));
		dfl.sa_handler = SIG_DFL;
		sigaction(SIGPIPE, &dfl, NULL);
		sigaction(SIGTERM, &dfl, NULL);
		sigaction(SIGINT, &dfl, NULL);
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		int nul = open("/dev/null", O_RDONLY);
		if (nul > 0) {
			dup2(nul, 0);
			close(nul);
		}
		child_close_fds(maxfd);
		execve(h->path, argv, envp);
		_exit(127);
	}
	int fork_errno = errno;
	free(envp);
	free(vars);
	if (pid < 0) {
		log_error(NULL, "after-change hook not run: fork failed", "gpus", csv, "generation",
		    genv, "error", strerror(fork_errno));
		return;
	}
	(void)setpgid(pid, pid); /* also here: the group exists before any kill */
	long long deadline = t0 + h->timeout_s * 1000LL, term_at = 0;
	bool timed_out = false, killed = false;
	int st = 0;
	for (;;) {
		pid_t r = waitpid(pid, &st, WNOHANG);
		if (r == pid)
			break;
		if (r < 0 && errno != EINTR) {
			st = -1;
			break;
		}
		long long now = ag_mono_ms();
		if (!killed && now >= deadline) {
			timed_out = killed = true;
			kill(-pid, SIGKILL);
			kill(pid, SIGKILL); /* should it have left its group */
		} else if (!killed && term_at == 0 && stopping(h)) {
			term_at = now;
			kill(-pid, SIGTERM);
			kill(pid, SIGTERM);
		} else if (!killed && term_at > 0 && now - term_at >= HOOK_STOP_GRACE_MS) {
			killed = true;
			kill(-pid, SIGKILL);
			kill(pid, SIGKILL);
		}
		usleep(HOOK_WAIT_STEP_US);
	}
	char ms[32], result[64];
	snprintf(ms, sizeof(ms), "%lld", ag_mono_ms() - t0);
	bool ok = false;
	if (timed_out)
		snprintf(result, sizeof(result), "timed out after %d s: killed", h->timeout_s);
	else if (st != -1 && WIFEXITED(st)) {
		ok = WEXITSTATUS(st) == 0;
		snprintf(result, sizeof(result), "exit %d", WEXITSTATUS(st));
	} else if (st != -1 && WIFSIGNALED(st))
		snprintf(result, sizeof(result), "signal %d", WTERMSIG(st));
	else
		snprintf(result, sizeof(result), "unknown");
	log_event(ok ? LOG_LEVEL_INFO : LOG_LEVEL_WARN, NULL, "after-change hook ran", "hook",
	    h->path, "gpus", csv, "generation", genv, "result", result, "duration_ms", ms,
	    (const char *)0);
}

static void *
hook_main(void *arg)
{
	struct hook *h = arg;
	char gpus[AG_MAX_GPUS][AG_UUID_MAX];
	for (;;) {
		pthread_mutex_lock(&h->mu);
		while (!h->stop && !h->pending)
			pthread_cond_wait(&h->cv, &h->mu);
		if (h->stop) {
			if (h->pending) {
				char g[32];
				snprintf(g, sizeof(g), "%lld", h->gen);
				log_warn(NULL, "agent stopping: after-change hook not run",
				    "generation", g);
			}
			pthread_mutex_unlock(&h->mu);
			return NULL;
		}
		int n = h->ngpus;
		memcpy(gpus, h->gpus, sizeof(gpus));
		long long gen = h->gen;
		h->pending = false;
		h->ngpus = 0;
		pthread_mutex_unlock(&h->mu);
		run_once(h, gpus, n, gen);
	}
}

struct hook *
hook_start(const char *path, int timeout_s, const char *node_name, char *err, size_t errlen)
{
	if (hook_check_path(path, err, errlen) != 0)
		return NULL;
	struct hook *h = calloc(1, sizeof(*h));
	if (h == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	ag_strlcpy(h->path, path, sizeof(h->path));
	ag_strlcpy(h->node, node_name, sizeof(h->node));
	h->timeout_s = timeout_s > 0 ? timeout_s : 60;
	pthread_mutex_init(&h->mu, NULL);
	pthread_cond_init(&h->cv, NULL);
	if (pthread_create(&h->th, NULL, hook_main, h) != 0) {
		snprintf(err, errlen, "cannot start the hook thread");
		pthread_mutex_destroy(&h->mu);
		pthread_cond_destroy(&h->cv);
		free(h);
		return NULL;
	}
	return h;
}

void
hook_notify(struct hook *h, const char *const *gpu_uuids, int n, long long generation)
{
	if (h == NULL || n <= 0)
		return;
	pthread_mutex_lock(&h->mu);
	for (int i = 0; i < n; i++) {
		bool have = false;
		for (int k = 0; k < h->ngpus && !have; k++)
			have = strcmp(h->gpus[k], gpu_uuids[i]) == 0;
		if (!have && h->ngpus < AG_MAX_GPUS)
			ag_strlcpy(h->gpus[h->ngpus++], gpu_uuids[i], AG_UUID_MAX);
	}
	h->gen = generation; /* the latest applied (below the last one after a restore) */
	h->pending = true;
	pthread_cond_signal(&h->cv);
	pthread_mutex_unlock(&h->mu);
}

void
hook_stop(struct hook *h)
{
	if (h == NULL)
		return;
	pthread_mutex_lock(&h->mu);
	h->stop = true;
	pthread_cond_signal(&h->cv);
	pthread_mutex_unlock(&h->mu);
	pthread_join(h->th, NULL);
	pthread_mutex_destroy(&h->mu);
	pthread_cond_destroy(&h->cv);
	free(h);
}
