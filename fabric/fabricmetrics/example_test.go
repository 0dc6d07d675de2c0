package fabricmetrics_test

import (
	"context"
	"log"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/fabric/fabricmetrics"
)

// Serve an engine's counters on /metrics for Prometheus to scrape.
func Example() {
	ctx := context.Background()
	e, err := fabric.Open(ctx, fabric.Config{Transport: "efa"})
	if err != nil {
		log.Fatal(err)
	}
	defer e.Close(ctx)

	reg := prometheus.NewRegistry()
	reg.MustRegister(fabricmetrics.New(e, fabricmetrics.Options{ConstLabels: prometheus.Labels{"engine": "kv"}}))
	http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	log.Fatal(http.ListenAndServe("127.0.0.1:9464", nil))
}
