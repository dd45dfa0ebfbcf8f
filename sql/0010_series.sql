-- Series (issue 14): one point per finished job, cell and metric, kept as
-- jobs finish (lib/db/tb_regress through lib/db/tb_history), so that a job is
-- judged against its history and GET /v1/series can draw it.  A series is
-- (project, endpoint, labels, phase, context, concurrency, metric); a
-- preset's jobs carry the preset's labels.  value is the cell's figure
-- (tokens/s or ms), se its standard error within the run and ci_lo/ci_hi
-- its 95% confidence interval when the engine measured them (else NULL).
CREATE TABLE series_points (
  job_id      uuid NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
  project_id  uuid NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
  endpoint_id uuid NOT NULL REFERENCES endpoints(id),
  labels      jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(labels) = 'object'),
  phase       text NOT NULL CHECK (phase IN ('prefill', 'decode')),
  context     bigint NOT NULL CHECK (context > 0),
  concurrency integer NOT NULL CHECK (concurrency > 0),
  metric      text NOT NULL,
  at          timestamptz NOT NULL,
  value       double precision NOT NULL,
  se          double precision,
  ci_lo       double precision,
  ci_hi       double precision,
  PRIMARY KEY (job_id, phase, context, concurrency, metric)
);
CREATE INDEX series_points_series
  ON series_points (project_id, endpoint_id, labels, phase, context, concurrency, metric, at);
