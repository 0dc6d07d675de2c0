package metricsserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/fabric/fabricmetrics"
)

// Server serves one registry at /metrics.
type Server struct {
	reg  *prometheus.Registry
	ln   net.Listener
	srv  *http.Server
	done chan error
}

// Start listens on addr now (port 0 picks a free one; see URL) and serves
// in the background until Close.
func Start(addr string) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: listen on %s: %w", addr, err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	s := &Server{reg: reg, ln: ln, done: make(chan error, 1),
		srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}}
	go func() { s.done <- s.srv.Serve(ln) }()
	return s, nil
}

// URL is where the metrics are served.
func (s *Server) URL() string { return "http://" + s.ln.Addr().String() + "/metrics" }

// AddEngine exports e's counters with the label name=value (every engine
// of one server takes the same label name).
func (s *Server) AddEngine(e *fabric.Engine, name, value string) error {
	return s.reg.Register(fabricmetrics.New(e, fabricmetrics.Options{ConstLabels: prometheus.Labels{name: value}}))
}

// Close stops serving, letting a scrape in progress finish (up to 5 s).
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	if serr := <-s.done; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}

// Offset returns addr with offset added to its port (one port per rank
// of a host); port 0 stays 0.
func Offset(addr string, offset int) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("metrics address %q: %w", addr, err)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 0 || p+offset > 65535 {
		return "", fmt.Errorf("metrics address %q: bad port", addr)
	}
	if p == 0 {
		return addr, nil
	}
	return net.JoinHostPort(host, strconv.Itoa(p+offset)), nil
}
