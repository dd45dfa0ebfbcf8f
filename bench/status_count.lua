-- wrk script for bench_limits.sh: counts responses by status, and the 429s
-- that carry Retry-After and a problem+json body; prints them in done().
-- Env: BENCH_KEY (the Bearer key).
local threads = {}

function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  counts = {}
  retry = 0
  problem = 0
  wrk.headers["Authorization"] = "Bearer " .. os.getenv("BENCH_KEY")
end

function response(status, headers, body)
  counts[status] = (counts[status] or 0) + 1
  if status == 429 then
    if headers["Retry-After"] ~= nil then retry = retry + 1 end
    if headers["Content-Type"] == "application/problem+json" then problem = problem + 1 end
  end
end

function done(summary, latency, requests)
  local all, r, p = {}, 0, 0
  for _, t in ipairs(threads) do
    local c = t:get("counts")
    for k, v in pairs(c) do all[k] = (all[k] or 0) + v end
    r = r + t:get("retry")
    p = p + t:get("problem")
  end
  local line = "statuses:"
  for k, v in pairs(all) do line = line .. string.format(" %d=%d", k, v) end
  print(line)
  print(string.format("429 with Retry-After: %d, as problem+json: %d", r, p))
end
