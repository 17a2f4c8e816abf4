package sim

import (
	"context"
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// leaseRenewer keeps the Lease of each live node in kube-node-lease fresh:
// that lease, not the node status, is what the node lifecycle controller
// watches for liveness.
type leaseRenewer struct {
	client   kubernetes.Interface
	duration time.Duration // renewals are due every quarter of it

	mu      sync.Mutex
	renewed map[string]time.Time             // last renewal by node
	written map[string]*coordinationv1.Lease // last lease written by node
}

func newLeaseRenewer(client kubernetes.Interface, duration time.Duration) *leaseRenewer {
	return &leaseRenewer{
		client:   client,
		duration: duration,
		renewed:  map[string]time.Time{},
		written:  map[string]*coordinationv1.Lease{},
	}
}

// renew renews the node's lease when a quarter of its duration has passed,
// as the kubelet does. It renews from the lease it last wrote, also as the
// kubelet does, and reads the lease only when it has none or the last
// update failed, so that a steady node costs one write per renewal.
func (r *leaseRenewer) renew(ctx context.Context, node *corev1.Node, now time.Time) error {
	r.mu.Lock()
	last, ok := r.renewed[node.Name]
	lease := r.written[node.Name]
	r.mu.Unlock()
	if ok && now.Sub(last) < r.duration/4 {
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
	r.renewed[node.Name] = now
	r.written[node.Name] = written
	r.mu.Unlock()
	return nil
}

// renewAtNextSync makes the node's next renewal due at once, for a node
// whose kubelet has just come back from silence.
func (r *leaseRenewer) renewAtNextSync(node string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.renewed, node)
}

// forget drops all that is known of the node's lease, for a node that was
// just registered or deleted: a node of that name starts with a lease read
// or created afresh.
func (r *leaseRenewer) forget(node string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.renewed, node)
	delete(r.written, node)
}
