-- wrk script: replays a pool of pre-signed Standard Webhooks requests (format: bench/load/signed-requests.ts),
-- each request exactly once, then ends the run; writes counts, duration and latency as JSON.
-- No response() callback: wrk would then parse every response's headers into Lua tables, which on a
-- 2-core machine costs the server under test ~25 % of its throughput. wrk still counts statuses > 399.
--
-- Environment (wrk passes script arguments only to init(), but done() needs them too):
--   BENCH_POOL    pool file      BENCH_PATH        request path
--   BENCH_THREADS wrk's -t       BENCH_CONNECTIONS wrk's -c       BENCH_OUT  where done() writes the JSON
-- Thread i takes pool lines i, i+T, i+2T, ...; once it has sent its share it answers request() with an
-- empty request, so the connection idles. Each connection asks once more after its last answer, so when
-- every connection of the thread has asked, all its requests are answered and the thread stops. A
-- connection the server closes while it idles (past its keep-alive timeout: 10 s for uWS, 5 s for
-- Node) reconnects and asks again, so an answer slower than that can be cut off: the run then counts
-- it as timed out (requests < pool size) and its idle close as a socket error, never as a success.
-- wrk 4.1 otherwise sleeps for the whole -d: the last thread to finish sends wrk its own SIGINT (which only
-- sets wrk's stop flag), and the duration is measured here, from the first request sent to the last answer.

local ffi = require("ffi")
ffi.cdef([[
  typedef struct { long tv_sec; long tv_nsec; } bench_timespec;
  int clock_gettime(int clock_id, bench_timespec *tp);
  int getpid(void);
  int kill(int pid, int sig);
]])
local CLOCK_MONOTONIC, SIGINT = 1, 2
local clock = ffi.new("bench_timespec")
local function now_us()
  ffi.C.clock_gettime(CLOCK_MONOTONIC, clock)
  return tonumber(clock.tv_sec) * 1e6 + tonumber(clock.tv_nsec) / 1e3
end

local threads = {}
local started = 0

function setup(thread)
  thread:set("thread_index", started)
  started = started + 1
  table.insert(threads, thread)
end

function init(args)
  stride = tonumber(os.getenv("BENCH_THREADS"))
  local path = os.getenv("BENCH_PATH")
  pool = {}
  total, sent = 0, 0
  first_us, last_us, drained = 0, 0, 0
  connections = math.floor(tonumber(os.getenv("BENCH_CONNECTIONS")) / stride) -- as wrk splits them
  local line_no = 0
  for line in io.lines(os.getenv("BENCH_POOL")) do
    if line_no % stride == thread_index then
      local id, ts, sig, body = line:match("^([^\t]+)\t([^\t]+)\t([^\t]+)\t(.*)$")
      total = total + 1
      pool[total] = wrk.format("POST", path, {
        ["Content-Type"] = "application/json",
        ["webhook-id"] = id,
        ["webhook-timestamp"] = ts,
        ["webhook-signature"] = sig,
      }, body)
    end
    line_no = line_no + 1
  end
end

-- Each finished thread leaves a marker, then looks for everyone's: the last one to finish sees them all.
-- Two threads may both see them all; a second SIGINT is harmless.
local function finish_thread()
  wrk.thread:stop()
  local out = os.getenv("BENCH_OUT")
  io.open(out .. ".done." .. thread_index, "w"):close()
  for i = 0, stride - 1 do
    local marker = io.open(out .. ".done." .. i, "r")
    if marker == nil then
      return
    end
    marker:close()
  end
  ffi.C.kill(ffi.C.getpid(), SIGINT)
end

function request()
  -- wrk calls request() once on thread 0 before the run to check it (script_verify_request):
  -- that call must not use up a pool entry, or one request would never be sent.
  if not verified then
    verified = true
    if thread_index == 0 then
      return pool[1] or ""
    end
  end
  if sent >= total then
    -- Every connection asks once more after its last answer, then idles: once all have, all are answered.
    drained = drained + 1
    if drained == connections then
      last_us = now_us()
      finish_thread()
    end
    return ""
  end
  if sent == 0 then
    first_us = now_us()
  end
  sent = sent + 1
  return pool[sent]
end

function done(summary, latency, requests)
  local first, last = math.huge, 0
  for _, thread in ipairs(threads) do
    local f, l = thread:get("first_us"), thread:get("last_us")
    if f and f > 0 and f < first then first = f end
    if l and l > last then last = l end
  end
  local measured_us = (last > first) and (last - first) or summary.duration
  local e = summary.errors
  local function p(q)
    if summary.requests == 0 then return 0 end
    return latency:percentile(q)
  end
  local out = assert(io.open(os.getenv("BENCH_OUT"), "w"))
  out:write(string.format(
    '{"requests":%d,"durationUs":%d,"wrkDurationUs":%d,' ..
      '"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d},' ..
      '"latencyUs":{"p50":%d,"p90":%d,"p99":%d,"max":%d}}\n',
    summary.requests, measured_us, summary.duration,
    e.connect, e.read, e.write, e.status, e.timeout,
    p(50), p(90), p(99), summary.requests == 0 and 0 or latency.max))
  out:close()
end
