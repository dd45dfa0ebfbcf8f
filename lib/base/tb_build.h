/*
 * tb_build: what this binary was built from (issue 35, item 3), baked in at
 * build time: the Makefile writes $(BUILD)/gen/base/tb_buildinfo.h with
 * scripts/buildinfo.sh (the git commit and whether the tree had local
 * changes, or "unknown" outside a git work tree of its own; each linked
 * library's version from pkg-config), and the compiler names itself
 * (__VERSION__).  A result's provenance carries it (lib/result/tb_provenance).
 */
#ifndef TB_BUILD_H
#define TB_BUILD_H

#include <jansson.h>

/*
 * {"version": TB_VERSION, "git_commit": hex or "unknown", "git_dirty":
 * bool or "unknown", "compiler": "gcc 12.2.0", "libraries": {"openssl":
 * "3.0.19", ...}}: each library the binaries link (the Makefile's PKGS),
 * "unknown" where pkg-config knew none.  New object.
 */
json_t *tb_build_json(void);

#endif
