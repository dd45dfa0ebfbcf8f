-- bench/history_seed.sql: a year of history cloned from real jobs
-- (bench/bench_history.sh).  psql variable: jobs (how many to add).
--
-- The templates are the jobs the worker really ran against tokbench-sim
-- (state succeeded, their cells, series points, verdicts and provenance as
-- the service wrote them).  Each clone is one of them, moved to one of the
-- 20 endpoints of the 5 projects, its time spread over the past year
-- (newest last), with labels as teams use them: most runs nightly on main,
-- some on a pull request's branch.  1 in 50 failed, 1 in 100 cancelled
-- (no result, no cells).  Each clone's figures are the template's times a
-- factor of its own (0.95 to 1.05), in its series points and in its cells'
-- decode throughput, so that series are not flat lines.
\set ON_ERROR_STOP on
SET synchronous_commit = off;

CREATE TEMP TABLE tmpl AS
  SELECT id, row_number() OVER (ORDER BY created_at, id) - 1 AS k
  FROM jobs WHERE state = 'succeeded';
CREATE TEMP TABLE eps AS
  SELECT id, project_id, row_number() OVER (ORDER BY project_id, name) - 1 AS k
  FROM endpoints WHERE deleted_at IS NULL AND name LIKE 'hist-%';

CREATE TEMP TABLE clone AS
  SELECT gen_random_uuid() AS id, g, t.id AS tmpl_id, e.id AS endpoint_id,
         e.project_id,
         now() - interval '1 hour' - (:jobs - g) * (interval '365 days' / :jobs) AS at,
         CASE WHEN g % 50 = 7 THEN 'failed' WHEN g % 100 = 13 THEN 'cancelled'
              ELSE 'succeeded' END AS state,
         CASE WHEN g % 5 = 0
              THEN jsonb_build_object('suite', 'pr', 'branch', 'pr-' || (g / 5) % 40,
                                      'engine', CASE WHEN e.k % 2 = 0 THEN 'vllm' ELSE 'sglang' END)
              ELSE jsonb_build_object('suite', 'nightly', 'branch', 'main',
                                      'engine', CASE WHEN e.k % 2 = 0 THEN 'vllm' ELSE 'sglang' END)
         END AS labels,
         0.95 + 0.1 * random() AS f
  FROM generate_series(1, :jobs) g
  JOIN eps e ON e.k = g % (SELECT count(*) FROM eps)
  JOIN tmpl t ON t.k = g % (SELECT count(*) FROM tmpl);

INSERT INTO jobs (id, project_id, endpoint_id, spec, labels, priority, busy_key, state,
                  attempts, max_attempts, cells_total, cells_done, header, result, error,
                  created_at, started_at, finished_at, updated_at)
SELECT c.id, c.project_id, c.endpoint_id, t.spec, c.labels, 0, c.endpoint_id::text, c.state,
       1, 3, t.cells_total, CASE WHEN c.state = 'succeeded' THEN t.cells_done ELSE 0 END,
       t.header, CASE WHEN c.state = 'succeeded' THEN t.result END,
       CASE WHEN c.state = 'failed' THEN 'endpoint: connection refused (cloned history)' END,
       c.at, c.at + interval '20 s', c.at + interval '5 min', c.at + interval '5 min'
FROM clone c JOIN jobs t ON t.id = c.tmpl_id;

INSERT INTO job_cells (job_id, phase, context, concurrency, cell, created_at, worker, attempt)
SELECT c.id, x.phase, x.context, x.concurrency,
       CASE WHEN x.cell ? 'total_tps'
            THEN jsonb_set(x.cell, '{total_tps}', to_jsonb((x.cell->>'total_tps')::float8 * c.f))
            ELSE x.cell END,
       c.at + interval '1 min', x.worker, 1
FROM clone c JOIN job_cells x ON x.job_id = c.tmpl_id
WHERE c.state = 'succeeded';

INSERT INTO series_points (job_id, project_id, endpoint_id, labels, phase, context,
                           concurrency, metric, at, value, se, ci_lo, ci_hi)
SELECT c.id, c.project_id, c.endpoint_id, c.labels, p.phase, p.context, p.concurrency,
       p.metric, c.at + interval '5 min', p.value * c.f, p.se, p.ci_lo * c.f, p.ci_hi * c.f
FROM clone c JOIN series_points p ON p.job_id = c.tmpl_id
WHERE c.state = 'succeeded';

-- as autovacuum leaves an aged table: the visibility map set (index-only
-- reads), the statistics fresh
VACUUM (ANALYZE);
SELECT format('seeded %s jobs, %s cells, %s series points; database %s',
              (SELECT count(*) FROM jobs), (SELECT count(*) FROM job_cells),
              (SELECT count(*) FROM series_points),
              pg_size_pretty(pg_database_size(current_database())));
