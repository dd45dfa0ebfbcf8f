-- wrk script: GET one path after another from the file named by BENCH_PATHS
-- (one per line), each thread from its own random start, with the API key
-- BENCH_KEY (bench/bench_history.sh).  Many ids, not one: the job cache and
-- PostgreSQL's buffers see what a busy service sees.
local paths = {}
local i = 1

function init(args)
  for line in io.lines(os.getenv("BENCH_PATHS")) do
    if line ~= "" then
      paths[#paths + 1] = line
    end
  end
  math.randomseed(os.time() + tonumber(tostring({}):match("0x(%x+)"), 16) % 1000)
  i = math.random(#paths)
end

request = function()
  i = i % #paths + 1
  return wrk.format("GET", paths[i], { ["Authorization"] = "Bearer " .. os.getenv("BENCH_KEY") })
end
