/*
 * tb_build: see tb_build.h.  The generated header is the only input; this
 * file is recompiled when it changes (the Makefile's rule on it), which
 * scripts/buildinfo.sh makes happen only at a new commit or a change of
 * the tree's state.
 */
#include "base/tb_build.h"

#include <string.h>

#include "base/tb_buildinfo.h" /* generated: $(BUILD)/gen/base/ */

#if defined(__clang__)
#define COMPILER "clang " __clang_version__
#elif defined(__GNUC__)
#define COMPILER "gcc " __VERSION__
#else
#define COMPILER "unknown"
#endif

static const struct {
  const char *pkg, *version;
} libraries[] = { TB_BUILD_LIBRARIES };

json_t *
tb_build_json(void)
{
  json_t *libs = json_object();
  for (size_t i = 0; i < sizeof libraries / sizeof libraries[0]; i++)
    json_object_set_new(libs, libraries[i].pkg, json_string(libraries[i].version));
  return json_pack("{s:s, s:s, s:o, s:s, s:o}", "version", TB_VERSION, "git_commit",
                   TB_BUILD_GIT_COMMIT, "git_dirty",
                   TB_BUILD_GIT_DIRTY < 0 ? json_string("unknown")
                                          : json_boolean(TB_BUILD_GIT_DIRTY > 0),
                   "compiler", COMPILER, "libraries", libs);
}
