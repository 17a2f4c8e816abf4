// Package metricsauth is the reference manager's --metrics-secure: the
// TLS configuration its HTTP server serves with, and the filter that lets
// only callers the control cluster authenticates and authorizes reach
// /metrics and /debug/pprof/.
//
// TLSConfig serves the certificate of two PEM files, reread when they
// change (a Secret volume renewed by cert-manager), or, without them, a
// self-signed certificate generated at start. A Reviewer asks the API
// server about each bearer token, as kube-rbac-proxy and
// controller-runtime's secure metrics do: a TokenReview authenticates it,
// a SubjectAccessReview authorizes its user for the request's verb on its
// path as a non-resource URL ("get" on "/metrics"). Outcomes are kept for
// a minute (a refusal for 10s), in a bounded cache keyed by the token's
// SHA-256. /healthz and /readyz stay open: the kubelet probes them without
// a token.
//
// # Usage
//
//	tlsConfig, about, err := metricsauth.TLSConfig(certFile, keyFile, address, clock.RealClock{}, log)
//	rv := metricsauth.NewReviewer(client.AuthenticationV1().TokenReviews(), client.AuthorizationV1().SubjectAccessReviews(), clock.RealClock{})
//	srv := &http.Server{Handler: rv.Filter(log, mux)}
//	srv.Serve(tls.NewListener(ln, tlsConfig))
//	log.Info("Serving", about...) // the certificate: its file or fingerprint, and its end
package metricsauth
