package controlplane

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// kubeVersion is the Kubernetes release the control plane runs;
// hack/testenv.sh builds the same one.
const kubeVersion = "v1.37.1"

// envDir locates the built binaries in $MCM_TESTENV_DIR/bin.
const envDir = "MCM_TESTENV_DIR"

// EnvKeep set to 1 keeps a cluster's temp dir (etcd data, certificates,
// logs) after Stop, for inspection.
const EnvKeep = "MCM_TESTENV_KEEP"

// defaultNodeMonitorGracePeriod is kube-controller-manager's
// --node-monitor-grace-period unless Options say otherwise: short, so
// that a silent node goes Unknown quickly, and still twice the 10 s in
// which a kubelet (and the simulated one, by default) renews its lease.
const defaultNodeMonitorGracePeriod = 20 * time.Second

// Options configure a cluster's components. The zero value is the default.
type Options struct {
	// NodeMonitorGracePeriod is kube-controller-manager's
	// --node-monitor-grace-period: how long a node's lease may go
	// unrenewed before the node is marked Unknown. It must exceed the
	// lease renew period of the cluster's kubelets with margin, so
	// clusters whose simulated kubelets renew less often (thousands of
	// nodes on a small machine) need more than the default. Zero means
	// 20 s, twice a kubelet's renew period.
	NodeMonitorGracePeriod time.Duration
}

// Cluster is one running control plane. Its methods are safe for
// concurrent use, except the outage methods (outage.go).
type Cluster struct {
	cluster *cluster
	client  kubernetes.Interface
	kubectl string
}

// StartError is a failed Start, with the tail of the component logs,
// which nobody else prints.
type StartError struct {
	Err  error
	Logs string
}

func (e *StartError) Error() string { return e.Err.Error() + "\n" + e.Logs }

func (e *StartError) Unwrap() error { return e.Err }

// BinDir returns the directory of the control plane's binaries, or an
// error naming what is missing and how to build it.
func BinDir() (string, error) {
	dir, missing := binDir()
	if missing != "" {
		return "", fmt.Errorf("%s; run 'make testenv' to build it", missing)
	}
	return dir, nil
}

// binDir finds the binaries, or says what is missing.
func binDir() (dir, missing string) {
	root := os.Getenv(envDir)
	if root == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Sprintf("%s is unset and the home directory is unknown", envDir)
		}
		root = filepath.Join(home, ".cache", "mcm", "testenv", kubeVersion)
	}
	dir = filepath.Join(root, "bin")
	for _, b := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl"} {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			return "", fmt.Sprintf("%s not found in %s", b, dir)
		}
	}
	return dir, ""
}

// Start brings up a cluster named name (its temp dir says so) from the
// binaries of BinDir, waits until it works, and runs setup against it,
// e.g. crds.Install. Stop it with Stop. When the components fail, the
// error is a *StartError with their last log lines.
func Start(ctx context.Context, name string, opts Options, setup ...func(context.Context, *rest.Config) error) (*Cluster, error) {
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	keep := os.Getenv(EnvKeep) == "1"
	c, err := startCluster(ctx, name, bin, opts)
	if err != nil {
		if c == nil {
			return nil, err
		}
		logs := c.tails(nil, 60)
		_ = c.stop(keep)
		return nil, &StartError{Err: err, Logs: logs}
	}
	client, err := kubernetes.NewForConfig(c.config)
	if err != nil {
		_ = c.stop(keep)
		return nil, fmt.Errorf("creating client: %w", err)
	}
	cl := &Cluster{cluster: c, client: client, kubectl: filepath.Join(bin, "kubectl")}
	for _, f := range setup {
		if err := f(ctx, cl.Config()); err != nil {
			logs := c.tails(nil, 60)
			_ = c.stop(keep)
			return nil, &StartError{Err: fmt.Errorf("setup of the %s cluster: %w", name, err), Logs: logs}
		}
	}
	return cl, nil
}

// Stop ends the cluster's components and removes its files, unless
// MCM_TESTENV_KEEP=1.
func (c *Cluster) Stop() error {
	return c.cluster.stop(os.Getenv(EnvKeep) == "1")
}

// Dir is the cluster's temp dir: data, certificates, kubeconfig and logs.
func (c *Cluster) Dir() string { return c.cluster.dir }

// Config returns a fresh copy of the admin client configuration; callers
// may change it freely.
func (c *Cluster) Config() *rest.Config {
	return rest.CopyConfig(c.cluster.config)
}

// Kubeconfig is the path of a kubeconfig file for the admin user.
func (c *Cluster) Kubeconfig() string { return c.cluster.kubeconfig }

// Client is a clientset for the admin user.
func (c *Cluster) Client() kubernetes.Interface { return c.client }

// Kubectl runs kubectl against the cluster and returns its combined output.
func (c *Cluster) Kubectl(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, c.kubectl, append([]string{"--kubeconfig", c.cluster.kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("kubectl %s: %w", strings.Join(args, " "), err)
	}
	return out, nil
}

// WaitForServiceAccount waits until the service-account controller
// created the default service account of namespace ns: pods cannot be
// created there before.
func (c *Cluster) WaitForServiceAccount(ctx context.Context, ns string) error {
	return waitForServiceAccount(ctx, c.client, ns, nil)
}

// LogMarks are the current ends of the components' logs, for LogsSince.
func (c *Cluster) LogMarks() map[string]int64 { return c.cluster.logMarks() }

// LogsSince returns up to maxLines last lines each component logged since
// marks (from LogMarks; nil: since its start).
func (c *Cluster) LogsSince(marks map[string]int64, maxLines int) string {
	return c.cluster.tails(marks, maxLines)
}
