-- Signed results (issue 35, item 4; lib/db/tb_signkeys, lib/base/tb_sign):
-- the public half of every key a process has signed results with, recorded
-- when it loads its private key (TOKBENCH_SIGNING_KEY_FILE).  The private
-- key never reaches the database.  GET /v1/signing-keys serves these rows
-- as a JWK set, revoked ones with their revoked_at; a key is revoked with
-- `tokbench signing-keys revoke KID`, and a process whose key is revoked
-- signs nothing more with it.  Rotation: a new key file is a new row; the
-- old rows stay, so what they signed still verifies.
CREATE TABLE signing_keys (
  kid        text PRIMARY KEY CHECK (kid ~ '^[0-9a-f]{16}$'),  -- SHA-256(raw key)[:16 hex]
  public_key text NOT NULL UNIQUE CHECK (length(public_key) = 43),  -- 32 bytes, base64url
  created_at timestamptz NOT NULL DEFAULT now(),
  revoked_at timestamptz
);

-- Provenance (issue 35, item 3; lib/db/tb_ranby): which worker ran each cell
-- and its clock offset to this database.  A worker measures its offset
-- (tb_clock, NTP style over clock_timestamp()) when it starts an attempt at
-- a job and records it in job_attempts; each cell row names the worker and
-- the attempt that stored it, filled from the job's lease by the trigger
-- below, so the one statement that stores a cell (tb_queue_store_cell,
-- fenced by that lease) needs no change.  Cells stored before this
-- migration keep NULLs: their worker is unknown.
CREATE TABLE job_attempts (
  job_id          uuid NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
  attempt         integer NOT NULL CHECK (attempt >= 1),
  worker          text NOT NULL,
  clock_offset_us bigint NOT NULL,  -- this database's clock - the worker's wall clock
  clock_uncert_us bigint NOT NULL CHECK (clock_uncert_us >= 0),  -- half the best round trip
  measured_at     timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (job_id, attempt)
);

ALTER TABLE job_cells ADD COLUMN worker text, ADD COLUMN attempt integer;

CREATE FUNCTION job_cells_ran_by() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  SELECT j.lease_owner, j.attempts INTO NEW.worker, NEW.attempt FROM jobs j WHERE j.id = NEW.job_id;
  RETURN NEW;
END $$;

CREATE TRIGGER job_cells_ran_by BEFORE INSERT ON job_cells
  FOR EACH ROW EXECUTE FUNCTION job_cells_ran_by();

-- A shard's clock offset against its worker's wall clock (the existing
-- clock_offset_ns is against its monotonic clock, which only that process
-- can read): the provenance of a sharded cell's shards.
ALTER TABLE cell_shards ADD COLUMN clock_wall_offset_us bigint;
