// Package promreg registers collectors on caller-given Prometheus
// registries so that a component can be built twice on one registry (a
// controller restarted after losing leadership, two drainers in one
// process) and continue the same series instead of failing.
package promreg

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Register registers c on reg and returns it. If reg already holds an equal
// collector (same descriptors) of the same type, that one is returned
// instead, so that both users share its series. Any other error is returned
// as is.
func Register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	err := reg.Register(c)
	if err == nil {
		return c, nil
	}
	if are, ok := errors.AsType[prometheus.AlreadyRegisteredError](err); ok {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing, nil
		}
	}
	var zero C
	return zero, err
}
