// Package expectations tracks the writes a controller has issued but not yet
// seen through its informer. It has two stores: Store, creation and
// deletion expectations in the sense of kube-controller-manager's
// ControllerExpectations, and Writes, which makes a controller read its own
// writes (see below). The machine and MachineSet controllers use both side
// by side, the MachineDeployment controller Writes only.
//
// A MachineSet controller decides how many machines to create or delete by
// comparing spec.replicas with the machines in its informer cache. The cache
// lags behind the API server: right after creating three machines, the next
// sync may still see the old count and create three more. Expectations close
// that gap. Before issuing writes the controller records what it expects to
// see; the informer event handlers tick those expectations off; and the
// controller only acts on the cache for an owner once Satisfied reports true.
//
// Creations are counted, because the controller cannot know the identity of a
// machine before it exists. Deletions are tracked by UID, because graceful
// deletion produces two signals per object (an update that sets
// deletionTimestamp, then the delete event) and counting both would
// under-count outstanding deletions.
//
// Expectations expire after a TTL (DefaultTTL, five minutes, unless
// configured). A watch can miss events, and an owner whose expectations are
// never met would otherwise never be reconciled again; after the TTL,
// Satisfied reports true and State reports StateExpired so the caller can log
// it. The package itself logs nothing and starts no goroutines.
//
// Setting expectations (ExpectCreations, ExpectDeletions, Set) replaces
// whatever was recorded for the key and restarts the TTL; it does not add.
// This is correct for the flow below, where new expectations are only set
// once the old ones are satisfied, i.e. fulfilled or expired.
//
// # Usage
//
// The key is whatever identifies the owner, typically the MachineSet's
// "namespace/name" work-queue key:
//
//	exp := expectations.New[string](expectations.Options{})
//
//	func (c *Controller) sync(ctx context.Context, key string) error {
//		ms, err := c.machineSets.Get(key)
//		if apierrors.IsNotFound(err) {
//			exp.Delete(key) // owner gone: forget it so the entry does not leak
//			return nil
//		}
//		if !exp.Satisfied(key) {
//			// Our own writes are not in the cache yet; the pending events
//			// will requeue key when they arrive.
//			return nil
//		}
//		machines := c.ownedMachines(ms) // from the informer cache
//		diff := int(*ms.Spec.Replicas) - len(machines)
//		switch {
//		case diff > 0:
//			// Expect before writing: the add event may beat the call's return.
//			exp.ExpectCreations(key, diff)
//			for range diff {
//				if err := c.createMachine(ctx, ms); err != nil {
//					exp.CreationFailed(key) // nothing will be observed
//				}
//			}
//		case diff < 0:
//			victims := pickVictims(machines, -diff)
//			uids := make([]types.UID, 0, len(victims))
//			for _, m := range victims {
//				uids = append(uids, m.UID)
//			}
//			exp.ExpectDeletions(key, uids...)
//			for _, m := range victims {
//				if err := c.deleteMachine(ctx, m); err != nil {
//					exp.DeletionFailed(key, m.UID)
//				}
//			}
//		}
//		return nil
//	}
//
// and in the machine informer's event handlers, with ownerKey resolving the
// owning MachineSet's key:
//
//	AddFunc: exp.CreationObserved(ownerKey(m)); enqueue the owner
//	UpdateFunc: if m.DeletionTimestamp != nil { exp.DeletionObserved(ownerKey(m), m.UID) }; enqueue
//	DeleteFunc: exp.DeletionObserved(ownerKey(m), m.UID) (unwrap tombstones first); enqueue
//
// Observing a UID twice, or a UID that was never expected, is harmless, so
// the handlers need no bookkeeping of their own.
//
// # Reading your own writes
//
// A controller that patches an object and is requeued right away may read
// the object from its cache before the watch delivered the patch, and act
// on the old state a second time. Writes records the resourceVersion of
// each write per key; a sync first asks whether the cached object is at
// least that new, and otherwise waits for the update event (which requeues
// the key anyway):
//
//	writes := expectations.NewWrites[string](expectations.Options{})
//
//	func (c *Controller) sync(ctx context.Context, key string) (workqueue.Result, error) {
//		m, err := c.machines.Get(key)
//		if apierrors.IsNotFound(err) {
//			writes.Forget(key)
//			return workqueue.Result{}, nil
//		}
//		if !writes.Observed(key, m.ResourceVersion) {
//			return workqueue.Result{RequeueAfter: time.Second}, nil // the update event comes first
//		}
//		updated, err := c.patch(ctx, m)
//		if err != nil {
//			return workqueue.Result{}, err
//		}
//		writes.Wrote(key, updated.ResourceVersion)
//		return workqueue.Result{}, nil
//	}
package expectations
