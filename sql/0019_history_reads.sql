-- Reads whose cost stays flat as history grows (issue 36, item 3; the plans
-- before and after are in docs/deploy.md, made by make bench-history).
--
-- GET /v1/pareto read the whole stored result of each of its 200 newest
-- jobs (cells with samples and server series: 180 KB of JSON a job) to
-- keep what the frontier reads (lib/result/tb_pareto.c: the document's
-- engine, cost, hardware, launch_command and imported_from; of each valid
-- decode cell its phase, status, context, concurrency, total_tps and its
-- interval, efficiency, ttft_ms, tbt_ms and whether its checks passed).
-- pareto_doc is that, kept by PostgreSQL beside the result it is made from
-- (a stored generated column: every write of result writes it too); NULL
-- when the result holds no cells (the route then makes it from job_cells as
-- before).  A name added to what tb_pareto reads is added here too.
CREATE FUNCTION tb_pareto_doc(r jsonb) RETURNS jsonb
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE WHEN jsonb_typeof(r -> 'cells') = 'array' THEN
    coalesce((SELECT jsonb_object_agg(key, value) FROM jsonb_each(r)
               WHERE key IN ('engine', 'cost', 'hardware', 'launch_command', 'imported_from')),
             '{}'::jsonb)
    || jsonb_build_object('cells', (
      SELECT coalesce(jsonb_agg(
               (SELECT jsonb_object_agg(key, value) FROM jsonb_each(c)
                 WHERE key IN ('phase', 'status', 'context', 'concurrency', 'total_tps',
                               'total_tps_ci95', 'efficiency', 'ttft_ms', 'tbt_ms'))
               || CASE WHEN jsonb_typeof(c -> 'checks') = 'object'
                       THEN jsonb_build_object('checks',
                              jsonb_build_object('ok', c -> 'checks' -> 'ok'))
                       ELSE '{}'::jsonb END), '[]'::jsonb)
        FROM jsonb_array_elements(r -> 'cells') c
       WHERE c ->> 'phase' = 'decode' AND c ->> 'status' = 'valid'))
  END
$$;
ALTER TABLE jobs ADD COLUMN pareto_doc jsonb GENERATED ALWAYS AS (tb_pareto_doc(result)) STORED;

-- GET /v1/series of one cell read its 400 newest points by the series
-- index and then each point's row from the heap (436 buffers for 400 rows
-- over the 100k-job history): the index now holds what the route returns,
-- so the read is index-only.
DROP INDEX series_points_series;
CREATE INDEX series_points_series
  ON series_points (project_id, endpoint_id, labels, phase, context, concurrency, metric, at)
  INCLUDE (job_id, value, se, ci_lo, ci_hi);

-- GET /v1/series without a cell (the matrix of an endpoint's newest jobs)
-- grouped every point of the series key to find its newest jobs; in this
-- order the newest (at, job) pairs are the first entries of the index, and
-- each job's points are found there too, index-only.
CREATE INDEX series_points_matrix
  ON series_points (project_id, endpoint_id, labels, phase, metric, at DESC, job_id DESC)
  INCLUDE (context, concurrency, value);
