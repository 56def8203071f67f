"""The delivery mechanism every network sink shares: queue -> batch -> spool -> retry -> push.

A sink module only encodes a batch and classifies the server's answer
(:mod:`.outcome`); everything that loops, sleeps, waits or touches the disk is
here, so each sink gets the same guarantees:

- :mod:`.segment`, :mod:`.spool_writer`, :mod:`.spool_reader`, :mod:`.spool`:
  the durable per-sink spool (append-only segment files, checksummed records,
  an acknowledgement ledger).
- :mod:`.retry`: tenacity retry with exponential backoff, jitter and ``Retry-After``;
  :mod:`.progress` logs a long replay.
- :mod:`.queued`: the per-sink worker threads (batcher and sender) and
  :class:`~falcon_gpu.delivery.queued.QueuedSink`, the base class of the
  durable sinks (Open-Falcon agent, transfer, remote_write).
- :mod:`.latest`: latest-state delivery for Pushgateway (no backlog).
- :mod:`.http`, :mod:`.secrets`: the shared HTTP transport (TLS, auth, headers)
  and secret files re-read on rotation, scrubbed from anything logged;
  :mod:`.deadline` makes ``timeout`` bound a whole request.
- :mod:`.headers`, :mod:`.tls`: what the settings check at start so that a header
  or TLS file that cannot work exits 2 instead of failing every batch.
"""
