package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The single JSON document fabric-debug wrote before its per-line records.
const fdDocument = `{
  "header": {"tool": "fabric-debug", "provider": "null", "poll": "adaptive"},
  "cases": [
    {"workload": "paged", "bytes": 64, "pages": 10000, "lat_us_p50": 535.4, "gbps": 9.6, "mops": 18.75, "verify": false, "verified": false},
    {"workload": "single", "bytes": 67108864, "pages": 0, "lat_us_p50": 30000, "gbps": 17.4, "mops": 0.00003, "verify": true, "verified": true}
  ]
}
`

// The per-line records of today's fabric-debug, one case failing its
// verification.
const fdRecords = `{"type":"begin","tool":"fabric-debug","setup":{"mode":"loopback","provider":"shm","poll":"spin"}}
{"type":"case","workload":"paged","bytes":64,"pages":10000,"iters":100,"lat_us":{"n":100,"p50":553.5},"checked":true,"verified":true,"gbit_s":6.56,"mop_s":12.81}
{"type":"case","workload":"single","bytes":1024,"pages":0,"lat_us":{"p50":3.5},"checked":true,"verified":false,"gbit_s":1.5,"mop_s":0.2}
{"type":"end","cases":2,"verified":1,"failed":1,"seconds":0.13}
`

func TestParseFabricDebugDocument(t *testing.T) {
	rep, err := parseFabricDebug(strings.NewReader(fdDocument))
	require.NoError(t, err)
	require.Equal(t, "adaptive", rep.Poll)
	c, err := rep.find("paged", 64)
	require.NoError(t, err)
	require.Equal(t, 18.75, c.Mops)
	require.Equal(t, 535.4, c.P50us)
	c, err = rep.find("single", 64<<20)
	require.NoError(t, err)
	require.Equal(t, 17.4, c.Gbits)
	_, err = rep.find("imm", 8)
	require.ErrorContains(t, err, "no imm case")
}

func TestParseFabricDebugRecords(t *testing.T) {
	rep, err := parseFabricDebug(strings.NewReader(fdRecords))
	require.NoError(t, err)
	require.Equal(t, "spin", rep.Poll)
	c, err := rep.find("paged", 64)
	require.NoError(t, err)
	require.Equal(t, 12.81, c.Mops)
	require.Equal(t, 553.5, c.P50us)
	_, err = rep.find("single", 1024)
	require.ErrorContains(t, err, "verification failed")

	_, err = parseFabricDebug(strings.NewReader(""))
	require.ErrorContains(t, err, "no output")
	_, err = parseFabricDebug(strings.NewReader("# a table, not json\n"))
	require.Error(t, err)
	_, err = parseFabricDebug(strings.NewReader(`{"type":"case","workload":"paged","bytes":64,"error":"write: peer lost"}`))
	require.ErrorContains(t, err, "peer lost")
}

func TestParseA2A(t *testing.T) {
	lines := `{"type":"begin","tool":"bench-a2a"}
{"type":"case","tokens":128,"phase":"dispatch","lat_us":{"p50":7059.2},"checked":true,"verified":true}
{"type":"case","tokens":128,"phase":"combine","lat_us":{"p50":25071.7},"checked":true,"verified":true}
{"type":"end","cases":2,"verified":2,"failed":0}
`
	m, err := parseA2A(strings.NewReader(lines))
	require.NoError(t, err)
	require.Equal(t, map[string]float64{"dispatch p50": 7059.2, "combine p50": 25071.7}, m)

	doc := `{"world_size": 2, "dispatch": {"both": {"p50": 8408.7}, "send": {"p50": 1}}, "combine": {"both": {"p50": 30000}}}`
	m, err = parseA2A(strings.NewReader(doc))
	require.NoError(t, err)
	require.Equal(t, map[string]float64{"dispatch p50": 8408.7, "combine p50": 30000}, m)

	bad := `{"type":"case","phase":"combine","lat_us":{"p50":1},"checked":true,"verified":false}`
	_, err = parseA2A(strings.NewReader(bad))
	require.ErrorContains(t, err, "verification failed")
	_, err = parseA2A(strings.NewReader(`{"type":"end"}`))
	require.ErrorContains(t, err, "no case records")
}

func TestParseGoBench(t *testing.T) {
	out := `goos: linux
goarch: amd64
pkg: github.com/ferryrdma/ferry/fabric
cpu: some CPU
BenchmarkNullPaged/pages=100-2         	  190834	      6058 ns/op	        16.51 Mops/s	        60.58 ns/page	       0 B/op	       0 allocs/op
BenchmarkNullImm-2                     	12345678	        91.54 ns/op	        10.9 Mtransfers/s	       0 B/op	       0 allocs/op
BenchmarkNoProcs	100	5 ns/op
PASS
`
	bs, err := parseGoBench(strings.NewReader(out))
	require.NoError(t, err)
	require.Len(t, bs, 3)
	require.Equal(t, 6058.0, bs["NullPaged/pages=100"]["ns/op"])
	require.Equal(t, 0.0, bs["NullPaged/pages=100"]["allocs/op"])
	require.Equal(t, 91.54, bs["NullImm"]["ns/op"])
	require.Equal(t, 5.0, bs["NoProcs"]["ns/op"])
	_, err = parseGoBench(strings.NewReader("PASS\n"))
	require.ErrorContains(t, err, "no benchmark lines")
}

func TestSummarize(t *testing.T) {
	require.Equal(t, stats{N: 3, Median: 2, Min: 1, Max: 5}, summarize([]float64{5, 1, 2}))
	require.Equal(t, stats{N: 4, Median: 2.5, Min: 1, Max: 9}, summarize([]float64{9, 3, 1, 2}))
	require.Equal(t, stats{}, summarize(nil))
}

func TestTable(t *testing.T) {
	rows := map[string]*row{
		"tcp-64M\x00p50 Gbit/s":     {Case: "tcp", Metric: "p50 Gbit/s", Base: []float64{10, 20, 30}, New: []float64{15, 25, 35}, Paired: []float64{1.5, 1.25, 35.0 / 30}},
		"tcp-64M-raw\x00p50 Gbit/s": {Case: "tcp raw", Metric: "p50 Gbit/s", Base: []float64{40}, New: []float64{25}},
		"ipc\x00Mop/s":              {Case: "ipc", Metric: "Mop/s", New: []float64{7}},
	}
	var b bytes.Buffer
	printTable(&b, []*row{rows["tcp-64M\x00p50 Gbit/s"], rows["ipc\x00Mop/s"]})
	printCeilings(&b, rows)
	out := b.String()
	// Medians 20 and 25: 1.250 of the medians, 1.250 paired.
	require.Contains(t, out, "20.00 [10.00, 30.00]")
	require.Regexp(t, `25.00 \[15.00, 35.00\]\s+1.250\s+1.250`, out)
	// A case one build could not run has figures on one side only.
	require.Regexp(t, `ipc\s+Mop/s\s+-\s+7.000 \[7.000, 7.000\]\s+-\s+-`, out)
	require.Contains(t, out, "engine ÷ raw loop (medians of the p50 rates): base 0.500, new 1.000")
}

func TestFigures(t *testing.T) {
	paged := fdFigures(fdCase{Workload: "paged", Bytes: 64, Pages: 10000, Mops: 0.05, P50us: 50000})
	require.Equal(t, map[string]float64{"tool's Mop/s": 0.05, "p50 Mop/s": 0.2}, paged)
	single := fdFigures(fdCase{Workload: "single", Bytes: 64 << 20, Gbits: 9, P50us: 33554.432})
	require.InDelta(t, 16.0, single["p50 Gbit/s"], 1e-9)
	require.Equal(t, 9.0, single["tool's Gbit/s"])
	require.Equal(t, metric{"Mop/s", true}, metricOf("p50 Mop/s"))
}

func TestMetricOf(t *testing.T) {
	require.Equal(t, metric{"ns/op", false}, metricOf("NullImm ns/op"))
	require.Equal(t, metric{"allocs/op", false}, metricOf("NullImm allocs/op"))
	require.Equal(t, metric{"Mop/s", true}, metricOf("Mop/s"))
	require.Equal(t, metric{"µs", false}, metricOf("combine p50"))
}

func TestUsage(t *testing.T) {
	var o, e bytes.Buffer
	require.Equal(t, 2, run(nil, &o, &e))
	require.Contains(t, e.String(), "usage: bench-compare --base REV")
	e.Reset()
	require.Equal(t, 2, run([]string{"--base", "HEAD", "--n", "0"}, &o, &e))
}

func TestCallgrindParsing(t *testing.T) {
	ann := `--------------------------------------------------------------------------------
Ir
--------------------------------------------------------------------------------
328,718,761 (100.0%)  PROGRAM TOTALS

--------------------------------------------------------------------------------
Ir                   file:function
--------------------------------------------------------------------------------
51,890,165 (15.79%)  /src/fabric/worker.go:github.com/ferryrdma/ferry/fabric.(*worker).loop'2 [/tmp/f.test]
 2,819,413 ( 0.86%)  /src/fabric/worker.go:github.com/ferryrdma/ferry/fabric.(*worker).loop [/tmp/f.test]
21,798,180 ( 6.63%)  /usr/local/go/src/runtime/sys_linux_amd64.s:runtime.nanotime1.abi0 [/tmp/f.test]
`
	m, err := parseCallgrind(strings.NewReader(ann))
	require.NoError(t, err)
	require.Equal(t, map[string]float64{"fabric.(*worker).loop": 54709578, "runtime.nanotime1.abi0": 21798180}, m)
	_, err = parseCallgrind(strings.NewReader("nothing\n"))
	require.Error(t, err)

	require.Equal(t, "^BenchmarkNullImm$", benchPattern("NullImm"))
	require.Equal(t, "^BenchmarkNullPaged$/^pages=100$", benchPattern("NullPaged/pages=100"))
	require.Equal(t, 20000, callgrindOps("NullImm", 20000))
	require.Equal(t, 200, callgrindOps("NullPaged/pages=100", 20000))
	require.Equal(t, 20, callgrindOps("NullPaged/pages=10000", 20000))

	var b bytes.Buffer
	printCallgrind(&b, "NullImm", map[string]float64{"a": 10, "b": 100}, map[string]float64{"a": 12, "b": 50, "c": 5}, 2)
	out := b.String()
	require.Contains(t, out, "base 110, new 67 in all")
	// b moved most, then c, and a (the smallest move) is left out.
	require.Regexp(t, `(?s)100.0\s+50.0\s+-50.0  b\n.*0.0\s+5.0\s+\+5.0  c\n$`, out)
}
