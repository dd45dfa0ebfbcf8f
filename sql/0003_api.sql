-- The REST API (issue 5).
-- A deleted endpoint (soft delete) gives its name back: names are unique per
-- project among the endpoints not deleted.
ALTER TABLE endpoints DROP CONSTRAINT endpoints_project_id_name_key;
CREATE UNIQUE INDEX endpoints_project_name_live ON endpoints (project_id, name)
  WHERE deleted_at IS NULL;
-- GET /v1/jobs?endpoint_id=... pages through one endpoint's jobs.
CREATE INDEX jobs_endpoint_created ON jobs (endpoint_id, created_at DESC, id DESC);
