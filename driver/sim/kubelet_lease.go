package sim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
)

// leaseRenewer keeps the Lease of each live node in kube-node-lease fresh:
// that lease, not the node status, is what the node lifecycle controller
// watches for liveness.
type leaseRenewer struct {
	client   kubernetes.Interface
	duration time.Duration // the leases' spec.leaseDurationSeconds
	period   time.Duration // how often a lease is renewed
	// jitter returns the wait until the next renewal, given the period.
	jitter func(time.Duration) time.Duration
	clock  clock.PassiveClock // when a renewal was written, for late

	mu      sync.Mutex
	next    map[string]time.Time             // next renewal by node; none: due now
	written map[string]*coordinationv1.Lease // last lease written by node
	late    time.Duration                    // the latest renewal since takeLate
}

func newLeaseRenewer(client kubernetes.Interface, duration, period time.Duration, jitter func(time.Duration) time.Duration, clk clock.PassiveClock) *leaseRenewer {
	return &leaseRenewer{
		client:   client,
		duration: duration,
		period:   period,
		jitter:   jitter,
		clock:    clk,
		next:     map[string]time.Time{},
		written:  map[string]*coordinationv1.Lease{},
	}
}

// due reports whether the node's lease is to be renewed at now.
func (r *leaseRenewer) due(node string, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	next, ok := r.next[node]
	return !ok || !now.Before(next)
}

// spread makes the node's first renewal due at a random time within one
// period from now, for a node registered before this kubelet started.
func (r *leaseRenewer) spread(node string, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.next[node] = now.Add(rand.N(r.period))
}

// renew renews the node's lease when due, as the kubelet does. It renews
// from the lease it last wrote, also as the kubelet does, and reads the
// lease only when it has none or the last update failed, so that a steady
// node costs one write per renewal.
func (r *leaseRenewer) renew(ctx context.Context, node *corev1.Node, now time.Time) error {
	r.mu.Lock()
	lease := r.written[node.Name]
	dueAt, scheduled := r.next[node.Name]
	r.mu.Unlock()
	if scheduled && now.Before(dueAt) {
		return nil
	}
	leases := r.client.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	renew := &metav1.MicroTime{Time: now}
	var err error
	if lease == nil {
		lease, err = leases.Get(ctx, node.Name, metav1.GetOptions{})
	}
	var (
		written *coordinationv1.Lease
		gone    bool
	)
	switch {
	case apierrors.IsNotFound(err):
		lease = &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{
				Name: node.Name, Namespace: corev1.NamespaceNodeLease,
				// Owned by the node, so it goes when the node goes.
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}},
			},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity:       ptr.To(node.Name),
				LeaseDurationSeconds: ptr.To(int32(r.duration / time.Second)),
				RenewTime:            renew,
			},
		}
		written, err = leases.Create(ctx, lease, metav1.CreateOptions{})
	case err == nil:
		lease = lease.DeepCopy() // the copy kept from the last write stays as written
		lease.Spec.RenewTime = renew
		lease.Spec.LeaseDurationSeconds = ptr.To(int32(r.duration / time.Second))
		written, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
		gone = apierrors.IsNotFound(err) // deleted since it was read or written
	}
	if err != nil {
		// Read the lease afresh at the next sync.
		r.mu.Lock()
		delete(r.written, node.Name)
		r.mu.Unlock()
		if gone || apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
			return nil
		}
		return fmt.Errorf("renewing lease of node %s: %w", node.Name, err)
	}
	r.mu.Lock()
	r.next[node.Name] = now.Add(r.jitter(r.period))
	r.written[node.Name] = written
	if late := r.clock.Since(dueAt); scheduled && late > r.late {
		r.late = late
	}
	r.mu.Unlock()
	return nil
}

// takeLate returns by how much the latest renewal since the last call was
// written after it was due: the rate limit, the API server or the sync
// period holding renewals up.
func (r *leaseRenewer) takeLate() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	late := r.late
	r.late = 0
	return late
}

// renewAtNextSync makes the node's next renewal due at once, for a node
// whose kubelet has just come back from silence.
func (r *leaseRenewer) renewAtNextSync(node string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.next, node)
}

// forget drops all that is known of the node's lease, for a node that was
// just registered or deleted: a node of that name starts with a lease read
// or created afresh.
func (r *leaseRenewer) forget(node string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.next, node)
	delete(r.written, node)
}
