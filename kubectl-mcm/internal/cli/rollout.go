package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/client-go/util/retry"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/kubectl-mcm/internal/rollout"
)

// kindName is how kubectl names an object it acted on.
func kindName(name string) string { return "machinedeployment.machine.sapcloud.io/" + name }

func runRollout(ctx context.Context, s Streams, args []string) error {
	sub, rest := splitCommand(args)
	fs, g := newFlags("rollout "+sub, s.Out)
	var (
		watchFlag = true
		timeout   time.Duration
		revision  int64
		output    *string
	)
	switch sub {
	case "status":
		fs.BoolVar(&watchFlag, "watch", true, "wait until the rollout is done; false prints the status once")
		fs.BoolVar(&watchFlag, "w", true, "shorthand for --watch")
		fs.DurationVar(&timeout, "timeout", 0, "how long to wait before giving up; 0 waits forever")
	case "history":
		fs.Int64Var(&revision, "revision", 0, "show the machine template of this revision")
		output = outputFlag(fs)
	case "undo":
		fs.Int64Var(&revision, "to-revision", 0, "the revision to roll back to; 0 is the previous one")
		fs.DurationVar(&timeout, "timeout", time.Minute, "how long to wait for the controller to take up the rollback")
	case "pause", "resume", "restart":
	case "":
		return errors.New("expected a rollout command: status, history, undo, pause, resume or restart")
	default:
		return fmt.Errorf("unknown rollout command %q: expected status, history, undo, pause, resume or restart", sub)
	}
	pos, err := parse(fs, rest)
	if err != nil {
		return err
	}
	if err := exactly(pos, "DEPLOYMENT"); err != nil {
		return err
	}
	c, err := g.connect()
	if err != nil {
		return err
	}
	r := rolloutCmd{s: s, c: c, name: pos[0]}
	switch sub {
	case "status":
		return r.status(ctx, watchFlag, timeout)
	case "history":
		if err := checkOutput(*output); err != nil {
			return err
		}
		return r.history(ctx, revision, *output)
	case "undo":
		return r.undo(ctx, revision, timeout)
	case "restart":
		return r.patch(ctx, "restarted", func(d *v1alpha1.MachineDeployment) ([]byte, error) { return rollout.RestartPatch(d, time.Now()) })
	default:
		pause := sub == "pause"
		return r.patch(ctx, sub+"d", func(d *v1alpha1.MachineDeployment) ([]byte, error) { return rollout.PausePatch(d, pause) })
	}
}

type rolloutCmd struct {
	s    Streams
	c    *clients
	name string
}

func (r rolloutCmd) get(ctx context.Context) (*v1alpha1.MachineDeployment, error) {
	d, err := r.c.machines.MachineV1alpha1().MachineDeployments(r.c.namespace).Get(ctx, r.name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading the MachineDeployment: %w", err)
	}
	return d, nil
}

func (r rolloutCmd) sets(ctx context.Context) ([]*v1alpha1.MachineSet, error) {
	list, err := r.c.machines.MachineV1alpha1().MachineSets(r.c.namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing MachineSets: %w", err)
	}
	out := make([]*v1alpha1.MachineSet, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, &list.Items[i])
	}
	return out, nil
}

// patch applies the merge patch build makes from the deployment as stored,
// and says what it did.
func (r rolloutCmd) patch(ctx context.Context, did string, build func(*v1alpha1.MachineDeployment) ([]byte, error)) error {
	// The patch carries the resourceVersion it was decided on; the
	// controller writes the status all the time, so a conflict is decided
	// again on the deployment as it is now.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d, err := r.get(ctx)
		if err != nil {
			return err
		}
		p, err := build(d)
		if err != nil {
			return err
		}
		_, err = r.c.machines.MachineV1alpha1().MachineDeployments(r.c.namespace).Patch(ctx, r.name, types.MergePatchType, p, metav1.PatchOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("patching the MachineDeployment: %w", err)
	}
	_, err = fmt.Fprintf(r.s.Out, "%s %s\n", kindName(r.name), did)
	return err
}

// status prints the rollout's status whenever it changes until it is
// done, it fails (non-zero exit), or timeout passes.
func (r rolloutCmd) status(ctx context.Context, wait bool, timeout time.Duration) error {
	if !wait {
		d, err := r.get(ctx)
		if err != nil {
			return err
		}
		msg, _, err := rollout.Status(d)
		fmt.Fprint(r.s.Out, msg)
		return err
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	api := r.c.machines.MachineV1alpha1().MachineDeployments(r.c.namespace)
	selector := fields.OneTermEqualSelector("metadata.name", r.name).String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = selector
			return api.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = selector
			return api.Watch(ctx, o)
		},
	}
	last := ""
	_, err := watchtools.UntilWithSync(ctx, lw, &v1alpha1.MachineDeployment{}, func(store cache.Store) (bool, error) {
		if _, ok, err := store.Get(&metav1.ObjectMeta{Namespace: r.c.namespace, Name: r.name}); err == nil && !ok {
			return false, fmt.Errorf("machinedeployments.machine.sapcloud.io %q not found", r.name)
		}
		return false, nil
	}, func(ev watch.Event) (bool, error) {
		switch ev.Type {
		case watch.Deleted:
			return false, fmt.Errorf("machinedeployment %q was deleted", r.name)
		case watch.Added, watch.Modified:
			d, ok := ev.Object.(*v1alpha1.MachineDeployment)
			if !ok {
				return false, fmt.Errorf("unexpected object %T", ev.Object)
			}
			msg, done, err := rollout.Status(d)
			if msg != last {
				fmt.Fprint(r.s.Out, msg)
				last = msg
			}
			return done, err
		}
		return false, nil
	})
	if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("timed out waiting for the condition after %v: %w", timeout, err)
	}
	return err
}
