package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// fdCase is one row of fabric-debug's JSON output, in the names of either
// format: the per-line records of today (gbit_s, mop_s, lat_us.p50) or the
// single document of earlier builds (gbps, mops, lat_us_p50).
type fdCase struct {
	Workload string
	Bytes    int64
	Pages    int
	Gbits    float64
	Mops     float64
	P50us    float64
	Verified bool
	Checked  bool
}

// fdReport is what one fabric-debug run printed: its cases and the poll
// mode its header names.
type fdReport struct {
	Poll  string
	Cases []fdCase
}

// parseFabricDebug reads fabric-debug's --json output: either one JSON
// document {"header": {...}, "cases": [...]} or a stream of records
// {"type": "begin" | "case" | "end", ...}.
func parseFabricDebug(r io.Reader) (fdReport, error) {
	var rep fdReport
	dec := json.NewDecoder(r)
	records := 0
	for {
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return rep, fmt.Errorf("parse fabric-debug json: %w", err)
		}
		records++
		var probe struct {
			Type  string          `json:"type"`
			Cases json.RawMessage `json:"cases"`
		}
		if err := json.Unmarshal(raw, &probe); err != nil {
			return rep, fmt.Errorf("parse fabric-debug json: %w", err)
		}
		if probe.Type == "" && probe.Cases != nil {
			// The single document of earlier builds.
			var doc struct {
				Header struct {
					Poll string `json:"poll"`
				} `json:"header"`
				Cases []struct {
					Workload string  `json:"workload"`
					Bytes    int64   `json:"bytes"`
					Pages    int     `json:"pages"`
					Gbps     float64 `json:"gbps"`
					Mops     float64 `json:"mops"`
					P50      float64 `json:"lat_us_p50"`
					Verify   bool    `json:"verify"`
					Verified bool    `json:"verified"`
				} `json:"cases"`
			}
			if err := json.Unmarshal(raw, &doc); err != nil {
				return rep, fmt.Errorf("parse fabric-debug json document: %w", err)
			}
			rep.Poll = doc.Header.Poll
			for _, c := range doc.Cases {
				rep.Cases = append(rep.Cases, fdCase{Workload: c.Workload, Bytes: c.Bytes, Pages: c.Pages,
					Gbits: c.Gbps, Mops: c.Mops, P50us: c.P50, Checked: c.Verify, Verified: c.Verified})
			}
			continue
		}
		switch probe.Type {
		case "begin":
			var b struct {
				Setup struct {
					Poll string `json:"poll"`
				} `json:"setup"`
			}
			if err := json.Unmarshal(raw, &b); err != nil {
				return rep, fmt.Errorf("parse fabric-debug begin record: %w", err)
			}
			rep.Poll = b.Setup.Poll
		case "case":
			var c struct {
				Workload string  `json:"workload"`
				Bytes    int64   `json:"bytes"`
				Pages    int     `json:"pages"`
				Gbits    float64 `json:"gbit_s"`
				Mops     float64 `json:"mop_s"`
				Checked  bool    `json:"checked"`
				Verified bool    `json:"verified"`
				Error    string  `json:"error"`
				Lat      struct {
					P50 float64 `json:"p50"`
				} `json:"lat_us"`
			}
			if err := json.Unmarshal(raw, &c); err != nil {
				return rep, fmt.Errorf("parse fabric-debug case record: %w", err)
			}
			if c.Error != "" {
				return rep, fmt.Errorf("fabric-debug case %s %d B failed: %s", c.Workload, c.Bytes, c.Error)
			}
			rep.Cases = append(rep.Cases, fdCase{Workload: c.Workload, Bytes: c.Bytes, Pages: c.Pages,
				Gbits: c.Gbits, Mops: c.Mops, P50us: c.Lat.P50, Checked: c.Checked, Verified: c.Verified})
		}
	}
	if records == 0 {
		return rep, errors.New("parse fabric-debug json: no output")
	}
	return rep, nil
}

// find returns the case of the given workload and size.
func (r fdReport) find(workload string, size int64) (fdCase, error) {
	for _, c := range r.Cases {
		if c.Workload == workload && c.Bytes == size {
			if c.Checked && !c.Verified {
				return c, fmt.Errorf("fabric-debug case %s %d B: verification failed", workload, size)
			}
			return c, nil
		}
	}
	return fdCase{}, fmt.Errorf("fabric-debug printed no %s case of %d B", workload, size)
}

// parseA2A reads bench-a2a's --json output, the p50 step of each phase in
// µs: records {"type": "case", "phase": ..., "lat_us": {"p50": ...}} one a
// line, or the single document of earlier builds, {"dispatch": {"both":
// {"p50": ...}}, "combine": ...}.
func parseA2A(r io.Reader) (map[string]float64, error) {
	out := map[string]float64{}
	dec := json.NewDecoder(r)
	for {
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("parse bench-a2a json: %w", err)
		}
		var probe struct {
			Type     string          `json:"type"`
			Dispatch json.RawMessage `json:"dispatch"`
		}
		if err := json.Unmarshal(raw, &probe); err != nil {
			return nil, fmt.Errorf("parse bench-a2a json: %w", err)
		}
		if probe.Type == "" && probe.Dispatch != nil {
			type phase struct {
				Both struct {
					P50 float64 `json:"p50"`
				} `json:"both"`
			}
			var doc struct {
				Dispatch *phase `json:"dispatch"`
				Combine  *phase `json:"combine"`
			}
			if err := json.Unmarshal(raw, &doc); err != nil {
				return nil, fmt.Errorf("parse bench-a2a json document: %w", err)
			}
			if doc.Dispatch != nil {
				out["dispatch p50"] = doc.Dispatch.Both.P50
			}
			if doc.Combine != nil {
				out["combine p50"] = doc.Combine.Both.P50
			}
			continue
		}
		if probe.Type != "case" {
			continue
		}
		var c struct {
			Phase    string `json:"phase"`
			Checked  bool   `json:"checked"`
			Verified bool   `json:"verified"`
			Lat      struct {
				P50 float64 `json:"p50"`
			} `json:"lat_us"`
		}
		if err := json.Unmarshal(raw, &c); err != nil {
			return nil, fmt.Errorf("parse bench-a2a case record: %w", err)
		}
		if c.Checked && !c.Verified {
			return nil, fmt.Errorf("bench-a2a %s: verification failed", c.Phase)
		}
		out[c.Phase+" p50"] = c.Lat.P50
	}
	if len(out) == 0 {
		return nil, errors.New("parse bench-a2a json: no case records")
	}
	return out, nil
}

// benchLine matches a result line of go test -bench: the name (without
// the -GOMAXPROCS suffix), the iteration count, then value-unit pairs.
var benchLine = regexp.MustCompile(`^Benchmark(\S+?)(?:-\d+)?\s+(\d+)\s+(.*)$`)

// goBench is one benchmark's figures, by unit (ns/op, allocs/op, ...).
type goBench map[string]float64

// parseGoBench reads go test -bench output into figures per benchmark
// name (Benchmark prefix and -P suffix dropped).
func parseGoBench(r io.Reader) (map[string]goBench, error) {
	out := map[string]goBench{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		m := benchLine.FindStringSubmatch(strings.TrimSpace(sc.Text()))
		if m == nil {
			continue
		}
		f := strings.Fields(m[3])
		if len(f) < 2 || len(f)%2 != 0 {
			continue
		}
		g := goBench{}
		for i := 0; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return nil, fmt.Errorf("parse go bench line %q: %w", sc.Text(), err)
			}
			g[f[i+1]] = v
		}
		out[m[1]] = g
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, errors.New("parse go bench output: no benchmark lines")
	}
	return out, nil
}

// stats are the median, min and max of a sample.
type stats struct {
	N                int
	Median, Min, Max float64
}

func summarize(v []float64) stats {
	if len(v) == 0 {
		return stats{}
	}
	s := slices.Clone(v)
	slices.Sort(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return stats{N: len(s), Median: med, Min: s[0], Max: s[len(s)-1]}
}

// lastLine is the last non-empty line of a command's output, for a
// one-line reason.
func lastLine(b []byte) string {
	lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
	return strings.TrimSpace(string(lines[len(lines)-1]))
}
