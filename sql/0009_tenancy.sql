-- Issue 13: one service for many projects (findings 4, 5, 6 and 9c).

-- Exclusive groups are the project's own: a job's busy_key is the endpoint
-- id, 'group:<project id>:<name>' for a group of the project, or
-- 'shared:<name>' for a group the operator lists in TOKBENCH_SHARED_GROUPS
-- (lib/db/tb_tenancy.h).  Jobs queued or running from before this migration
-- named a group by its bare name: they become their project's group.
UPDATE jobs SET busy_key = 'group:' || project_id::text || ':' || busy_key
 WHERE state IN ('queued', 'running')
   AND busy_key <> endpoint_id::text AND busy_key NOT LIKE 'import:%';

-- Fair share (lib/db/tb_queue.c's claim): a running job holds one of its
-- project's run slots 1..TOKBENCH_LIMIT_RUNNING; the partial unique index
-- makes "at most that many running jobs per project" a database fact, as
-- jobs_one_running_per_busy_key does for busy keys.  NULL: a job claimed
-- before this migration.  It also serves the claim's count of a project's
-- running jobs.
ALTER TABLE jobs ADD COLUMN run_slot integer CHECK (run_slot IS NULL OR run_slot >= 1);
CREATE UNIQUE INDEX jobs_project_run_slot ON jobs (project_id, run_slot) WHERE state = 'running';
-- A project's queued jobs in the claim's order (and the api's count of
-- them, TOKBENCH_LIMIT_QUEUED).
CREATE INDEX jobs_project_queue ON jobs (project_id, priority DESC, created_at, id)
  WHERE state = 'queued';
-- The claim's "least recently served project": max(started_at) per project.
CREATE INDEX jobs_project_started ON jobs (project_id, started_at);

-- Replays of hook deliveries (api_hooks.c): besides its delivery id, a
-- delivery is recorded with a digest, unique per hook while the row is
-- kept: for GitHub the SHA-256 of the payload (a signed payload sent again
-- under a new X-GitHub-Delivery is the same delivery), for the generic form
-- the SHA-256 of its signature (one signed request, whatever its unsigned
-- headers say).  Rows older than TOKBENCH_REPLAY_RETENTION_S are pruned
-- (tb_tenancy_prune), as are Idempotency-Keys.
ALTER TABLE hook_deliveries_in ADD COLUMN digest text CHECK (digest IS NULL OR length(digest) = 64);
CREATE UNIQUE INDEX hook_deliveries_in_digest ON hook_deliveries_in (hook_id, digest)
  WHERE digest IS NOT NULL;
CREATE INDEX idempotency_keys_created ON idempotency_keys (created_at);

-- A key made through the api records the key that made it.  A child never
-- expires after its parent and never holds a scope its parent lacks (the
-- api checks both when it is made); revoking a key revokes its descendants.
-- NULL: made by `tokbench keys` (the operator), or before this migration.
ALTER TABLE api_keys ADD COLUMN parent_id uuid REFERENCES api_keys(id) ON DELETE CASCADE;
CREATE INDEX api_keys_parent ON api_keys (parent_id) WHERE parent_id IS NOT NULL;
