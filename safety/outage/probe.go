package outage

import (
	"context"
	"errors"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// probeName is the object the check asks the API servers for. It does not
// exist: any answer, NotFound included, means the server is up; only no
// answer, or an answer of the server's own failure, is down.
const probeName = "mcm-safety-reachability-probe"

// state is the check's memory of the API servers; the Gate guards it.
type state struct {
	// downSince is when the check first found a server down; zero while
	// both are up.
	downSince time.Time
	frozen    bool
	// lastEnd is when the last frozen outage ended; zero if none did.
	lastEnd time.Time
}

// observe records one check's verdict at now and returns whether the
// freeze begins (frozen) or ends (thawed) with it: a freeze begins once
// the servers have been down for longer than timeout, and ends at the
// first check that finds them up. It is pure but for s.
func (s *state) observe(up bool, now time.Time, timeout time.Duration) (frozen, thawed bool) {
	if up {
		s.downSince = time.Time{}
		if s.frozen {
			s.frozen, s.lastEnd = false, now
			return false, true
		}
		return false, false
	}
	if s.downSince.IsZero() {
		s.downSince = now
	}
	if !s.frozen && now.Sub(s.downSince) > timeout {
		s.frozen = true
		return true, false
	}
	return false, false
}

// reachable probes the control cluster's and, with one, the target
// cluster's API server, each read under StatusCheckTimeout.
func (g *Gate) reachable(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, g.opts.StatusCheckTimeout)
	defer cancel()
	_, err := g.control.MachineV1alpha1().Machines(g.opts.ProbeNamespace).Get(ctx, probeName, metav1.GetOptions{})
	if !answered(err) {
		return false
	}
	if g.target == nil {
		return true
	}
	_, err = g.target.CoreV1().Nodes().Get(ctx, probeName, metav1.GetOptions{})
	return answered(err)
}

// answered tells whether err (of a read) came from a server that works:
// none, or an API status below 500 (NotFound, Forbidden, ...).
func answered(err error) bool {
	if err == nil {
		return true
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return status.Status().Code < 500 && status.Status().Code != 0
	}
	return false
}
