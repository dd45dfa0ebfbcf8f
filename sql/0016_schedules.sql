-- Schedules (issue 35, item 1; service/api_schedules.c, the ticker in
-- service/api_schedtick.c): a job of a project run at the times of a
-- five-field cron expression in an IANA time zone (lib/base/tb_cron,
-- lib/base/tb_tz).
--
-- What a run is: either a preset of the project (preset_id; the preset's
-- spec as it is when the run fires) or a whole job spec (spec, validated as
-- POST /v1/jobs validates one), run against endpoint_id, with labels merged
-- over the spec's and "schedule": <id> over both (a schedule's runs are one
-- series of the history: a label per slot would make each its own).
--
-- Firing: every api process ticks; a tick claims the row of a due schedule
-- (NOT paused AND next_run_at <= now) with FOR UPDATE SKIP LOCKED, inserts
-- the job through the one job insert (jobs.schedule_id, schedule_slot) and
-- moves next_run_at to the first fire strictly after now, in one
-- transaction: a slot fires once however many replicas tick, and a slot
-- missed while no api ran fires once, not once per slot missed.  The
-- unique index on (schedule_id, schedule_slot) makes "a slot's job
-- written twice" impossible besides.
--
-- paused_reason: why the schedule paused itself (its endpoint deleted or
-- refused by the egress policy, its preset deleted, its spec no longer
-- valid); NULL when paused by its owner.  last_error: why the last due
-- slot did not make a job (a limit refused it); the schedule goes on.
CREATE TABLE schedules (
  id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  project_id    uuid NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
  endpoint_id   uuid NOT NULL REFERENCES endpoints(id),
  preset_id     uuid REFERENCES presets(id) ON DELETE SET NULL,
  preset_name   text CHECK (preset_name ~ '^[A-Za-z0-9._~-]{1,100}$'),
  spec          jsonb,
  cron          text NOT NULL CHECK (length(cron) BETWEEN 1 AND 256),
  timezone      text NOT NULL CHECK (length(timezone) BETWEEN 1 AND 64),
  labels        jsonb NOT NULL DEFAULT '{}',
  paused        boolean NOT NULL DEFAULT false,
  paused_reason text CHECK (paused_reason IS NULL OR length(paused_reason) <= 500),
  next_run_at   timestamptz,
  last_run_at   timestamptz,
  last_job_id   uuid REFERENCES jobs(id) ON DELETE SET NULL,
  last_error    text CHECK (last_error IS NULL OR length(last_error) <= 500),
  last_error_at timestamptz,
  runs          bigint NOT NULL DEFAULT 0,
  created_at    timestamptz NOT NULL DEFAULT now(),
  updated_at    timestamptz NOT NULL DEFAULT now(),
  -- a preset (by name, its id while it lives) or a spec, never both
  CHECK ((preset_name IS NULL) <> (spec IS NULL))
);
-- The ticker's claim: the due schedules, soonest first.
CREATE INDEX schedules_due ON schedules (next_run_at) WHERE NOT paused;
-- GET /v1/schedules and the per-project cap (TOKBENCH_LIMIT_SCHEDULES).
CREATE INDEX schedules_project ON schedules (project_id, created_at, id);

-- The job a schedule's slot made.  A schedule deleted leaves its jobs (and
-- their label) as they were.
ALTER TABLE jobs ADD COLUMN schedule_id uuid REFERENCES schedules(id) ON DELETE SET NULL;
ALTER TABLE jobs ADD COLUMN schedule_slot timestamptz;
CREATE UNIQUE INDEX jobs_schedule_slot ON jobs (schedule_id, schedule_slot)
  WHERE schedule_id IS NOT NULL;
