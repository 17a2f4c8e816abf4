package manager

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/mcmkit/mcm/reference/internal/metricsauth"
)

// serve starts the HTTP server and returns the function that stops it.
func (m *Manager) serve(log logr.Logger) (func(), error) {
	handler, tlsConfig, secure, err := m.secureServing(m.handler())
	if err != nil {
		return nil, err
	}
	addr := net.JoinHostPort(m.cfg.Address, strconv.Itoa(m.cfg.Port))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--address/--port: %w", err)
	}
	if tlsConfig != nil {
		ln = tls.NewListener(ln, tlsConfig)
	}
	// ReadHeaderTimeout also bounds a TLS handshake.
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	log.Info("Serving /metrics, /healthz and /readyz", append([]any{"address", ln.Addr().String(), "profiling", m.cfg.Profiling}, secure...)...)
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error(err, "HTTP server failed")
		}
	}, nil
}

// secureServing returns, with --metrics-secure, h behind the access
// reviews, the TLS configuration to serve it with, and what to log about
// it; otherwise h as it is. The reviews go to the control cluster, whose
// ServiceAccounts the scrapers (a Prometheus next to the manager) are, on
// a client of their own: a scrape never waits behind the controllers'
// requests.
func (m *Manager) secureServing(h http.Handler) (http.Handler, *tls.Config, []any, error) {
	if !m.cfg.MetricsSecure {
		return h, nil, nil, nil
	}
	log := m.log.WithName("metrics-auth")
	tlsConfig, about, err := metricsauth.TLSConfig(m.cfg.MetricsCertFile, m.cfg.MetricsKeyFile, m.cfg.Address, clock.RealClock{}, log)
	if err != nil {
		return nil, nil, nil, err
	}
	restConfig, err := restConfig(m.cfg, "control-kubeconfig", m.cfg.ControlKubeconfig)
	if err != nil {
		return nil, nil, nil, err
	}
	restConfig.UserAgent += "/metrics-auth"
	client, err := kubernetes.NewForConfig(withContentType(restConfig, m.cfg.KubeAPIContentType))
	if err != nil {
		return nil, nil, nil, fmt.Errorf("--metrics-secure: control cluster client: %w", err)
	}
	rv := metricsauth.NewReviewer(client.AuthenticationV1().TokenReviews(), client.AuthorizationV1().SubjectAccessReviews(), clock.RealClock{})
	return rv.Filter(log, h), tlsConfig, append([]any{"tls", true, "authorization", "TokenReview and SubjectAccessReview"}, about...), nil
}
