-- Share links (issue 35, item 2; docs/reports.md, "Share links"): read-only
-- access without an API key to one report of a project: a job's
-- (kind 'job', job_id), a comparison's (kind 'compare', base_job_id and
-- job_id the head) or an endpoint's history (kind 'endpoint', endpoint_id,
-- params the series' labels and phase).  GET /s/{token} opens it.  The
-- token is 32 random bytes in base64url, shown once when the share is made
-- and stored only as its SHA-256 (hex), as API keys are.  private_labels:
-- the label keys the shared page never shows.  A revoked share
-- (revoked_at) or an expired one (expires_at in the past) opens nothing.
-- service/q_shares.c holds the statements.
CREATE TABLE shares (
  id              uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  project_id      uuid NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
  kind            text NOT NULL CHECK (kind IN ('job', 'compare', 'endpoint')),
  job_id          uuid REFERENCES jobs(id) ON DELETE CASCADE,
  base_job_id     uuid REFERENCES jobs(id) ON DELETE CASCADE,
  endpoint_id     uuid REFERENCES endpoints(id) ON DELETE CASCADE,
  params          jsonb NOT NULL DEFAULT '{}',
  private_labels  text[] NOT NULL DEFAULT '{}',
  token_hash      text NOT NULL UNIQUE CHECK (token_hash ~ '^[0-9a-f]{64}$'),
  created_by      uuid REFERENCES api_keys(id) ON DELETE SET NULL,
  created_at      timestamptz NOT NULL DEFAULT now(),
  expires_at      timestamptz,
  revoked_at      timestamptz,
  CHECK (CASE kind
           WHEN 'job' THEN job_id IS NOT NULL AND base_job_id IS NULL AND endpoint_id IS NULL
           WHEN 'compare' THEN job_id IS NOT NULL AND base_job_id IS NOT NULL
                               AND endpoint_id IS NULL
           ELSE endpoint_id IS NOT NULL AND job_id IS NULL AND base_job_id IS NULL
         END)
);
CREATE INDEX shares_project ON shares (project_id, created_at, id);
