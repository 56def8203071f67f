"""The delivery mechanism every network sink shares: queue -> batch -> spool -> retry -> push.

A sink supplies a pusher (:mod:`.pusher`: encode, push, classify the server's
answer with :mod:`.outcome`) and is composed with one of the two paths here;
everything that loops, sleeps, waits, counts or touches the disk is here, so
each sink gets the same guarantees. This package imports nothing from
:mod:`falcon_gpu.sinks` (the settings it reads are protocols, :mod:`.settings`):

- :mod:`.segment`, :mod:`.spool_writer`, :mod:`.spool_reader`, :mod:`.spool`:
  the durable per-sink spool (append-only segment files, checksummed records,
  an acknowledgement ledger).
- :mod:`.retry`: tenacity retry with exponential backoff, jitter and ``Retry-After``;
  :mod:`.progress` logs a long replay.
- :mod:`.queued`: :class:`~falcon_gpu.delivery.queued.QueuedDelivery`, the per-sink
  worker threads (batcher and sender) of the durable sinks (Open-Falcon agent,
  transfer, remote_write).
- :mod:`.latest`: :class:`~falcon_gpu.delivery.latest.LatestDelivery`, latest-state
  delivery for Pushgateway (no backlog).
- :mod:`.settle`: the one stage both paths push, retry and count through;
  :mod:`.state`: their explicit state ("server down since", "spool unwritable
  since"), which decides how a shutdown waits (never the telemetry's log keys).
- :mod:`.http`, :mod:`.secrets`: the shared HTTP transport (TLS, auth, headers)
  and secret files re-read on rotation, scrubbed from anything logged;
  :mod:`.deadline` makes ``timeout`` bound a whole request.
- :mod:`.headers`, :mod:`.tls`: what the settings check at start so that a header
  or TLS file that cannot work exits 2 instead of failing every batch.
"""
