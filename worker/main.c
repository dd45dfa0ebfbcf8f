/* tokbench-worker: placeholder main, replaced by the queue worker (issue 5). */
#include <stdio.h>
#include <string.h>

int
main(int argc, char **argv)
{
  if (argc > 1 && strcmp(argv[1], "--version") == 0) {
    printf("tokbench-worker %s\n", TB_VERSION);
    return 0;
  }
  fprintf(stderr, "tokbench-worker: not built yet\n");
  return 1;
}
