-- A dead letter, written once: the first call that names `identity` (what the letter is about)
-- adds the fields to the bucket's dead-letter stream and notes the new entry's id in the bucket's
-- index; any later one (the entry delivered again, a transaction retried after its commit failed,
-- another projector on the same entry) writes nothing.
--
-- KEYS: 1 bucket dead-letter stream, 2 bucket dead-letter index (hash: identity -> entry id)
-- ARGV: 1 identity, 2… field, value pairs
-- Returns 1 when written, 0 when written before.
if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 1 then
  return 0
end
redis.call('HSET', KEYS[2], ARGV[1], redis.call('XADD', KEYS[1], '*', unpack(ARGV, 2)))
return 1
