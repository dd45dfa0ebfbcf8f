-- Regression thresholds (issue 6): per project and label set, the tolerated
-- loss when a finished job is compared with the last good job of the same
-- endpoint and labels (lib/db/tb_regress.c).  labels {} matches every job; a job
-- takes the most specific threshold whose labels it carries (labels <@ the
-- job's labels, most keys first); none: 5%.
CREATE TABLE thresholds (
  id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  project_id  uuid NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
  labels      jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(labels) = 'object'),
  tolerance   double precision NOT NULL CHECK (tolerance >= 0 AND tolerance < 1),
  created_at  timestamptz NOT NULL DEFAULT now(),
  updated_at  timestamptz NOT NULL DEFAULT now(),
  UNIQUE (project_id, labels)
);

-- The regression check looks for the last good job of an endpoint.
CREATE INDEX jobs_endpoint_finished ON jobs (endpoint_id, finished_at DESC)
  WHERE state = 'succeeded';
