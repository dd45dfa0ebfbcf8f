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
