-- The worker pool as the api sees it (issue 34, item 3; lib/db/tb_workers):
-- each worker writes its id and the time it was last seen between jobs, and
-- deletes its row when it stops.  A job of N shards needs N workers besides
-- the one that holds it (docs/deploy.md, "One cell from many workers"): the
-- api counts the live ones (seen within TOKBENCH_WORKER_LIVE_S, or holding a
-- running job's lease) and refuses at submit a job that could never fill
-- its barrier, instead of letting it hold a worker for the barrier's timeout.
CREATE TABLE workers (
  id      text PRIMARY KEY CHECK (length(id) BETWEEN 1 AND 200),
  seen_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX workers_seen ON workers (seen_at);
