-- The Redis store's one write: a generic compare-and-set of a session document.
-- It knows versions, keys, streams and the clock, never turn rules (those are decided in Python).
--
-- KEYS: 1 doc hash, 2 session log stream, 3 bucket deadlines zset, 4 bucket outbox stream
-- ARGV: 1 version the decision read, 2 the decision's `now` (µs), 3 how far behind TIME and
--       4 how far ahead of TIME that `now` may be (µs), 5 and 6 the instants between which the
--       decision holds (µs, from 5 inclusive to 6 exclusive; "" for unbounded), 7 new document
--       ("" when the decision changed nothing: confirm only), 8 deadline (µs, or "" for none),
--       9 session member, 10 events to retain, 11 number of events N, then N triples: seq, time,
--       event body
-- Returns {1, seconds, µs} (TIME) when confirmed or written, or {0, seconds, µs, version, document}
-- when the version changed or the decision's clock was off (nothing written).
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000000 + tonumber(time[2])
local version = tonumber(redis.call('HGET', KEYS[1], 'v') or '0')
local decided_at = tonumber(ARGV[2])
-- A decision whose instant TIME has passed (a lease expired since) or not reached yet is taken again.
local outside = (ARGV[5] ~= '' and now < tonumber(ARGV[5])) or (ARGV[6] ~= '' and now >= tonumber(ARGV[6]))
if version ~= tonumber(ARGV[1]) or outside
    or decided_at < now - tonumber(ARGV[3]) or decided_at > now + tonumber(ARGV[4]) then
  return {0, time[1], time[2], version, redis.call('HGET', KEYS[1], 'doc')}
end
if ARGV[7] == '' then
  return {1, time[1], time[2]}
end

-- The log first: a failing script is not rolled back, and the first XADD is the one command here
-- that can fail on the store's own keys (an id at or below the log's last), so nothing precedes it.
local count = tonumber(ARGV[11])
local last = 0
for i = 0, count - 1 do
  local base = 12 + i * 3
  last = tonumber(ARGV[base])
  redis.call('XADD', KEYS[2], ARGV[base] .. '-0', 't', ARGV[base + 1], 'e', ARGV[base + 2])
end
redis.call('HSET', KEYS[1], 'v', version + 1, 'doc', ARGV[7])
if count > 0 then
  redis.call('XADD', KEYS[4], '*', 'k', ARGV[9], 's', last)
  -- Keep what watchers may resume from, and everything the ledger has not recorded yet.
  local projected = tonumber(redis.call('HGET', KEYS[1], 'ledger') or '0')
  local keep_from = math.min(last - tonumber(ARGV[10]), projected) + 1
  if keep_from > 1 then
    redis.call('XTRIM', KEYS[2], 'MINID', keep_from .. '-0')
  end
end

if ARGV[8] == '' then
  redis.call('ZREM', KEYS[3], ARGV[9])
else
  redis.call('ZADD', KEYS[3], ARGV[8], ARGV[9])
end
return {1, time[1], time[2]}
