package sysreport

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/ferryrdma/ferry/fabric/topology"
)

// WriteText prints the report for a terminal, in one screen on a host with
// eight GPUs. It returns the first write error.
func (r *Report) WriteText(w io.Writer) error {
	ew := &errWriter{w: w}
	p := func(format string, args ...any) { fmt.Fprintf(ew, format+"\n", args...) }

	p("ferry system report: %s, kernel %s, %s", r.Hostname, orDash(r.Kernel), r.Platform)
	p("")
	lf := r.Libfabric
	switch {
	case !lf.Linked:
		p("libfabric: %s", lf.Error)
	case lf.Error != "":
		p("libfabric %s: %s", orDash(lf.Version), lf.Error)
	default:
		api := ""
		if lf.API != "" {
			api = " (API " + lf.API + " asked for)"
		}
		p("libfabric %s%s: transports %s", orDash(lf.Version), api, orNone(lf.Transports))
		p("  usable over loopback: %s", orNone(lf.Loopback))
	}
	if len(r.Verbs) == 0 {
		p("verbs devices: none%s", paren(r.VerbsError))
	} else {
		p("verbs devices (%d):", len(r.Verbs))
		writeVerbs(r.Verbs, p)
	}
	if r.GPUError != "" {
		p("gpus: %s", r.GPUError)
	}
	p("")
	r.writeGroups(ew, p)
	p("")
	p("capabilities:")
	tw := tabwriter.NewWriter(ew, 0, 4, 2, ' ', 0)
	for _, c := range r.Capabilities {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", c.Name, c.Status, c.Detail)
	}
	tw.Flush()
	if r.PtraceScope >= 0 {
		p("  (ptrace_scope %d, CAP_SYS_PTRACE %v)", r.PtraceScope, r.CapSysPtrace)
	}
	p("")
	if r.Auto.Refused {
		p("auto: refuses: %s", r.Auto.Error)
		p("  %s", r.Auto.Hint)
	} else {
		p("auto: %s (%d domain(s)): %s", r.Auto.Transport, r.Auto.Domains, r.Auto.Reason)
	}
	if len(r.Warnings) > 0 {
		p("")
		p("warnings:")
		for _, wn := range r.Warnings {
			p("  ! %s: %s", wn.Code, wn.Message)
		}
	}
	return ew.err
}

func (r *Report) writeGroups(w io.Writer, p func(string, ...any)) {
	t := r.Topology
	if t == nil {
		p("groups: unknown (%s)", r.TopologyError)
		return
	}
	p("groups (GPUs from %s, NICs from %s; %d NUMA node(s), %d physical cores, %d CPUs):",
		t.GPUSource, t.NICSource, t.NUMANodes, t.PhysicalCores, t.LogicalCPUs)
	for _, g := range t.Groups {
		head := g.DeviceName()
		if !g.IsHost() {
			head += " " + g.GPUName + " " + g.PCIAddress
		}
		p("  %s  numa %s  cpus %s", head, numa(g.NUMANode), CPUList(g.CPUs))
		var nics []string
		for _, n := range g.NICs {
			nics = append(nics, nicText(n))
		}
		shared := ""
		if g.SharedNICs {
			shared = " (shared with other GPUs)"
		}
		if len(nics) == 0 {
			p("      nics: none")
		} else {
			p("      nics%s: %s", shared, strings.Join(nics, ", "))
		}
	}
}

func nicText(n topology.NIC) string {
	if n.Loopback {
		return n.Name + " (" + n.Transport + ")"
	}
	return fmt.Sprintf("%s (%s)", n.Name, speed(n.LinkSpeed))
}

// writeVerbs prints one line per port, or, on hosts with many NICs, one
// line per kind of port (state, speed, link layer) naming the first and
// last device, so that 32 EFA devices take one line.
func writeVerbs(ds []VerbsDevice, p func(string, ...any)) {
	type portKind struct {
		state, layer string
		speed        uint64
	}
	var order []portKind
	names := map[portKind][]string{}
	for _, d := range ds {
		if len(d.Ports) == 0 {
			p("  %s %s: no ports", d.Name, d.PCIAddress)
		}
		for _, port := range d.Ports {
			if len(ds) <= 8 {
				gids := ""
				if len(port.GIDs) > 0 {
					gids = "  gid " + port.GIDs[0]
					if len(port.GIDs) > 1 {
						gids += fmt.Sprintf(" (+%d)", len(port.GIDs)-1)
					}
				}
				p("  %-12s %-13s port %d %-6s %s%s", d.Name, d.PCIAddress, port.Number, port.State, speed(port.LinkSpeed), gids)
				continue
			}
			k := portKind{port.State, port.LinkLayer, port.LinkSpeed}
			if names[k] == nil {
				order = append(order, k)
			}
			names[k] = append(names[k], fmt.Sprintf("%s/%d", d.Name, port.Number))
		}
	}
	for _, k := range order {
		n := names[k]
		span := n[0]
		if len(n) > 1 {
			span += " .. " + n[len(n)-1]
		}
		what := strings.Join(strings.Fields(k.state+" "+k.layer), " ")
		p("  %d port(s) %s %s: %s", len(n), what, speed(k.speed), span)
	}
}

// CPUList formats CPUs as the kernel does: "0-11,24-35".
func CPUList(cpus []int) string {
	if len(cpus) == 0 {
		return "none"
	}
	var parts []string
	for i := 0; i < len(cpus); {
		j := i
		for j+1 < len(cpus) && cpus[j+1] == cpus[j]+1 {
			j++
		}
		if j == i {
			parts = append(parts, strconv.Itoa(cpus[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", cpus[i], cpus[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}

func speed(bps uint64) string {
	if bps == 0 {
		return "speed unknown"
	}
	return strconv.FormatFloat(float64(bps)/1e9, 'f', -1, 64) + " Gb/s"
}

func numa(n int) string {
	if n < 0 {
		return "?"
	}
	return strconv.Itoa(n)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

func paren(s string) string {
	if s == "" {
		return ""
	}
	return " (" + s + ")"
}

type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(b []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(b)
	e.err = err
	return n, err
}
