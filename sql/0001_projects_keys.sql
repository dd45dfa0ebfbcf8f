-- Projects isolate users from one another; API keys belong to one project.
-- Keys are stored only as a SHA-256 hash of the whole key; the prefix (the
-- first characters after "tkb_") is kept to tell keys apart in listings.
CREATE TABLE projects (
  id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  name        text NOT NULL UNIQUE CHECK (length(name) BETWEEN 1 AND 100),
  created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE api_keys (
  id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  project_id  uuid NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
  name        text NOT NULL DEFAULT '',
  prefix      text NOT NULL,
  key_hash    text NOT NULL UNIQUE,
  scopes      text[] NOT NULL CHECK (scopes <@ ARRAY['read','write','admin']::text[]),
  created_at  timestamptz NOT NULL DEFAULT now(),
  expires_at  timestamptz,
  revoked_at  timestamptz,
  last_used_at timestamptz
);
CREATE INDEX api_keys_project ON api_keys (project_id);
