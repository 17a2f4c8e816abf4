package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"

	"github.com/mcmkit/mcm/deployment"
	"github.com/mcmkit/mcm/kubectl-mcm/internal/rollout"
)

// history lists the deployment's revisions, or shows one revision's
// machine template.
func (r rolloutCmd) history(ctx context.Context, revision int64, output string) error {
	d, err := r.get(ctx)
	if err != nil {
		return err
	}
	sets, err := r.sets(ctx)
	if err != nil {
		return err
	}
	h := rollout.History(d, sets)
	if revision > 0 {
		rev, err := rollout.Find(h, revision)
		if err != nil {
			return err
		}
		if output != "" {
			return printObject(r.s.Out, output, rev)
		}
		raw, err := json.Marshal(rev.Template)
		if err == nil {
			raw, err = yamlOf(raw)
		}
		if err != nil {
			return fmt.Errorf("encoding the template: %w", err)
		}
		_, err = fmt.Fprintf(r.s.Out, "%s with revision #%d (MachineSet %s)\nMachine Template:\n%s", kindName(r.name), rev.Revision, rev.MachineSet, raw)
		return err
	}
	if output != "" {
		return printObject(r.s.Out, output, h)
	}
	return rollout.PrintHistory(r.s.Out, kindName(r.name), h)
}

// undo sets spec.rollbackTo and waits, at most timeout, until the
// controller has taken it up (cleared it), so that "rolled back" is true
// when printed.
func (r rolloutCmd) undo(ctx context.Context, revision int64, timeout time.Duration) error {
	api := r.c.machines.MachineV1alpha1().MachineDeployments(r.c.namespace)
	var (
		to   rollout.Revision
		skip bool
	)
	// Decided again on a conflict: the controller writes the status all
	// the time.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d, err := r.get(ctx)
		if err != nil {
			return err
		}
		sets, err := r.sets(ctx)
		if err != nil {
			return err
		}
		var patch []byte
		if patch, to, skip, err = rollout.UndoPatch(d, sets, revision); err != nil || skip {
			return err
		}
		_, err = api.Patch(ctx, r.name, types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("rolling back: %w", err)
	}
	if skip {
		_, err = fmt.Fprintf(r.s.Out, "%s skipped rollback (current template already matches revision %d)\n", kindName(r.name), to.Revision)
		return err
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		d, err := api.Get(ctx, r.name, metav1.GetOptions{})
		if err != nil {
			return false, fmt.Errorf("reading the MachineDeployment: %w", err)
		}
		_, asked := d.Annotations[deployment.RollbackAnnotation]
		return d.Spec.RollbackTo == nil && !asked, nil
	})
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("rollback to revision %d asked for, but the MachineDeployment controller has not taken it up within %v (is it running?)", to.Revision, timeout)
		}
		return err
	}
	_, err = fmt.Fprintf(r.s.Out, "%s rolled back to revision %d\n", kindName(r.name), to.Revision)
	return err
}
