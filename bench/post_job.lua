-- wrk script: POST /v1/jobs with a fixed spec (bench/bench_api.sh sets
-- BENCH_KEY and BENCH_ENDPOINT in the environment).
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer " .. os.getenv("BENCH_KEY")
wrk.body = '{"endpoint_id":"' .. os.getenv("BENCH_ENDPOINT") ..
  '","contexts":["8k"],"concurrency":[1],"duration_s":1,"labels":{"bench":"post"}}'
