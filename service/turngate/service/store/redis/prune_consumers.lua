-- Removes from the group on one bucket's outbox the consumers that hold no pending entry and have
-- been idle for the bound or longer: the names of projector processes that are gone (each process
-- joins under a name of its own). The check and the removal are one script, so no entry can be
-- delivered to a consumer in between; a live consumer removed so is made again by its next read.
--
-- KEYS: 1 bucket outbox stream
-- ARGV: 1 consumer group, 2 idle bound (ms), 3 the calling consumer (kept)
-- Returns the names removed.
local removed = {}
for _, consumer in ipairs(redis.call('XINFO', 'CONSUMERS', KEYS[1], ARGV[1])) do
  local info = {}
  for i = 1, #consumer, 2 do
    info[consumer[i]] = consumer[i + 1]
  end
  if info['pending'] == 0 and info['idle'] >= tonumber(ARGV[2]) and info['name'] ~= ARGV[3] then
    redis.call('XGROUP', 'DELCONSUMER', KEYS[1], ARGV[1], info['name'])
    removed[#removed + 1] = info['name']
  end
end
return removed
