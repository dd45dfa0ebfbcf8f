-- CI integration (issue 7): presets, inbound hooks, outbound callbacks and
-- their deliveries.

-- A preset: a named job template of a project (the body of POST /v1/jobs,
-- validated when saved).  Hooks and `tokbench submit --preset` start jobs
-- from it.
CREATE TABLE presets (
  id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  project_id  uuid NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
  name        text NOT NULL CHECK (name ~ '^[A-Za-z0-9._~-]{1,100}$'),
  spec        jsonb NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now(),
  updated_at  timestamptz NOT NULL DEFAULT now(),
  UNIQUE (project_id, name)
);

-- An inbound hook: POST /v1/hooks/{id} starts a job from its preset when the
-- request is signed with its secret.  The secret is sealed with AES-256-GCM
-- under the master key (tb_crypto_seal, associated data = the hook id) and
-- shown once, at creation.  kind: github (X-Hub-Signature-256) or generic
-- (X-Tokbench-Signature + X-Tokbench-Timestamp).  events: the GitHub events
-- that start a job ("*" = all; ping is always answered).
CREATE TABLE hooks (
  id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  project_id    uuid NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
  preset_id     uuid NOT NULL REFERENCES presets(id) ON DELETE CASCADE,
  name          text NOT NULL DEFAULT '' CHECK (length(name) <= 200),
  kind          text NOT NULL CHECK (kind IN ('github', 'generic')),
  events        text[] NOT NULL DEFAULT ARRAY['push', 'workflow_run']::text[],
  secret_sealed text NOT NULL,
  created_at    timestamptz NOT NULL DEFAULT now(),
  deleted_at    timestamptz
);
CREATE INDEX hooks_project ON hooks (project_id) WHERE deleted_at IS NULL;

-- Deliveries received: the primary key makes "a delivery id seen before is
-- not run twice" a database fact.  job_id: the job it started (NULL when the
-- event was answered without a job: ping, ignored).
CREATE TABLE hook_deliveries_in (
  hook_id      uuid NOT NULL REFERENCES hooks(id) ON DELETE CASCADE,
  delivery_id  text NOT NULL CHECK (length(delivery_id) BETWEEN 1 AND 200),
  event        text,
  job_id       uuid REFERENCES jobs(id) ON DELETE SET NULL,
  received_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (hook_id, delivery_id)
);
CREATE INDEX hook_deliveries_in_received ON hook_deliveries_in (received_at);

-- An outbound callback of a project: when a job ends, tokbench POSTs a
-- summary to url signed per Standard Webhooks with secret ("whsec_..."),
-- sealed like the hooks' (associated data = the callback id).  scope 'all':
-- every job of the project; 'named': only jobs whose spec lists url in
-- "callbacks".  events: the end states that are sent.
CREATE TABLE callbacks (
  id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  project_id    uuid NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
  url           text NOT NULL CHECK (url ~ '^https?://' AND length(url) <= 2048),
  scope         text NOT NULL DEFAULT 'all' CHECK (scope IN ('all', 'named')),
  events        text[] NOT NULL DEFAULT ARRAY['succeeded', 'failed', 'cancelled']::text[]
                CHECK (events <@ ARRAY['succeeded', 'failed', 'cancelled']::text[]),
  secret_sealed text NOT NULL,
  created_at    timestamptz NOT NULL DEFAULT now(),
  deleted_at    timestamptz
);
CREATE INDEX callbacks_project ON callbacks (project_id) WHERE deleted_at IS NULL;

-- One outbound delivery: one job end to one URL.  The dispatcher (a thread
-- of tokbench-api, service/tb_deliver.c) claims due rows with FOR UPDATE SKIP
-- LOCKED, sets status 'sending' with a lease, POSTs, and records the
-- outcome: 'succeeded', back to 'pending' with next_attempt_at (exponential
-- backoff, about a day), or 'failed' for good.  payload is built at the first
-- attempt and kept, so every retry sends the same bytes under the same
-- webhook-id (the delivery id).  callback_id NULL: the job named a URL no
-- callback is registered for (status 'failed' at once, last_error says so).
CREATE TABLE webhook_deliveries (
  id               uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  project_id       uuid NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
  job_id           uuid NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
  callback_id      uuid REFERENCES callbacks(id) ON DELETE SET NULL,
  url              text NOT NULL,
  event            text NOT NULL,
  payload          text,
  status           text NOT NULL DEFAULT 'pending'
                   CHECK (status IN ('pending', 'sending', 'succeeded', 'failed')),
  attempts         integer NOT NULL DEFAULT 0,
  next_attempt_at  timestamptz NOT NULL DEFAULT now(),
  lease_until      timestamptz,
  last_error       text,
  response_code    integer,
  created_at       timestamptz NOT NULL DEFAULT now(),
  updated_at       timestamptz NOT NULL DEFAULT now(),
  delivered_at     timestamptz,
  UNIQUE (job_id, url)
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at)
  WHERE status IN ('pending', 'sending');
CREATE INDEX webhook_deliveries_project ON webhook_deliveries (project_id, created_at DESC, id DESC);

-- When a job reaches an end state, its deliveries are queued in the same
-- transaction as the state change, whoever made it (worker, cancel, lease
-- expiry): nothing in the worker needs to know about webhooks, and a job
-- cannot end without its deliveries being recorded.
CREATE FUNCTION tb_job_ended_deliveries() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  named jsonb := CASE WHEN jsonb_typeof(NEW.spec -> 'callbacks') = 'array'
                      THEN NEW.spec -> 'callbacks' ELSE '[]'::jsonb END;
  n integer;
BEGIN
  INSERT INTO webhook_deliveries (project_id, job_id, callback_id, url, event)
  SELECT DISTINCT ON (c.url) NEW.project_id, NEW.id, c.id, c.url, 'job.' || NEW.state
  FROM callbacks c
  WHERE c.project_id = NEW.project_id AND c.deleted_at IS NULL
    AND NEW.state = ANY (c.events)
    AND (c.scope = 'all' OR named ? c.url)
  ORDER BY c.url, c.created_at
  ON CONFLICT (job_id, url) DO NOTHING;
  GET DIAGNOSTICS n = ROW_COUNT;
  -- URLs the job names that no callback of the project covers: recorded as
  -- failed, so that GET /v1/deliveries says why nothing was sent.
  INSERT INTO webhook_deliveries (project_id, job_id, url, event, status, last_error)
  SELECT NEW.project_id, NEW.id, u.url, 'job.' || NEW.state, 'failed',
         'no callback of the project is registered for this URL (POST /v1/callbacks)'
  FROM jsonb_array_elements_text(named) AS u(url)
  WHERE NOT EXISTS (SELECT 1 FROM callbacks c
                    WHERE c.project_id = NEW.project_id AND c.deleted_at IS NULL
                      AND c.url = u.url)
  ON CONFLICT (job_id, url) DO NOTHING;
  IF n > 0 THEN
    PERFORM pg_notify('tb_deliveries', NEW.id::text);
  END IF;
  RETURN NEW;
END $$;

CREATE TRIGGER jobs_ended_deliveries
  AFTER UPDATE OF state ON jobs
  FOR EACH ROW
  WHEN (OLD.state IS DISTINCT FROM NEW.state
        AND NEW.state IN ('succeeded', 'failed', 'cancelled'))
  EXECUTE FUNCTION tb_job_ended_deliveries();
