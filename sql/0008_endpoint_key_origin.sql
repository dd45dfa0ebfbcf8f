-- Issue 13: an endpoint's API key is bound to the origin (scheme://host:port)
-- of its base_url.  api_key_origin is the origin the sealed key was set for
-- and part of the seal's associated data ("endpoint <id> <origin>",
-- lib/net/tb_masterkey.h).  Changing base_url to another origin drops the key
-- unless the same PATCH sets a new one.  NULL beside a sealed key: a key
-- sealed before this migration (associated data = the id alone); the api
-- re-seals those at start, as only it holds the master key.
ALTER TABLE endpoints ADD COLUMN api_key_origin text;
