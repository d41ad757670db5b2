"""Production mode's coordination store on Redis: its keys (`keys`), the compare-and-set store
(`store`, `cas.lua`), the cross-replica watch feed (`feed`) and the outbox that the projector
copies into the SQL ledger (`outbox`, `projector`)."""
