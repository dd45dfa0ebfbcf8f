/*
 * sim_load: a load client for tokbench-sim that is not the simulator.
 *
 * One thread, one epoll loop.  It keeps N streaming /v1/completions requests
 * open (a finished stream is replaced at once on the same keep-alive
 * connection), reads every SSE event, and measures over a window:
 *   - tokens/s received, and tokens lost (a finished stream whose token
 *     events differ from max_tokens);
 *   - gap error: |stamp gap - modelled step| between consecutive tokens of
 *     one stream, from the simulator's ": t=<ns>" stamps (what it sent), and
 *     the same from our own arrival times (what a client sees);
 *   - delivery delay: arrival (CLOCK_MONOTONIC here) - stamp;
 *   - CPU per million tokens of the simulator (/proc/PID/stat) and of us.
 * Prints one "key value" line per figure.
 *
 * --prompt-tokens T: every request's prompt is T tokens of the sim's
 * tokenizer (one prompt for all, as a decode cell sends; ~4 bytes a token,
 * so 256K tokens is a 1 MB body), sent once beforehand with max_tokens 1 so
 * that the streams find it cached (as tokbench's scout does), and the
 * streams' first requests ask i/N of max_tokens (stream i of N), so that
 * requests then arrive evenly, N / (max_tokens x step) a second, in the
 * middle of the other streams' decoding: what the simulator does with each
 * prompt (parse, count, tokenize, hash) shows as gap error if it stalls
 * the loop.
 *
 * usage: sim_load --port P --streams N --step-ms X [--seconds S]
 *                 [--max-tokens M] [--sim-pid PID] [--warmup S]
 *                 [--prompt-tokens T]
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define LINE_CAP 65536

struct stream {
  int fd;
  char line[LINE_CAP];
  size_t ll;
  int64_t stamp;      /* stamp of the event being read */
  int64_t prev_stamp; /* of the previous token event, 0 at stream start */
  int64_t prev_arr;
  int64_t tokens; /* token events in the current response */
  int64_t want;   /* tokens asked in the current request */
  bool started;   /* produced a token since connect */
};

struct samples {
  double *v;
  size_t n, cap;
};

static int64_t
mono_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void
push(struct samples *s, double x)
{
  if (s->n == s->cap) {
    s->cap = s->cap ? s->cap * 2 : 65536;
    s->v = realloc(s->v, s->cap * sizeof(double));
    if (s->v == NULL) {
      perror("realloc");
      exit(1);
    }
  }
  s->v[s->n++] = x;
}

static int
cmp_d(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double
pct(struct samples *s, double p)
{
  if (s->n == 0)
    return 0;
  qsort(s->v, s->n, sizeof(double), cmp_d);
  size_t i = (size_t)(p * (double)(s->n - 1));
  return s->v[i];
}

/* CPU seconds of process pid (all its threads), or with thread_only of its
 * main thread alone (the simulator's loop). */
static double
cpu_of_pid(int pid, bool thread_only)
{
  if (pid <= 0)
    return 0;
  char path[64], buf[2048];
  if (thread_only)
    snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", pid, pid);
  else
    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
  FILE *f = fopen(path, "r");
  if (f == NULL)
    return 0;
  size_t n = fread(buf, 1, sizeof(buf) - 1, f);
  fclose(f);
  buf[n] = '\0';
  char *p = strrchr(buf, ')');
  if (p == NULL)
    return 0;
  /* fields after ")": state(3) ... utime(14) stime(15), one space apart */
  char *q = p + 1; /* the space before field 3 */
  for (int i = 3; i < 14 && q != NULL; i++)
    q = strchr(q + 1, ' ');
  if (q == NULL)
    return 0;
  char *e1, *e2;
  unsigned long ut = strtoul(q + 1, &e1, 10), st = strtoul(e1, &e2, 10);
  if (e1 == q + 1 || e2 == e1)
    return 0;
  return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static double
cpu_self(void)
{
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
         ru.ru_stime.tv_usec / 1e6;
}

/* The prompt's text (without quotes) and the request's other members. */
static char *prompt_text = "load test";

/* A request asking max_tokens tokens (caller frees), its length in *len. */
static char *
make_request(long max_tokens, bool stream, size_t *len)
{
  size_t cap = strlen(prompt_text) + 512;
  char *body = malloc(cap), *req = malloc(cap + 256);
  if (body == NULL || req == NULL) {
    fprintf(stderr, "sim_load: out of memory\n");
    exit(1);
  }
  int bl = snprintf(body, cap,
                    "{\"model\":\"bench\",\"prompt\":\"%s\",\"max_tokens\":%ld,"
                    "\"stream\":%s,\"ignore_eos\":true}",
                    prompt_text, max_tokens, stream ? "true" : "false");
  *len = (size_t)snprintf(req, cap + 256,
                          "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                          "Content-Type: application/json\r\nContent-Length: %d\r\n%s\r\n%s",
                          bl, stream ? "" : "Connection: close\r\n", body);
  free(body);
  return req;
}

static char *request;
static size_t request_len;
static long request_tokens;

static bool
send_all(int fd, const char *p, size_t n)
{
  while (n > 0) {
    ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return false;
    p += w;
    n -= (size_t)w;
  }
  return true;
}

/* The usual request, or one asking `want` tokens (the staggered first). */
static bool
send_request(struct stream *s, long want)
{
  s->tokens = 0;
  s->prev_stamp = 0;
  s->prev_arr = 0;
  s->want = want > 0 ? want : request_tokens;
  if (want <= 0 || want == request_tokens)
    return send_all(s->fd, request, request_len);
  size_t n;
  char *r = make_request(want, true, &n);
  bool ok = send_all(s->fd, r, n);
  free(r);
  return ok;
}

/* The prompt once, max_tokens 1, not streamed, to the end of the answer:
 * the streams then find it in the simulator's prefix cache. */
static bool
warm_prompt(const struct sockaddr_in *a)
{
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0 || connect(fd, (const struct sockaddr *)a, sizeof(*a)) < 0) {
    if (fd >= 0)
      close(fd);
    return false;
  }
  size_t n;
  char *r = make_request(1, false, &n);
  bool ok = send_all(fd, r, n);
  free(r);
  char buf[4096];
  ssize_t got = 0, k;
  char head[13] = { 0 };
  while (ok && (k = recv(fd, buf, sizeof(buf), 0)) > 0) {
    if (got < 12)
      memcpy(head + got, buf, (size_t)(k < 12 - got ? k : 12 - got));
    got += k;
  }
  close(fd);
  return ok && strncmp(head, "HTTP/1.1 200", 12) == 0;
}

/* The run: its options, streams, window and figures. */
struct load {
  int port, nstreams, sim_pid;
  double step_ms, seconds, warmup;
  long max_tokens, prompt_tokens;
  int ep;
  struct stream *ss;
  int64_t t_start, win_start, win_end, step_ns;
  int started; /* streams that produced a token */
  uint64_t win_tokens, lost, completed, errors;
  double sim_cpu0, self_cpu0, sim_cpu1, self_cpu1, loop_cpu0, loop_cpu1;
  struct samples gap_err, arr_err, delay;
  FILE *dump; /* SIM_LOAD_DUMP, or NULL */
};

/* The command line into l: -1 to go on, else the exit status (after the
 * message). */
static int
parse_args(struct load *l, int argc, char **argv)
{
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--port") == 0)
      l->port = (int)strtol(argv[i + 1], NULL, 10);
    else if (strcmp(argv[i], "--streams") == 0)
      l->nstreams = (int)strtol(argv[i + 1], NULL, 10);
    else if (strcmp(argv[i], "--step-ms") == 0)
      l->step_ms = strtod(argv[i + 1], NULL);
    else if (strcmp(argv[i], "--seconds") == 0)
      l->seconds = strtod(argv[i + 1], NULL);
    else if (strcmp(argv[i], "--warmup") == 0)
      l->warmup = strtod(argv[i + 1], NULL);
    else if (strcmp(argv[i], "--max-tokens") == 0)
      l->max_tokens = strtol(argv[i + 1], NULL, 10);
    else if (strcmp(argv[i], "--sim-pid") == 0)
      l->sim_pid = (int)strtol(argv[i + 1], NULL, 10);
    else if (strcmp(argv[i], "--prompt-tokens") == 0)
      l->prompt_tokens = strtol(argv[i + 1], NULL, 10);
    else {
      fprintf(stderr, "sim_load: unknown option %s\n", argv[i]);
      return 2;
    }
  }
  if (l->port <= 0 || l->nstreams <= 0 || l->step_ms <= 0) {
    fprintf(stderr, "usage: sim_load --port P --streams N --step-ms X [--seconds S] "
                    "[--max-tokens M] [--sim-pid PID] [--warmup S] [--prompt-tokens T]\n");
    return 2;
  }
  return -1;
}

/* prompt_text of prompt_tokens tokens; false when out of memory. */
static bool
make_prompt(long prompt_tokens)
{
  /* completions: BOS + one token per word of at most 4 bytes */
  size_t words = (size_t)(prompt_tokens - 1);
  prompt_text = malloc(words * 4 + 1);
  if (prompt_text == NULL)
    return false;
  for (size_t w = 0; w < words; w++)
    memcpy(prompt_text + w * 4, w == 0 ? "load" : w % 2 ? " tes" : " tok", 4);
  prompt_text[words * 4] = '\0';
  return true;
}

/* Connects the streams to a and sends their first requests; false after
 * the message. */
static bool
open_streams(struct load *l, const struct sockaddr_in *a)
{
  for (int i = 0; i < l->nstreams; i++) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, (const struct sockaddr *)a, sizeof(*a)) < 0) {
      perror("sim_load: connect");
      return false;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    l->ss[i].fd = fd;
    long first = l->max_tokens * (i + 1) / l->nstreams; /* staggered, with a prompt */
    if (!send_request(&l->ss[i], l->prompt_tokens > 1 ? (first > 0 ? first : 1) : 0)) {
      perror("sim_load: send");
      return false;
    }
    struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &l->ss[i] };
    epoll_ctl(l->ep, EPOLL_CTL_ADD, fd, &ev);
  }
  return true;
}

/* Opens the window once every stream started and the warm-up is over, and
 * closes it at its end: 1 when it ended, -1 (after the message) when the
 * streams did not start in time, else 0. */
static int
window(struct load *l, int64_t now)
{
  if (l->win_start == 0 && l->started == l->nstreams &&
      now - l->t_start > (int64_t)(l->warmup * 1e9)) {
    l->win_start = now;
    l->win_end = now + (int64_t)(l->seconds * 1e9);
    l->sim_cpu0 = cpu_of_pid(l->sim_pid, false);
    l->loop_cpu0 = cpu_of_pid(l->sim_pid, true);
    l->self_cpu0 = cpu_self();
  }
  if (l->win_end && now >= l->win_end) {
    l->sim_cpu1 = cpu_of_pid(l->sim_pid, false);
    l->loop_cpu1 = cpu_of_pid(l->sim_pid, true);
    l->self_cpu1 = cpu_self();
    return 1;
  }
  if (now - l->t_start > (int64_t)((l->warmup + l->seconds + 60) * 1e9)) {
    fprintf(stderr, "sim_load: only %d of %d streams started\n", l->started, l->nstreams);
    return -1;
  }
  return 0;
}

/* A token event of s that arrived at arr (in the window or not). */
static void
on_token(struct load *l, struct stream *s, int64_t arr, bool in_win)
{
  s->tokens++;
  if (!s->started) {
    s->started = true;
    l->started++;
  }
  if (in_win) {
    l->win_tokens++;
    if (s->prev_stamp && s->stamp) {
      push(&l->gap_err, llabs((s->stamp - s->prev_stamp) - l->step_ns) / 1e6);
      push(&l->arr_err, llabs((arr - s->prev_arr) - l->step_ns) / 1e6);
    }
    if (s->stamp)
      push(&l->delay, (double)(arr - s->stamp) / 1e6);
    if (l->dump != NULL)
      fprintf(l->dump, "%d %" PRId64 " %" PRId64 "\n", (int)(s - l->ss), s->stamp, arr);
  }
  s->prev_stamp = s->stamp;
  s->prev_arr = arr;
}

/* The complete line in s->line: a stamp, a token event or the end of the
 * response (the next request sent). */
static void
on_line(struct load *l, struct stream *s, int64_t arr, bool in_win)
{
  s->line[s->ll] = '\0';
  if (s->ll > 0 && s->line[s->ll - 1] == '\r')
    s->line[--s->ll] = '\0';
  if (strncmp(s->line, ": t=", 4) == 0) {
    s->stamp = strtoll(s->line + 4, NULL, 10);
  } else if (strncmp(s->line, "data: ", 6) == 0) {
    if (strcmp(s->line + 6, "[DONE]") == 0) {
      l->completed++;
      if (s->tokens != s->want)
        l->lost += (uint64_t)llabs(s->want - s->tokens);
      if (!send_request(s, 0))
        l->errors++;
    } else {
      on_token(l, s, arr, in_win);
    }
  }
  s->ll = 0;
}

/* Reads what s has; a stream that failed or closed is dropped. */
static void
on_readable(struct load *l, struct stream *s, char *buf, size_t cap)
{
  ssize_t r = recv(s->fd, buf, cap, 0);
  if (r <= 0) {
    if (r < 0 && errno == EINTR)
      return;
    l->errors++;
    epoll_ctl(l->ep, EPOLL_CTL_DEL, s->fd, NULL);
    close(s->fd);
    return;
  }
  int64_t arr = mono_ns();
  bool in_win = l->win_start && arr >= l->win_start && arr < l->win_end;
  for (ssize_t i = 0; i < r; i++) {
    char ch = buf[i];
    if (ch != '\n') {
      if (s->ll < LINE_CAP - 1)
        s->line[s->ll++] = ch;
      continue;
    }
    on_line(l, s, arr, in_win);
  }
}

/* The event loop until the window's end: false when the streams did not
 * start in time. */
static bool
run_loop(struct load *l)
{
  struct epoll_event evs[512];
  char buf[65536];
  for (;;) {
    int w = window(l, mono_ns());
    if (w != 0)
      return w > 0;
    int n = epoll_wait(l->ep, evs, 512, 100);
    for (int e = 0; e < n; e++)
      on_readable(l, evs[e].data.ptr, buf, sizeof(buf));
  }
}

/* Prints the figures, one "key value" line each. */
static void
report(struct load *l)
{
  double win_s = (double)(l->win_end - l->win_start) / 1e9;
  double tps = (double)l->win_tokens / win_s;
  printf("streams %d\n", l->nstreams);
  printf("step_ms %.3f\n", l->step_ms);
  printf("window_s %.2f\n", win_s);
  printf("tokens %" PRIu64 "\n", l->win_tokens);
  printf("tokens_per_s %.0f\n", tps);
  printf("expected_tokens_per_s %.0f\n", l->nstreams * 1000.0 / l->step_ms);
  printf("completed_streams %" PRIu64 "\n", l->completed);
  printf("lost_tokens %" PRIu64 "\n", l->lost);
  printf("errors %" PRIu64 "\n", l->errors);
  printf("gap_err_stamp_ms_p50 %.4f\n", pct(&l->gap_err, 0.50));
  printf("gap_err_stamp_ms_p99 %.4f\n", pct(&l->gap_err, 0.99));
  printf("gap_err_arrival_ms_p50 %.4f\n", pct(&l->arr_err, 0.50));
  printf("gap_err_arrival_ms_p99 %.4f\n", pct(&l->arr_err, 0.99));
  printf("delivery_delay_ms_p50 %.4f\n", pct(&l->delay, 0.50));
  printf("delivery_delay_ms_p99 %.4f\n", pct(&l->delay, 0.99));
  if (l->sim_pid > 0 && l->win_tokens > 0)
    printf("sim_cpu_s_per_million_tokens %.3f\n",
           (l->sim_cpu1 - l->sim_cpu0) / ((double)l->win_tokens / 1e6));
  if (l->win_tokens > 0)
    printf("client_cpu_s_per_million_tokens %.3f\n",
           (l->self_cpu1 - l->self_cpu0) / ((double)l->win_tokens / 1e6));
  if (l->sim_pid > 0)
    printf("sim_cpu_share %.3f\n", (l->sim_cpu1 - l->sim_cpu0) / win_s);
  /* the simulator's loop thread alone: its other threads' work does not
   * hold up its steps */
  if (l->sim_pid > 0)
    printf("sim_loop_cpu_share %.3f\n", (l->loop_cpu1 - l->loop_cpu0) / win_s);
}

int
main(int argc, char **argv)
{
  struct load l = { .nstreams = 128, .seconds = 10, .warmup = 2, .max_tokens = 1000 };
  int rc = parse_args(&l, argc, argv);
  if (rc >= 0)
    return rc;
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
  if (l.prompt_tokens > 1 && !make_prompt(l.prompt_tokens)) {
    fprintf(stderr, "sim_load: out of memory\n");
    return 1;
  }
  request_tokens = l.max_tokens;
  request = make_request(l.max_tokens, true, &request_len);
  l.ep = epoll_create1(0);
  l.ss = calloc((size_t)l.nstreams, sizeof(*l.ss));
  struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)l.port) };
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  if (l.prompt_tokens > 1 && !warm_prompt(&a)) {
    fprintf(stderr, "sim_load: the prompt's warm-up request failed\n");
    return 1;
  }
  if (!open_streams(&l, &a))
    return 1;
  l.t_start = mono_ns();
  l.step_ns = (int64_t)(l.step_ms * 1e6);
  /* SIM_LOAD_DUMP=file: one line per token in the window, "stream stamp
   * arrival" (ns), to look into where gap errors come from. */
  l.dump = getenv("SIM_LOAD_DUMP") ? fopen(getenv("SIM_LOAD_DUMP"), "w") : NULL;
  if (!run_loop(&l))
    return 1;
  if (l.dump != NULL)
    fclose(l.dump);
  report(&l);
  return l.errors == 0 && l.lost == 0 ? 0 : 3;
}
