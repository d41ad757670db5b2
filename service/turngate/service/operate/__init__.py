"""The operator commands of `turngate`, built on the SDK (`turngate.client`):

    turngate status SESSION                       phase, active turn, last settled turn, queue
    turngate watch SESSION [--after SEQ] [--turn TURN]
    turngate stop SESSION [--expect TURN] [--force | --wait SECONDS] [--reason TEXT] [--request-id ID]
                  [--queue pause|continue|clear]
    turngate queue show SESSION                   waiting turns, head first; whether the queue is paused
    turngate queue resume SESSION [--request-id ID]
    turngate queue clear SESSION [--reason TEXT]  cancels the waiting turns; the active one runs on
    turngate turn show TURN --session SESSION     with its tool calls and interactions
    turngate turn list SESSION [--limit N]
    turngate sessions list [--limit N]            sessions busy or idle, the most recently active first
    turngate sessions busy [--limit N]            sessions with an active turn, earliest deadline first
    turngate sessions projects [--limit N]        the projects the token may see that have sessions
    turngate health [--service NAME]              gRPC health; exit 0 only on SERVING
    turngate token session SESSION [--stop] [--ttl DURATION]
                                                  mint a session token for a web page (a gateway's call)

Each takes `--target HOST:PORT` (TURNGATE_TARGET), `--project ID` (TURNGATE_PROJECT),
`--timeout SECONDS` (TURNGATE_TIMEOUT) and `--json`; a bearer token by `--token-file FILE`
(TURNGATE_TOKEN_FILE) or `--token TOKEN` (TURNGATE_TOKEN); TLS by `--tls-ca FILE`
(TURNGATE_TLS_CA), and a client certificate for mutual TLS by `--tls-cert FILE --tls-key FILE`
(TURNGATE_CLIENT_CERT, TURNGATE_CLIENT_KEY). Exit codes: `exits.ExitCode`.
"""

from turngate.service.operate.exits import EPILOG, ExitCode
from turngate.service.operate.operations import run
from turngate.service.operate.options import COMMANDS, add_commands, add_session_token

__all__ = ["COMMANDS", "EPILOG", "ExitCode", "add_commands", "add_session_token", "run"]
