-- GET /v1/jobs with a state filter (issue 36, item 3: "the filtered job
-- list").  An endpoint's or a project's jobs were walked newest first by
-- jobs_endpoint_created / jobs_project_created, each row checked for the
-- state: a rare state (failed, among a year of nightly runs) read thousands
-- of rows for a page of 50.  These serve state = $2 with the page's order
-- and keyset, so a page reads what it returns (q_jobs.c writes a statement
-- per set of filters, so that each plan can use them).  A label filter
-- stays a check on the rows these give: jsonb containment has no order.
CREATE INDEX jobs_project_state_created ON jobs (project_id, state, created_at DESC, id DESC);
CREATE INDEX jobs_endpoint_state_created ON jobs (endpoint_id, state, created_at DESC, id DESC);
-- An endpoint belongs to one project: without that fact the planner takes
-- project_id = $1 AND endpoint_id = $3 for 1/20 of the endpoint's jobs,
-- and reads and sorts every one of them (a bitmap of both indexes) rather
-- than walking jobs_endpoint_created newest first for a page.
CREATE STATISTICS jobs_endpoint_project (dependencies) ON endpoint_id, project_id FROM jobs;
