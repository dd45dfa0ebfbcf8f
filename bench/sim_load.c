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

int
main(int argc, char **argv)
{
  int port = 0, nstreams = 128, sim_pid = 0;
  double step_ms = 0, seconds = 10, warmup = 2;
  long max_tokens = 1000, prompt_tokens = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--port") == 0)
      port = (int)strtol(argv[i + 1], NULL, 10);
    else if (strcmp(argv[i], "--streams") == 0)
      nstreams = (int)strtol(argv[i + 1], NULL, 10);
    else if (strcmp(argv[i], "--step-ms") == 0)
      step_ms = strtod(argv[i + 1], NULL);
    else if (strcmp(argv[i], "--seconds") == 0)
      seconds = strtod(argv[i + 1], NULL);
    else if (strcmp(argv[i], "--warmup") == 0)
      warmup = strtod(argv[i + 1], NULL);
    else if (strcmp(argv[i], "--max-tokens") == 0)
      max_tokens = strtol(argv[i + 1], NULL, 10);
    else if (strcmp(argv[i], "--sim-pid") == 0)
      sim_pid = (int)strtol(argv[i + 1], NULL, 10);
    else if (strcmp(argv[i], "--prompt-tokens") == 0)
      prompt_tokens = strtol(argv[i + 1], NULL, 10);
    else {
      fprintf(stderr, "sim_load: unknown option %s\n", argv[i]);
      return 2;
    }
  }
  if (port <= 0 || nstreams <= 0 || step_ms <= 0) {
    fprintf(stderr, "usage: sim_load --port P --streams N --step-ms X [--seconds S] "
                    "[--max-tokens M] [--sim-pid PID] [--warmup S] [--prompt-tokens T]\n");
    return 2;
  }
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
  if (prompt_tokens > 1) {
    /* completions: BOS + one token per word of at most 4 bytes */
    size_t words = (size_t)(prompt_tokens - 1);
    prompt_text = malloc(words * 4 + 1);
    if (prompt_text == NULL) {
      fprintf(stderr, "sim_load: out of memory\n");
      return 1;
    }
    for (size_t w = 0; w < words; w++)
      memcpy(prompt_text + w * 4, w == 0 ? "load" : w % 2 ? " tes" : " tok", 4);
    prompt_text[words * 4] = '\0';
  }
  request_tokens = max_tokens;
  request = make_request(max_tokens, true, &request_len);
  int ep = epoll_create1(0);
  struct stream *ss = calloc((size_t)nstreams, sizeof(*ss));
  struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  if (prompt_tokens > 1 && !warm_prompt(&a)) {
    fprintf(stderr, "sim_load: the prompt's warm-up request failed\n");
    return 1;
  }
  for (int i = 0; i < nstreams; i++) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
      perror("sim_load: connect");
      return 1;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    ss[i].fd = fd;
    long first = max_tokens * (i + 1) / nstreams; /* staggered, with a prompt */
    if (!send_request(&ss[i], prompt_tokens > 1 ? (first > 0 ? first : 1) : 0)) {
      perror("sim_load: send");
      return 1;
    }
    struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &ss[i] };
    epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
  }

  int64_t t_start = mono_ns();
  int64_t win_start = 0, win_end = 0;
  int started = 0;
  uint64_t win_tokens = 0, lost = 0, completed = 0, errors = 0;
  double sim_cpu0 = 0, self_cpu0 = 0, sim_cpu1 = 0, self_cpu1 = 0, loop_cpu0 = 0, loop_cpu1 = 0;
  struct samples gap_err = { 0 }, arr_err = { 0 }, delay = { 0 };
  int64_t step_ns = (int64_t)(step_ms * 1e6);
  struct epoll_event evs[512];
  char buf[65536];
  /* SIM_LOAD_DUMP=file: one line per token in the window, "stream stamp
   * arrival" (ns), to look into where gap errors come from. */
  FILE *dump = getenv("SIM_LOAD_DUMP") ? fopen(getenv("SIM_LOAD_DUMP"), "w") : NULL;
  for (;;) {
    int64_t now = mono_ns();
    if (win_start == 0 && started == nstreams && now - t_start > (int64_t)(warmup * 1e9)) {
      win_start = now;
      win_end = now + (int64_t)(seconds * 1e9);
      sim_cpu0 = cpu_of_pid(sim_pid, false);
      loop_cpu0 = cpu_of_pid(sim_pid, true);
      self_cpu0 = cpu_self();
    }
    if (win_end && now >= win_end) {
      sim_cpu1 = cpu_of_pid(sim_pid, false);
      loop_cpu1 = cpu_of_pid(sim_pid, true);
      self_cpu1 = cpu_self();
      break;
    }
    if (now - t_start > (int64_t)((warmup + seconds + 60) * 1e9)) {
      fprintf(stderr, "sim_load: only %d of %d streams started\n", started, nstreams);
      return 1;
    }
    int n = epoll_wait(ep, evs, 512, 100);
    for (int e = 0; e < n; e++) {
      struct stream *s = evs[e].data.ptr;
      ssize_t r = recv(s->fd, buf, sizeof(buf), 0);
      if (r <= 0) {
        if (r < 0 && errno == EINTR)
          continue;
        errors++;
        epoll_ctl(ep, EPOLL_CTL_DEL, s->fd, NULL);
        close(s->fd);
        continue;
      }
      int64_t arr = mono_ns();
      bool in_win = win_start && arr >= win_start && arr < win_end;
      for (ssize_t i = 0; i < r; i++) {
        char ch = buf[i];
        if (ch != '\n') {
          if (s->ll < LINE_CAP - 1)
            s->line[s->ll++] = ch;
          continue;
        }
        s->line[s->ll] = '\0';
        if (s->ll > 0 && s->line[s->ll - 1] == '\r')
          s->line[--s->ll] = '\0';
        if (strncmp(s->line, ": t=", 4) == 0) {
          s->stamp = strtoll(s->line + 4, NULL, 10);
        } else if (strncmp(s->line, "data: ", 6) == 0) {
          if (strcmp(s->line + 6, "[DONE]") == 0) {
            completed++;
            if (s->tokens != s->want)
              lost += (uint64_t)llabs(s->want - s->tokens);
            if (!send_request(s, 0))
              errors++;
          } else {
            s->tokens++;
            if (!s->started) {
              s->started = true;
              started++;
            }
            if (in_win) {
              win_tokens++;
              if (s->prev_stamp && s->stamp) {
                push(&gap_err, llabs((s->stamp - s->prev_stamp) - step_ns) / 1e6);
                push(&arr_err, llabs((arr - s->prev_arr) - step_ns) / 1e6);
              }
              if (s->stamp)
                push(&delay, (double)(arr - s->stamp) / 1e6);
              if (dump != NULL)
                fprintf(dump, "%d %" PRId64 " %" PRId64 "\n", (int)(s - ss), s->stamp, arr);
            }
            s->prev_stamp = s->stamp;
            s->prev_arr = arr;
          }
        }
        s->ll = 0;
      }
    }
  }
  if (dump != NULL)
    fclose(dump);
  double win_s = (double)(win_end - win_start) / 1e9;
  double tps = (double)win_tokens / win_s;
  printf("streams %d\n", nstreams);
  printf("step_ms %.3f\n", step_ms);
  printf("window_s %.2f\n", win_s);
  printf("tokens %" PRIu64 "\n", win_tokens);
  printf("tokens_per_s %.0f\n", tps);
  printf("expected_tokens_per_s %.0f\n", nstreams * 1000.0 / step_ms);
  printf("completed_streams %" PRIu64 "\n", completed);
  printf("lost_tokens %" PRIu64 "\n", lost);
  printf("errors %" PRIu64 "\n", errors);
  printf("gap_err_stamp_ms_p50 %.4f\n", pct(&gap_err, 0.50));
  printf("gap_err_stamp_ms_p99 %.4f\n", pct(&gap_err, 0.99));
  printf("gap_err_arrival_ms_p50 %.4f\n", pct(&arr_err, 0.50));
  printf("gap_err_arrival_ms_p99 %.4f\n", pct(&arr_err, 0.99));
  printf("delivery_delay_ms_p50 %.4f\n", pct(&delay, 0.50));
  printf("delivery_delay_ms_p99 %.4f\n", pct(&delay, 0.99));
  if (sim_pid > 0 && win_tokens > 0)
    printf("sim_cpu_s_per_million_tokens %.3f\n",
           (sim_cpu1 - sim_cpu0) / ((double)win_tokens / 1e6));
  if (win_tokens > 0)
    printf("client_cpu_s_per_million_tokens %.3f\n",
           (self_cpu1 - self_cpu0) / ((double)win_tokens / 1e6));
  if (sim_pid > 0)
    printf("sim_cpu_share %.3f\n", (sim_cpu1 - sim_cpu0) / win_s);
  /* the simulator's loop thread alone: its other threads' work does not
   * hold up its steps */
  if (sim_pid > 0)
    printf("sim_loop_cpu_share %.3f\n", (loop_cpu1 - loop_cpu0) / win_s);
  return errors == 0 && lost == 0 ? 0 : 3;
}
