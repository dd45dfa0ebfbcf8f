-- The request that created a job: the X-Request-Id of the POST /v1/jobs,
-- POST /v1/presets/{name}/jobs, POST /v1/hooks/{id} or POST /v1/results that
-- made it (the api's request log line carries the same id), so that the
-- worker's log lines about the job can name it and one grep follows a job
-- from the client to the GPU.  NULL for jobs made before this migration and
-- by tools outside the api.  The api accepts at most 64 characters of
-- [A-Za-z0-9._-] (TB_API_REQUEST_ID_MAX) or makes a random one.
ALTER TABLE jobs ADD COLUMN request_id text
  CHECK (request_id IS NULL OR length(request_id) BETWEEN 1 AND 64);
