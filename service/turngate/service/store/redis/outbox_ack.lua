-- The ledger projector's acknowledgement, sent only after its SQL commit: raises the session
-- document's `ledger` mark (never lowers it, never creates the document; the store trims the
-- session log only below it), then acknowledges and deletes the outbox entries. The mark is raised
-- only while the log is of the epoch recorded: a mark carried over to a log that Redis lost and
-- started again would let the store trim that new log's events before the ledger has them.
--
-- KEYS: 1 bucket outbox stream, then for entries of a session: 2 its document hash, 3 its log
-- ARGV: 1 consumer group, 2 epoch and 3 seq the ledger holds (ignored without KEYS[2]), 4 the epoch
--       of a log entry that names none (written before epochs), 5… entry ids
if #KEYS == 3 and redis.call('EXISTS', KEYS[2]) == 1 then
  local newest = redis.call('XREVRANGE', KEYS[3], '+', '-', 'COUNT', 1)[1]
  local epoch = ARGV[4]
  if newest then
    local fields = newest[2]
    for i = 1, #fields, 2 do
      if fields[i] == 'epoch' then
        epoch = fields[i + 1]
      end
    end
  end
  local mark = tonumber(redis.call('HGET', KEYS[2], 'ledger') or '0')
  if newest and epoch == ARGV[2] and tonumber(ARGV[3]) > mark then
    redis.call('HSET', KEYS[2], 'ledger', ARGV[3])
  end
end
redis.call('XACK', KEYS[1], ARGV[1], unpack(ARGV, 5))
return redis.call('XDEL', KEYS[1], unpack(ARGV, 5))
