package promreg

import (
	"errors"
	"fmt"

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

// Replace registers c, a collector that computes its series at scrape time
// from a controller's cache, on reg in place of the equal one (same
// descriptors) an earlier controller registered there: that one's cache
// stopped with it, the latest controller's follows the cluster. Unlike
// Register it takes over instead of sharing, since such a collector has
// no series of its own to continue.
func Replace(reg prometheus.Registerer, c prometheus.Collector) error {
	reg.Unregister(c) // collectors are equal when their descriptors are
	if err := reg.Register(c); err != nil {
		return fmt.Errorf("registering metric: %w", err)
	}
	return nil
}
