// Package fabricmetrics exports a TransferEngine's counters as Prometheus
// metrics. It lives apart from package fabric so the engine itself does
// not depend on Prometheus: only programs that import this package link
// the client library.
//
// A [Collector] reads Engine.Stats, Engine.Info and, for engines,
// Engine.TransferHistograms once per scrape (a
// handful of atomic loads per NIC; nothing is added to the transfer path)
// and reports, under the "ferry" namespace:
//
//   - transfers that completed, failed, and failed at their deadline
//     (timeouts); completions that came late for abandoned operations or
//     named none; peers declared lost; immediates held with no counter to
//     claim them;
//   - per NIC (labels device, nic, index): operations posted, bytes
//     written and sent, completions, error completions and refused posts,
//     immediates received, operations in flight (the queue depth), peer
//     addresses resolved and the link speed;
//   - histograms of the transfers that succeeded, per transport and kind
//     (labels transport, op: single, paged, scatter, imm, barrier, send):
//     ferry_transfer_latency_seconds (power-of-two buckets from about
//     1 µs to 8.6 s) and ferry_transfer_size_bytes (1 B to 2 GiB), from
//     Engine.TransferHistograms (the workers count into their own buckets;
//     a scrape adds them up);
//   - ferry_engine_info{provider, transport, poll} = 1;
//   - ferry_library_info{library, version, api} = 1 for providers on a
//     native library: for libfabric, the version loaded and the API
//     version (FI_VERSION) ferry asks it for.
//
// Register one Collector per engine; when one registry serves several
// engines, give each the same label names with distinct values
// (Options.ConstLabels, for example engine="client" and engine="server"). Every number a Stats field adds is exported
// through the tables in metrics.go, one line per field, and a test fails
// when a numeric field of fabric.Stats or fabric.DomainSnapshot has no
// metric.
//
// Alerting starting points: rate(ferry_transfers_failed_total[5m]) > 0;
// increase(ferry_peers_lost_total[5m]) > 0; rate(ferry_transfers_expired_total[5m]);
// rate(ferry_nic_errors_total[5m]) by nic; ferry_nic_ops_in_flight near
// the engine's QueueDepth for minutes (a stuck peer or NIC);
// ferry_immediates_unclaimed growing (immediates nobody waits for).
package fabricmetrics
