package safety

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// probeName is the object the reachability check asks the API servers
// for. It does not exist: any answer, NotFound included, means the server
// is up; only no answer, or an answer of the server's own failure, is
// down.
const probeName = "mcm-safety-reachability-probe"

// outage is the state of the API-server reachability check. The other
// controllers read it through the Controller's SafetyGate methods.
type outage struct {
	mu sync.Mutex
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
// first check that finds them up.
func (o *outage) observe(up bool, now time.Time, timeout time.Duration) (frozen, thawed bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if up {
		o.downSince = time.Time{}
		if o.frozen {
			o.frozen, o.lastEnd = false, now
			return false, true
		}
		return false, false
	}
	if o.downSince.IsZero() {
		o.downSince = now
	}
	if !o.frozen && now.Sub(o.downSince) > timeout {
		o.frozen = true
		return true, false
	}
	return false, false
}

// Frozen tells whether the controllers must not create machines nor let
// the health timeout mark machines Failed: an API server has been out of
// reach for longer than Options.StatusCheckTimeout. It implements the
// SafetyGate of packages machine, machineset and deployment.
func (c *Controller) Frozen(context.Context) bool {
	c.outage.mu.Lock()
	defer c.outage.mu.Unlock()
	return c.outage.frozen
}

// LastOutageEnd is when the last freeze for an outage ended; zero if none
// did. It implements machine.OutageReporter: machines Unknown since before
// then get a new health timeout.
func (c *Controller) LastOutageEnd() time.Time {
	c.outage.mu.Lock()
	defer c.outage.mu.Unlock()
	return c.outage.lastEnd
}

// reachable probes the control cluster's and, with one, the target
// cluster's API server.
func (c *Controller) reachable(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, c.opts.StatusCheckTimeout)
	defer cancel()
	_, err := c.client.MachineV1alpha1().Machines(c.opts.ProbeNamespace).Get(ctx, probeName, metav1.GetOptions{})
	if !answered(err) {
		return false
	}
	if c.target == nil {
		return true
	}
	_, err = c.target.CoreV1().Nodes().Get(ctx, probeName, metav1.GetOptions{})
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

// Reasons of the events on the freeze for an API-server outage.
const (
	ReasonOutageFrozen = "FrozenForAPIServerOutage"
	ReasonOutageThawed = "UnfrozenAfterAPIServerOutage"
)

// outageEvent records an event about the freeze on the probe namespace,
// the namespace whose machines it holds back. The recorder delivers it
// once the server is back, if it is not yet.
func (c *Controller) outageEvent(eventType, reason, message string) {
	if c.opts.Recorder == nil {
		return
	}
	ns := &corev1.ObjectReference{APIVersion: "v1", Kind: "Namespace", Name: c.opts.ProbeNamespace, Namespace: c.opts.ProbeNamespace}
	c.opts.Recorder.Eventf(ns, eventType, reason, "%s", message)
}

// watchAPIServers checks reachability every StatusCheckPeriod, and every
// fifth of StatusCheckTimeout while a server is down, until ctx ends.
func (c *Controller) watchAPIServers(ctx context.Context) {
	logger := logr.FromContextOrDiscard(ctx)
	for {
		up := c.reachable(ctx)
		if ctx.Err() != nil {
			return
		}
		frozen, thawed := c.outage.observe(up, c.opts.Clock.Now(), c.opts.StatusCheckTimeout)
		// The machine controller exports the state as
		// mcm_machine_controller_frozen, reading it from this gate.
		switch {
		case frozen:
			logger.Info("API server out of reach for longer than the timeout; freezing machine creation and health timeouts",
				"timeout", c.opts.StatusCheckTimeout)
			c.outageEvent(corev1.EventTypeWarning, ReasonOutageFrozen, fmt.Sprintf(
				"An API server has been out of reach for more than %v: no machine is created and none is marked Failed by its health timeout until it is back; deletions go on",
				c.opts.StatusCheckTimeout))
		case thawed:
			logger.Info("API servers reachable again; unfreezing, and restarting the health timeout of unhealthy machines")
			c.outageEvent(corev1.EventTypeNormal, ReasonOutageThawed,
				"The API servers are reachable again: machines are created again, and unhealthy machines' health timeouts start anew")
		}
		next := c.opts.StatusCheckPeriod
		if !up {
			next = c.opts.StatusCheckTimeout / 5
		}
		select {
		case <-ctx.Done():
			return
		case <-c.opts.Clock.After(next):
		}
	}
}
