-- GPU endpoints, benchmark jobs, their cells and events.

-- A registered OpenAI-compatible server.  Its API key is sealed with
-- AES-256-GCM under the master key (tb_crypto_seal, associated data = the
-- endpoint id) and never returned.  launch_command is stored redacted.
CREATE TABLE endpoints (
  id              uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  project_id      uuid NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
  name            text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
  base_url        text NOT NULL,
  api_key_sealed  text,
  engine_hint     text,
  hardware        jsonb NOT NULL DEFAULT '{}',
  engine          jsonb NOT NULL DEFAULT '{}',
  launch_command  text,
  exclusive_group text,
  created_at      timestamptz NOT NULL DEFAULT now(),
  updated_at      timestamptz NOT NULL DEFAULT now(),
  deleted_at      timestamptz,
  UNIQUE (project_id, name)
);
CREATE INDEX endpoints_project ON endpoints (project_id) WHERE deleted_at IS NULL;

-- A benchmark job.  state: queued -> running -> succeeded | failed | cancelled.
-- A running job has a lease (worker id + expiry) renewed by heartbeat; every
-- write of a worker is conditional on holding the lease.  busy_key is the
-- endpoint id, or the exclusive group when one is named: one running job per
-- busy_key (the partial unique index makes that a database fact).
CREATE TABLE jobs (
  id              uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  project_id      uuid NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
  endpoint_id     uuid NOT NULL REFERENCES endpoints(id),
  spec            jsonb NOT NULL,
  labels          jsonb NOT NULL DEFAULT '{}',
  priority        integer NOT NULL DEFAULT 0,
  busy_key        text NOT NULL,
  state           text NOT NULL DEFAULT 'queued'
                  CHECK (state IN ('queued','running','succeeded','failed','cancelled')),
  cancel_requested boolean NOT NULL DEFAULT false,
  attempts        integer NOT NULL DEFAULT 0,
  max_attempts    integer NOT NULL DEFAULT 3,
  lease_owner     text,
  lease_expires_at timestamptz,
  cells_total     integer,
  cells_done      integer NOT NULL DEFAULT 0,
  current_cell    jsonb,
  eta_s           double precision,
  header          jsonb,
  result          jsonb,
  error           text,
  created_at      timestamptz NOT NULL DEFAULT now(),
  started_at      timestamptz,
  finished_at     timestamptz,
  updated_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX jobs_queue ON jobs (priority DESC, created_at) WHERE state = 'queued';
CREATE INDEX jobs_project_created ON jobs (project_id, created_at DESC, id DESC);
CREATE INDEX jobs_lease ON jobs (lease_expires_at) WHERE state = 'running';
CREATE UNIQUE INDEX jobs_one_running_per_busy_key ON jobs (busy_key) WHERE state = 'running';
CREATE INDEX jobs_labels ON jobs USING gin (labels);

-- Each measured cell, stored the moment it is measured.  The primary key
-- makes "stored twice" impossible.
CREATE TABLE job_cells (
  job_id      uuid NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
  phase       text NOT NULL CHECK (phase IN ('prefill','decode')),
  context     integer NOT NULL,
  concurrency integer NOT NULL,
  cell        jsonb NOT NULL,
  seq         bigserial,
  created_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (job_id, phase, context, concurrency)
);

-- Progress events for GET /v1/jobs/{id}/events (id = SSE event id).
CREATE TABLE job_events (
  id          bigserial PRIMARY KEY,
  job_id      uuid NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
  kind        text NOT NULL,
  data        jsonb NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX job_events_job ON job_events (job_id, id);

-- Idempotency-Key on POST: the first answer, replayed for the same key.
CREATE TABLE idempotency_keys (
  api_key_id   uuid NOT NULL REFERENCES api_keys(id) ON DELETE CASCADE,
  idem_key     text NOT NULL,
  request_hash text NOT NULL,
  status       integer NOT NULL,
  location     text,
  body         text NOT NULL,
  created_at   timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (api_key_id, idem_key)
);
