package fabricmetrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ferryrdma/ferry/fabric"
)

// namespace prefixes every metric name.
const namespace = "ferry"

// engineMetric is one engine-wide number of fabric.Stats. Adding a field
// to Stats means adding a line to engineMetrics.
type engineMetric struct {
	field      string // the Stats field it reads
	name, help string
	kind       prometheus.ValueType
	value      func(*fabric.Stats) float64
}

var engineMetrics = []engineMetric{
	{"Completed", "transfers_completed_total", "Transfers that completed successfully.", prometheus.CounterValue,
		func(s *fabric.Stats) float64 { return float64(s.Completed) }},
	{"Failed", "transfers_failed_total", "Transfers that failed (an error completion, a refused post, a closed engine).",
		prometheus.CounterValue, func(s *fabric.Stats) float64 { return float64(s.Failed) }},
	{"Expired", "transfers_expired_total",
		"Failed transfers that ended at their deadline or by their context (timeouts); part of transfers_failed_total.",
		prometheus.CounterValue, func(s *fabric.Stats) float64 { return float64(s.Expired) }},
	{"Late", "completions_late_total",
		"Completions that came back for operations already given up on (their peer was lost); absorbed.",
		prometheus.CounterValue, func(s *fabric.Stats) float64 { return float64(s.Late) }},
	{"Unmatched", "completions_unmatched_total",
		"Error completions that named no operation; each triggers a peer check.",
		prometheus.CounterValue, func(s *fabric.Stats) float64 { return float64(s.Unmatched) }},
	{"PeersLost", "peers_lost_total", "Peers declared lost (per NIC address and loss).",
		prometheus.CounterValue, func(s *fabric.Stats) float64 { return float64(s.PeersLost) }},
	{"Unclaimed", "immediates_unclaimed", "Immediates held now because no counter or callback claimed them yet.",
		prometheus.GaugeValue, func(s *fabric.Stats) float64 { return float64(s.Unclaimed) }},
	{"ImmsDropped", "immediates_dropped_total", "Immediates dropped because their lease-range value was not leased (a retired lease's late writes).",
		prometheus.CounterValue, func(s *fabric.Stats) float64 { return float64(s.ImmsDropped) }},
	{"NotificationsDropped", "notifications_dropped_total", "Notifications lost at this target (overwritten in a mailbox by a second sender, or a lease's queue full), each reported to WaitNotification.",
		prometheus.CounterValue, func(s *fabric.Stats) float64 { return float64(s.NotificationsDropped) }},
}

// nicMetric is one per-NIC number of fabric.DomainSnapshot. Adding a
// field to DomainSnapshot means adding a line to nicMetrics.
type nicMetric struct {
	field      string // the DomainSnapshot field it reads
	name, help string
	kind       prometheus.ValueType
	value      func(*fabric.DomainSnapshot) float64
}

var nicMetrics = []nicMetric{
	{"Posted", "nic_ops_posted_total", "Write, send and receive operations the NIC accepted.", prometheus.CounterValue,
		func(d *fabric.DomainSnapshot) float64 { return float64(d.Posted) }},
	{"Bytes", "nic_bytes_total", "Bytes written and sent through the NIC.", prometheus.CounterValue,
		func(d *fabric.DomainSnapshot) float64 { return float64(d.Bytes) }},
	{"Completions", "nic_completions_total", "Completions reaped from the NIC (local operations and immediates).",
		prometheus.CounterValue, func(d *fabric.DomainSnapshot) float64 { return float64(d.Completions) }},
	{"Errors", "nic_errors_total", "Error completions and refused posts on the NIC.", prometheus.CounterValue,
		func(d *fabric.DomainSnapshot) float64 { return float64(d.Errors) }},
	{"Imms", "nic_immediates_received_total", "Immediates received by the NIC.", prometheus.CounterValue,
		func(d *fabric.DomainSnapshot) float64 { return float64(d.Imms) }},
	{"InFlight", "nic_ops_in_flight", "Operations posted to the NIC and not completed yet: its queue depth now.",
		prometheus.GaugeValue, func(d *fabric.DomainSnapshot) float64 { return float64(d.InFlight) }},
	{"Peers", "nic_peers", "Peer addresses the NIC has resolved (Engine.Connect or the first operation to each).",
		prometheus.GaugeValue, func(d *fabric.DomainSnapshot) float64 { return float64(d.Peers) }},
}

// nicLabels name a NIC: its group's device, its name and its index.
var nicLabels = []string{"device", "nic", "index"}

func labelsOf(d *fabric.DomainSnapshot) []string {
	return []string{d.Device.String(), d.Name, strconv.Itoa(d.Index)}
}
