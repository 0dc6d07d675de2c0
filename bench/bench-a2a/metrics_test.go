package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/ferryrdma/ferry/fabric/fabrictest"
)

// --metrics serves each rank's engine counters while it runs. Two ranks
// of one job run in this process over shm; each scrapes its own server
// over loopback HTTP after its run, before the server closes.
func TestMetrics(t *testing.T) {
	fabrictest.RequireTransport(t, "shm", "127.0.0.1")
	var mu sync.Mutex
	scraped := map[string]string{}
	afterRun = func(url string) {
		resp, err := http.Get(url)
		if err != nil {
			t.Errorf("scrape %s: %v", url, err)
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Error(err)
		}
		mu.Lock()
		scraped[url] = string(b)
		mu.Unlock()
	}
	defer func() { afterRun = nil }()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	master := ln.Addr().String()
	ln.Close()
	t.Setenv("FERRY_JOB_TOKEN", "metrics-test")
	var wg sync.WaitGroup
	outs := make([]strings.Builder, 2)
	errs := make([]strings.Builder, 2)
	codes := make([]int, 2)
	for r := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[r] = run([]string{"--world-size=2", fmt.Sprintf("--rank=%d", r), "--master=" + master,
				"--provider=shm", "--node=127.0.0.1", "--tokens=8", "--hidden=64", "--scales=2", "--experts=4",
				"--topk=2", "--iters=3", "--warmup=1", "--metrics=127.0.0.1:0"}, &outs[r], &errs[r])
		}()
	}
	wg.Wait()
	for r := range 2 {
		if codes[r] != 0 {
			t.Fatalf("rank %d: exit %d\n%s\n%s", r, codes[r], outs[r].String(), errs[r].String())
		}
		if !regexp.MustCompile(fmt.Sprintf(`# metrics of rank %d: http://127\.0\.0\.1:\d+/metrics`, r)).MatchString(errs[r].String()) {
			t.Errorf("rank %d: no metrics address on stderr:\n%s", r, errs[r].String())
		}
	}
	if len(scraped) != 2 {
		t.Fatalf("%d scrapes, want one per rank", len(scraped))
	}
	ranks := map[string]bool{}
	for url, body := range scraped {
		m := regexp.MustCompile(`(?m)^ferry_engine_info\{poll="adaptive",provider="libfabric",rank="(\d)",transport="shm"\} 1$`).FindStringSubmatch(body)
		if m == nil {
			t.Fatalf("%s: no engine info:\n%s", url, body)
		}
		ranks[m[1]] = true
		for _, re := range []string{
			`(?m)^ferry_transfers_completed_total\{rank="\d"\} [1-9]`,
			`(?m)^ferry_transfers_failed_total\{rank="\d"\} 0$`,
			`(?m)^ferry_nic_bytes_total\{device="host",index="0",nic="[^"]*",rank="\d"\} [1-9]`,
			`(?m)^ferry_nic_ops_in_flight\{device="host",index="0",nic="[^"]*",rank="\d"\} 0$`,
		} {
			if !regexp.MustCompile(re).MatchString(body) {
				t.Errorf("%s: no %s in:\n%s", url, re, body)
			}
		}
	}
	if !ranks["0"] || !ranks["1"] {
		t.Fatalf("scraped ranks %v", ranks)
	}
}
