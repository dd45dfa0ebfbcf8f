-- Production traces uploaded to the service (issue 25, part 4; docs/traces.md):
-- POST /v1/traces stores one for the caller's project once lib/spec/tb_trace
-- has read it whole, and a job names it by its id (the spec's trace.id); the
-- worker loads the bytes and hands the engine what tb_trace_parse reads of
-- them, as `tokbench run --trace FILE` does.  The bytes are kept as they
-- were sent (gzip or not); summary is tb_trace_summary_json's document.
-- service/q_traces.c holds the api's statements, lib/db/tb_tracestore.c
-- the worker's.
CREATE TABLE traces (
  id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  project_id  uuid NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
  name        text NOT NULL CHECK (length(name) BETWEEN 1 AND 100),
  format      text NOT NULL
              CHECK (format IN ('mooncake', 'azure', 'burstgpt', 'bailian', 'weka')),
  data        bytea NOT NULL,
  sha256      text NOT NULL CHECK (sha256 ~ '^[0-9a-f]{64}$'),
  size_bytes  bigint NOT NULL CHECK (size_bytes = length(data)),
  gzip        boolean NOT NULL,
  summary     jsonb NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX traces_project ON traces (project_id, created_at DESC, id DESC);
