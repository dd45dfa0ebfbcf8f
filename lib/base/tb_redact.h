/*
 * tb_redact: the one redactor of launch commands.  Every path that stores or
 * shows a launch command goes through it: the api when an endpoint is saved,
 * the engine when it writes a result header, tb_import for outside results,
 * and tb_report / tb_compare before they render any document (so an old
 * result file written before redaction existed is shown redacted too).
 *
 * What counts as a secret:
 *   - the value of a flag whose name, split into words at '-' and '_', has a
 *     word key, apikey, token, secret, password, passwd or credential(s)
 *     (--api-key, --api_key, --apikey, --hf-token, --auth-token,
 *     --secret-key, --password), written `--flag value` or `--flag=value`;
 *     --max-num-batched-tokens, --tokenizer or --api-keys-file are settings
 *     or paths a report must show, and are kept;
 *   - the value of an environment assignment NAME=value whose NAME contains
 *     KEY, TOKEN, SECRET or PASSWORD in any case (HF_TOKEN=, OPENAI_API_KEY=),
 *     also behind a flag (`-e HF_TOKEN=x`, `--env=HF_TOKEN=x`);
 *   - a value quoted with ' or " counts as one word, spaces and all.
 * The value becomes <redacted>; everything else is kept byte for byte.
 * Redacting twice changes nothing.
 */
#ifndef TB_REDACT_H
#define TB_REDACT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#define TB_REDACT_MARK "<redacted>"

/* cmd with every secret value replaced by TB_REDACT_MARK.  New string
 * (caller frees); NULL when cmd is NULL. */
char *tb_redact_command(const char *cmd);

/* True when [name, name+n) is a flag (leading dashes) naming a secret. */
bool tb_redact_secret_flag(const char *name, size_t n);

/* True when [name, name+n) is an environment name holding a secret. */
bool tb_redact_secret_env(const char *name, size_t n);

/*
 * A result (or comparison side) document safe to show: when doc (borrowed)
 * has a string launch_command holding a secret, a shallow copy with it
 * redacted, else doc itself with one more reference.  Always a new
 * reference (caller decrefs); NULL when doc is NULL.
 */
json_t *tb_redact_document(const json_t *doc);

#endif
