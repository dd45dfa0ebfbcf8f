/*
 * bench_oai: the chunk scanner's CPU per chunk (lib/net/tb_oai's hot path), for
 * bench_oai.sh.  Scans a fixed mix of the chunks a decode stream carries
 * (vLLM chat chunks with continuous usage, one with a finish, a role chunk,
 * a final usage-only chunk, completions chunks) ITERATIONS times through
 * tb_oai_scan_chunk and prints the CPU nanoseconds per chunk (process CPU
 * clock), after one untimed pass.  Exits 1 if the scanner refuses a chunk
 * (it must decide every one of these).
 * usage: bench_oai [ITERATIONS]   (default 2,000,000 chunks)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "net/tb_oai.h"

static const char *const chunks[] = {
  "{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1738000001,"
  "\"model\":\"meta-llama/Llama-3.1-8B-Instruct\",\"choices\":[{\"index\":0,\"delta\":"
  "{\"role\":\"assistant\",\"content\":\"\"},\"logprobs\":null,\"finish_reason\":null}],"
  "\"usage\":{\"prompt_tokens\":1031,\"total_tokens\":1031,\"completion_tokens\":0}}",
  "{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1738000001,"
  "\"model\":\"meta-llama/Llama-3.1-8B-Instruct\",\"choices\":[{\"index\":0,\"delta\":"
  "{\"content\":\" the\"},\"logprobs\":null,\"finish_reason\":null}],"
  "\"usage\":{\"prompt_tokens\":1031,\"total_tokens\":1032,\"completion_tokens\":1}}",
  "{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1738000001,"
  "\"model\":\"meta-llama/Llama-3.1-8B-Instruct\",\"choices\":[{\"index\":0,\"delta\":"
  "{\"reasoning_content\":\" fast\"},\"logprobs\":null,\"finish_reason\":null}],"
  "\"usage\":{\"prompt_tokens\":1031,\"total_tokens\":1033,\"completion_tokens\":2}}",
  "{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1738000001,"
  "\"model\":\"meta-llama/Llama-3.1-8B-Instruct\",\"choices\":[{\"index\":0,\"delta\":"
  "{\"content\":\" sim\"},\"logprobs\":null,\"finish_reason\":null}],"
  "\"usage\":{\"prompt_tokens\":1031,\"total_tokens\":1034,\"completion_tokens\":3,"
  "\"prompt_tokens_details\":{\"cached_tokens\":1024}}}",
  "{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1738000001,"
  "\"model\":\"meta-llama/Llama-3.1-8B-Instruct\",\"choices\":[{\"index\":0,\"delta\":"
  "{\"content\":\"!\"},\"logprobs\":null,\"finish_reason\":\"length\",\"stop_reason\":null}],"
  "\"usage\":{\"prompt_tokens\":1031,\"total_tokens\":1035,\"completion_tokens\":4}}",
  "{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1738000001,"
  "\"model\":\"meta-llama/Llama-3.1-8B-Instruct\",\"choices\":[],"
  "\"usage\":{\"prompt_tokens\":1031,\"total_tokens\":1035,\"completion_tokens\":4}}",
  "{\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"created\":1738000001,"
  "\"model\":\"bench\",\"choices\":[{\"index\":0,\"text\":\" kv\",\"logprobs\":null,"
  "\"finish_reason\":null,\"stop_reason\":null}],"
  "\"usage\":{\"prompt_tokens\":1025,\"total_tokens\":1026,\"completion_tokens\":1}}",
};

#define N_CHUNKS (sizeof(chunks) / sizeof(chunks[0]))

static double
cpu_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

int
main(int argc, char **argv)
{
  long iters = argc > 1 ? strtol(argv[1], NULL, 10) : 2000000;
  if (iters < (long)N_CHUNKS)
    iters = (long)N_CHUNKS;
  size_t lens[N_CHUNKS];
  for (size_t i = 0; i < N_CHUNKS; i++)
    lens[i] = strlen(chunks[i]);
  struct tb_oai_chunk out;
  volatile size_t sink = 0;
  for (size_t i = 0; i < N_CHUNKS; i++) { /* warm-up, and every chunk decided */
    if (!tb_oai_scan_chunk(chunks[i], lens[i], &out)) {
      fprintf(stderr, "bench_oai: the scanner refused chunk %zu\n", i);
      return 1;
    }
  }
  double t0 = cpu_ns();
  for (long k = 0; k < iters; k++) {
    size_t i = (size_t)k % N_CHUNKS;
    if (tb_oai_scan_chunk(chunks[i], lens[i], &out))
      sink += out.text_bytes;
  }
  double t1 = cpu_ns();
  printf("%.2f\n", (t1 - t0) / (double)iters);
  return sink == 0;
}
