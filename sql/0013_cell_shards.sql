-- Shards of a cell (issue 24, lib/db/tb_shards): one cell driven by several
-- workers, judged as one.  The worker running the job opens a barrier for
-- each attempt at a sharded cell, with one row per shard; any worker of the
-- pool claims a shard (SKIP LOCKED) with a lease of its own, warms up and
-- says it is ready with its clock offset to this database; when every
-- shard is ready one start time t0 is set (NOTIFY tb_shards_start) and each
-- shard runs, then stores its samples (lib/result/tb_samples: delta-coded
-- varints of microseconds).  A barrier that does not fill by its deadline,
-- or a started one whose shard lost its lease, fails: the cell is measured
-- again whole, under a new attempt, never half merged.
CREATE TABLE cell_barriers (
  job_id     uuid NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
  cell_key   text NOT NULL CHECK (length(cell_key) BETWEEN 1 AND 128),
  attempt    integer NOT NULL CHECK (attempt >= 1),
  nshards    integer NOT NULL CHECK (nshards BETWEEN 1 AND 64),
  spec       jsonb NOT NULL,  -- what every shard runs: the cell and its split
  state      text NOT NULL DEFAULT 'waiting'
             CHECK (state IN ('waiting', 'started', 'failed', 'merged')),
  deadline   timestamptz NOT NULL,  -- the barrier's timeout
  t0         timestamptz,           -- the common start, once every shard is ready
  reason     text,                  -- why it failed
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (job_id, cell_key, attempt)
);

CREATE TABLE cell_shards (
  job_id          uuid NOT NULL,
  cell_key        text NOT NULL,
  attempt         integer NOT NULL,
  shard           integer NOT NULL CHECK (shard >= 0),
  state           text NOT NULL DEFAULT 'open'
                  CHECK (state IN ('open', 'claimed', 'ready', 'done', 'failed')),
  worker          text,
  host            text,
  lease_until     timestamptz,
  clock_offset_ns bigint,  -- this database's clock - the worker's monotonic clock
  clock_uncert_ns bigint,  -- half the round trip of the probe it came from
  skew_us         bigint,  -- its actual start on the database's timeline - t0
  samples         bytea,   -- tb_samples' encoding
  PRIMARY KEY (job_id, cell_key, attempt, shard),
  FOREIGN KEY (job_id, cell_key, attempt) REFERENCES cell_barriers ON DELETE CASCADE
);
CREATE INDEX cell_shards_open ON cell_shards (job_id) WHERE state = 'open';
