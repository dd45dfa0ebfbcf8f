-- Rate cells (issue 15, lib/engine/tb_rate): a job's cells may be of phase 'rate'
-- too.  Their key is (context = the mean prompt tokens asked, concurrency =
-- the cell's number in the run), so the primary key holds as it is.  Series
-- (series_points) stay prefill and decode: the verdict reads only those.
ALTER TABLE job_cells DROP CONSTRAINT job_cells_phase_check;
ALTER TABLE job_cells ADD CONSTRAINT job_cells_phase_check
  CHECK (phase IN ('prefill', 'decode', 'rate'));
