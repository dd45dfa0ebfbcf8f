-- Issue 26: what an endpoint costs and draws.  gpu {name, count} (the GPUs
-- the price pays for; tokens/s per GPU divides by count), price_per_hour in
-- currency (ISO 4217 letters, e.g. USD) for the whole endpoint, and
-- telemetry_url: a Prometheus text endpoint of GPU telemetry (NVIDIA
-- dcgm-exporter's /metrics) read by the engine during cells, under the
-- egress policy as base_url is.
ALTER TABLE endpoints ADD COLUMN gpu jsonb;
ALTER TABLE endpoints ADD COLUMN price_per_hour double precision
  CHECK (price_per_hour IS NULL OR (price_per_hour >= 0 AND price_per_hour < 1e9));
ALTER TABLE endpoints ADD COLUMN currency text
  CHECK (currency IS NULL OR currency ~ '^[A-Z]{3}$');
ALTER TABLE endpoints ADD COLUMN telemetry_url text;
