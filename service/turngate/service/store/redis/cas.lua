#!lua
-- The Redis store's one write: a generic compare-and-set of a session document.
-- It knows versions, epochs, keys, streams and the clock, never turn rules (those are decided in
-- Python). The shebang (no flags) declares that it may write: Redis refuses to run it at all where
-- it could not write (a read-only replica, out of memory), also when it would only confirm (the
-- health probe).
--
-- KEYS: 1 doc hash, 2 session log stream, 3 bucket deadlines zset, 4 bucket outbox stream,
--       5 bucket zset of the sessions in 3 that a turn holds, 6 bucket zset of idle sessions
-- ARGV: 1 version the decision read, 2 the epoch of the decision's document (written with every
--       log and outbox entry), 3 the decision's `now` (µs), 4 how far behind TIME and 5 how far
--       ahead of TIME that `now` may be (µs), 6 and 7 the instants between which the decision
--       holds (µs, from 6 inclusive to 7 exclusive; "" for unbounded), 8 new document ("" when
--       the decision changed nothing: confirm only; "-" when it removes the session: R1),
--       9 session member, then for a new document: 10 deadline (µs, or "" for none), 11 "1" if
--       the session belongs in KEYS[5] ("" if not), 12 since when it is idle (µs, or "" while
--       something in it is live: KEYS[6]), 13 events to retain, 14 the age beyond which events
--       go (µs, or "" for no bound), 15 number of events N, then N triples: seq, time, event body
-- Returns {1, seconds, µs} (TIME) when confirmed or written, {0, seconds, µs, version, document}
-- when the version or the epoch changed or the decision's clock was off (nothing written), or
-- {2, seconds, µs} when a removal waits for the ledger to hold the whole log (nothing written);
-- a removal leaves one outbox entry, `retired`, naming the log's epoch and head.
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000000 + tonumber(time[2])
local version = tonumber(redis.call('HGET', KEYS[1], 'v') or '0')
local decided_at = tonumber(ARGV[3])
-- A document Redis lost and wrote again may reach the version a replica remembers of the old one:
-- the epoch its log names (entries of 0.1.0 name none) tells them apart.
local logged_epoch = nil
local newest = redis.call('XREVRANGE', KEYS[2], '+', '-', 'COUNT', 1)[1]
if newest then
  for i = 1, #newest[2], 2 do
    if newest[2][i] == 'epoch' then
      logged_epoch = newest[2][i + 1]
    end
  end
end
-- A decision whose instant TIME has passed (a lease expired since) or not reached yet is taken again.
local outside = (ARGV[6] ~= '' and now < tonumber(ARGV[6])) or (ARGV[7] ~= '' and now >= tonumber(ARGV[7]))
if version ~= tonumber(ARGV[1]) or (version > 0 and logged_epoch and logged_epoch ~= ARGV[2]) or outside
    or decided_at < now - tonumber(ARGV[4]) or decided_at > now + tonumber(ARGV[5]) then
  return {0, time[1], time[2], version, redis.call('HGET', KEYS[1], 'doc')}
end
if ARGV[8] == '' then
  return {1, time[1], time[2]}
end
if ARGV[8] == '-' then
  -- R1: the session's history must be in the ledger before the log goes.
  local projected = tonumber(redis.call('HGET', KEYS[1], 'ledger') or '0')
  local head = newest and tonumber((string.gsub(newest[1], '-.*', ''))) or 0
  if projected < head then
    return {2, time[1], time[2]}
  end
  redis.call('DEL', KEYS[1], KEYS[2])
  -- The projector forgets where the ledger got in this log: a later one is a new run, not a loss.
  redis.call('XADD', KEYS[4], '*', 'k', ARGV[9], 's', head, 'epoch', ARGV[2], 'retired', '1')
  redis.call('ZREM', KEYS[3], ARGV[9])
  redis.call('ZREM', KEYS[5], ARGV[9])
  redis.call('ZREM', KEYS[6], ARGV[9])
  return {1, time[1], time[2]}
end

-- The log first: a failing script is not rolled back, and the first XADD is the one command here
-- that can fail on the store's own keys (an id at or below the log's last), so nothing precedes it.
local count = tonumber(ARGV[15])
local last = 0
for i = 0, count - 1 do
  local base = 16 + i * 3
  last = tonumber(ARGV[base])
  redis.call('XADD', KEYS[2], ARGV[base] .. '-0', 't', ARGV[base + 1], 'e', ARGV[base + 2], 'epoch', ARGV[2])
end
redis.call('HSET', KEYS[1], 'v', version + 1, 'doc', ARGV[8])
if count > 0 then
  redis.call('XADD', KEYS[4], '*', 'k', ARGV[9], 's', last, 'epoch', ARGV[2])
  -- Keep what watchers may resume from (the last events, and those young enough), and everything
  -- the ledger has not recorded yet.
  local keep_from = last - tonumber(ARGV[13]) + 1
  if ARGV[14] ~= '' then
    -- Events older than the age bound go too: the oldest few per write, so no write does much.
    local too_old = decided_at - tonumber(ARGV[14])
    for _, entry in ipairs(redis.call('XRANGE', KEYS[2], '-', '+', 'COUNT', 16)) do
      local fields = entry[2]
      local at = nil
      for i = 1, #fields, 2 do
        if fields[i] == 't' then
          at = tonumber(fields[i + 1])
        end
      end
      if at >= too_old then
        break
      end
      keep_from = math.max(keep_from, tonumber((string.gsub(entry[1], '-.*', ''))) + 1)
    end
  end
  local projected = tonumber(redis.call('HGET', KEYS[1], 'ledger') or '0')
  keep_from = math.min(keep_from, projected + 1)
  if keep_from > 1 then
    redis.call('XTRIM', KEYS[2], 'MINID', keep_from .. '-0')
  end
end

if ARGV[10] == '' then
  redis.call('ZREM', KEYS[3], ARGV[9])
else
  redis.call('ZADD', KEYS[3], ARGV[10], ARGV[9])
end
if ARGV[11] == '' then
  redis.call('ZREM', KEYS[5], ARGV[9])
else
  redis.call('ZADD', KEYS[5], ARGV[10], ARGV[9])
end
if ARGV[12] == '' then
  redis.call('ZREM', KEYS[6], ARGV[9])
else
  redis.call('ZADD', KEYS[6], ARGV[12], ARGV[9])
end
return {1, time[1], time[2]}
