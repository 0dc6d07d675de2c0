package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/ferryrdma/ferry/fabric/job"
)

// opGroup is one kind and size of op in one mode. Sizes are bucketed: an
// op of b bytes counts under the smallest -sizes entry at least b (results
// of reductions and shards are smaller than what was created).
type opGroup struct {
	Kind  string      `json:"kind"`
	Bytes int         `json:"bytes_at_most"`
	Mode  string      `json:"mode"`
	Took  job.Summary `json:"latency"`
}

type modeSummary struct {
	Mode     string        `json:"mode"`
	Ops      int           `json:"ops"`
	Wall     float64       `json:"wall_s"`
	OpsPerS  float64       `json:"ops_per_s"`
	Took     job.Summary   `json:"latency"`
	Dispatch dispatchStats `json:"dispatcher"`
	Clients  []job.Summary `json:"clients"`
	Jain     float64       `json:"fairness"` // Jain's index of the clients' throughputs
}

type results struct {
	Groups  []opGroup     `json:"by_kind_and_size"`
	Modes   []modeSummary `json:"modes"`
	Speedup []speedup     `json:"direct_over_relay,omitempty"`
}

type speedup struct {
	Kind  string  `json:"kind"`
	Bytes int     `json:"bytes_at_most"`
	X     float64 `json:"x"` // relay p50 / direct p50
}

func report(ctx context.Context, r *job.Rank, c config, mine outcome) error {
	all, err := job.Gather(ctx, r, mine)
	if err != nil || r.ID != 0 {
		return err
	}
	cl := all[c.Workers+1]
	var res results
	p50 := map[string]map[opKey]float64{}
	count := map[string]map[opKey]int{}
	for i, mode := range c.Modes {
		ops := cl.Ops[i]
		groups := map[opKey][]time.Duration{}
		perClient := make([][]time.Duration, c.Clients)
		var every []time.Duration
		for _, o := range ops {
			if o.Kind == "free" {
				continue // bookkeeping only: no worker is involved
			}
			k := opKey{o.Kind, bucket(c.Sizes, o.Bytes)}
			groups[k] = append(groups[k], o.Took)
			perClient[o.Client] = append(perClient[o.Client], o.Took)
			every = append(every, o.Took)
		}
		p50[mode], count[mode] = map[opKey]float64{}, map[opKey]int{}
		for k, d := range groups {
			g := opGroup{Kind: k.kind, Bytes: k.bytes, Mode: mode, Took: job.Summarize(d)}
			res.Groups = append(res.Groups, g)
			p50[mode][k], count[mode][k] = g.Took.P50, g.Took.N
		}
		m := modeSummary{Mode: mode, Ops: len(every), Wall: cl.Wall[i].Seconds(), Took: job.Summarize(every), Dispatch: all[0].Dispatch[i]}
		m.OpsPerS = float64(m.Ops) / m.Wall
		var sum, sq float64
		for _, d := range perClient {
			s := job.Summarize(d)
			m.Clients = append(m.Clients, s)
			tput := float64(s.N) / (s.Mean * float64(s.N)) // ops per microsecond busy
			sum, sq = sum+tput, sq+tput*tput
		}
		m.Jain = sum * sum / (float64(len(perClient)) * sq)
		res.Modes = append(res.Modes, m)
	}
	slices.SortFunc(res.Groups, func(a, b opGroup) int {
		if a.Kind != b.Kind {
			return order(a.Kind) - order(b.Kind)
		}
		return a.Bytes - b.Bytes
	})

	w := r.Out
	fmt.Fprintf(w, "%d workers, %d clients x %d ops per mode, sizes %v; p50 latency of each op as its client saw it, and how many ran\n",
		c.Workers, c.Clients, c.Ops, sizeList(c.Sizes))
	headers := []string{"op", "size"}
	for _, m := range c.Modes {
		headers = append(headers, m+" ms", "n")
	}
	if len(c.Modes) == 2 {
		headers = append(headers, "direct/relay speedup")
	}
	t := job.NewTable(w, headers...)
	seen := map[opKey]bool{}
	for _, g := range res.Groups {
		k := opKey{g.Kind, g.Bytes}
		if seen[k] {
			continue
		}
		seen[k] = true
		row := []string{g.Kind, "<= " + job.FormatSize(int64(g.Bytes))}
		for _, mode := range c.Modes {
			row = append(row, cell(p50[mode], k), fmt.Sprint(count[mode][k]))
		}
		if len(c.Modes) == 2 {
			rel, okR := p50["relay"][k]
			dir, okD := p50["direct"][k]
			if okR && okD && dir > 0 {
				res.Speedup = append(res.Speedup, speedup{k.kind, k.bytes, rel / dir})
				row = append(row, fmt.Sprintf("%.2fx", rel/dir))
			} else {
				row = append(row, "-")
			}
		}
		t.Row(row...)
	}
	_ = t.Flush()
	fmt.Fprintln(w)
	t = job.NewTable(w, "mode", "ops", "ops/s", "p50 ms", "p99 ms", "tensor bytes via dispatcher", "control bytes", "client p99 ms (each)", "fairness")
	for _, m := range res.Modes {
		var each string
		for i, s := range m.Clients {
			if i > 0 {
				each += " "
			}
			each += fmt.Sprintf("%.1f", s.P99/1e3)
		}
		t.Row(m.Mode, fmt.Sprint(m.Ops), fmt.Sprintf("%.0f", m.OpsPerS), fmt.Sprintf("%.2f", m.Took.P50/1e3), fmt.Sprintf("%.2f", m.Took.P99/1e3),
			job.FormatSize(m.Dispatch.DataBytes), job.FormatSize(m.Dispatch.ControlBytes), each, fmt.Sprintf("%.3f", m.Jain))
	}
	_ = t.Flush()
	fmt.Fprintln(w, "fairness: Jain's index of the clients' throughputs (1 = equal); every result checksummed against the client's copy")
	return r.Emit(program, c, res)
}

// bucket is the smallest configured size of at least n bytes.
func bucket(sizes []int, n int) int {
	best := slices.Max(sizes)
	for _, s := range sizes {
		if s >= n && s < best {
			best = s
		}
	}
	return best
}

func order(kind string) int {
	return slices.Index([]string{"create", "move", "add", "matmul-allgather", "sum-reduce"}, kind)
}

// opKey groups ops by kind and size.
type opKey struct {
	kind  string
	bytes int
}

func cell(m map[opKey]float64, k opKey) string {
	v, ok := m[k]
	if !ok {
		return "-"
	}
	return fmt.Sprintf("%.2f", v/1e3)
}

func sizeList(s []int) []string {
	var out []string
	for _, n := range s {
		out = append(out, job.FormatSize(int64(n)))
	}
	return out
}
