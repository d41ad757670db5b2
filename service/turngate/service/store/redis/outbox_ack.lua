-- The ledger projector's acknowledgement, sent only after its SQL commit: raises the session
-- document's `ledger` mark (never lowers it, never creates the document; the store trims the
-- session log only below the mark), then acknowledges and deletes the outbox entries.
--
-- KEYS: 1 bucket outbox stream, 2 session document hash (omitted for entries of no session)
-- ARGV: 1 consumer group, 2 seq the ledger holds (ignored without KEYS[2]), 3… entry ids
if #KEYS == 2 and redis.call('EXISTS', KEYS[2]) == 1 then
  local mark = tonumber(redis.call('HGET', KEYS[2], 'ledger') or '0')
  if tonumber(ARGV[2]) > mark then
    redis.call('HSET', KEYS[2], 'ledger', ARGV[2])
  end
end
redis.call('XACK', KEYS[1], ARGV[1], unpack(ARGV, 3))
return redis.call('XDEL', KEYS[1], unpack(ARGV, 3))
