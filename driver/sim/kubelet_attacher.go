package sim

import (
	"context"
	"fmt"
	"slices"
	"time"

	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// csiAttacher plays the CSI external-attacher of one simulated driver: it
// serves the VolumeAttachments kube-controller-manager's attach-detach
// controller creates for that driver's volumes, so that drains see volumes
// attach and detach with realistic delays. It keeps no state: the
// attachment's timestamps and finalizer say where it stands.
type csiAttacher struct {
	client                   kubernetes.Interface
	driver                   string // the attacher name it serves
	attachDelay, detachDelay time.Duration
}

// serves reports whether va is for this attacher's driver.
func (a csiAttacher) serves(va *storagev1.VolumeAttachment) bool {
	return va.Spec.Attacher == a.driver
}

// finalizer is what a CSI external-attacher puts on the attachments it
// serves, so that they are deleted only once detached.
func (a csiAttacher) finalizer() string {
	return "external-attacher/" + a.driver
}

// due reports whether sync has anything to do for va at now, without an
// API call.
func (a csiAttacher) due(va *storagev1.VolumeAttachment, now time.Time) bool {
	if !a.serves(va) {
		return false
	}
	if va.DeletionTimestamp != nil {
		return slices.Contains(va.Finalizers, a.finalizer()) && !now.Before(va.DeletionTimestamp.Add(a.detachDelay))
	}
	return !va.Status.Attached && !now.Before(va.CreationTimestamp.Add(a.attachDelay))
}

// sync brings one attachment forward: a new one is attached after
// attachDelay; a deleted one is detached detachDelay after its deletion
// began, and only then released. Attachments to nodes whose VM is stopped
// are still served, as a cloud detaches volumes from stopped VMs.
func (a csiAttacher) sync(ctx context.Context, va *storagev1.VolumeAttachment, now time.Time) error {
	attachments := a.client.StorageV1().VolumeAttachments()
	finalizer := a.finalizer()
	if va.DeletionTimestamp != nil {
		if !slices.Contains(va.Finalizers, finalizer) || now.Before(va.DeletionTimestamp.Add(a.detachDelay)) {
			return nil
		}
		patch := fmt.Appendf(nil, `{"metadata":{"$deleteFromPrimitiveList/finalizers":[%q],"resourceVersion":%q}}`, finalizer, va.ResourceVersion)
		if _, err := attachments.Patch(ctx, va.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil &&
			!apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("detaching %s: %w", va.Name, err)
		}
		return nil
	}
	if va.Status.Attached || now.Before(va.CreationTimestamp.Add(a.attachDelay)) {
		return nil
	}
	if !slices.Contains(va.Finalizers, finalizer) {
		patch := fmt.Appendf(nil, `{"metadata":{"finalizers":[%q],"resourceVersion":%q}}`, finalizer, va.ResourceVersion)
		if _, err := attachments.Patch(ctx, va.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
			if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
				return nil
			}
			return fmt.Errorf("taking %s: %w", va.Name, err)
		}
		return nil // attach at the next sync, from the updated object
	}
	updated := va.DeepCopy()
	updated.Status.Attached = true
	updated.Status.AttachmentMetadata = map[string]string{"devicePath": "/dev/sim/" + va.Name}
	if _, err := attachments.UpdateStatus(ctx, updated, metav1.UpdateOptions{}); err != nil &&
		!apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("attaching %s: %w", va.Name, err)
	}
	return nil
}
