-- A session's document and the events of its log the ledger has not recorded yet, read together
-- (the projector's acknowledgement, outbox_ack.lua, raises the document's `ledger` mark).
--
-- KEYS: 1 doc hash, 2 session log stream
-- Returns {document or nil, log entries after the mark}.
local found = redis.call('HMGET', KEYS[1], 'doc', 'ledger')
local recorded = tonumber(found[2] or '0')
return {found[1], redis.call('XRANGE', KEYS[2], (recorded + 1) .. '-0', '+')}
